"""Rules for the spam threshold compared on k-fold out-of-fold probabilities of the NON-sealed
letters (issue 28): how many spam letters each rule catches and how many ham letters it files,
and how much the threshold itself moves when the ham it is chosen from changes a little.

The factory's rule (``training._threshold``, here ``rank``) takes the seventh most spam-like of
the 3,349 corpus ham letters (0.2 %): one order statistic, so a variant that moves a handful of
ham letters' probabilities by the fitting's chance moves the threshold, and every spam letter
near it, with nothing said about the rest. The other rules read the ham's whole upper tail:

- ``tail``: the ham's logits above the ``TAIL``-th most spam-like as an exponential tail (the
  peaks-over-threshold estimate: the mean excess over that letter), its 0.2 % point;
- ``hd``: the Harrell-Davis estimate of the 0.2 % point (every ham letter's logit weighted by a
  beta kernel around the seventh; scipy, this script only).

Each rule is measured two ways: ``in_sample`` as ``installation_kfold.py`` does (the threshold
chosen from every letter's out-of-fold probability and applied to the same letters), and
``nested``: each fold's letters filed at the threshold the rule chose from the OTHER folds'
ham, the honest figure for letters the threshold never saw. ``spread``: the lowest and the
highest of those five thresholds.

    python benchmarks/installation_kfold.py --tag base       # leaves oofbase.pickle and the replay
    python benchmarks/threshold_rules.py --run base=/tmp/pochta-installation-kfold/oofbase.pickle

``--run NAME=FILE`` takes an out-of-fold file; the replay is the one ``replay-*.pickle`` in the
same directory (a run made with a TMPDIR of its own leaves both there). ``NAME=A+B``: the mean
of two runs' probabilities (``installation_kfold.py --seed``: two fits of the same letters,
an ensemble of two models); ``--mean raw``: of their raw scores (log-odds).
"""

from __future__ import annotations

import argparse
import math
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _common import emit
from installation_kfold import figures, signs_of
from pochta.antispam.auth.results import NO_AUTH
from pochta.antispam.verdict import KNOWN_SENDER_BELOW, known_sender
from pochta_factory import training

TAIL = 40
"""Ham letters whose logits make the exponential tail (1.2 % of the 3,349 corpus ham)."""

Rule = Callable[[Sequence[float]], float]


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1.0 - 1e-9)
    return math.log(p / (1.0 - p))


def _prob(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _clip(t: float) -> float:
    return max(0.5, min(0.99, t))


def rank(ham: Sequence[float]) -> float:
    """The factory's rule: just above the ham letter at 0.2 % from the top."""
    return training._threshold(list(ham), [0] * len(ham))


def tail(ham: Sequence[float]) -> float:
    """The 0.2 % point of an exponential tail fitted to the ham's top ``TAIL`` logits."""
    top = sorted((_logit(p) for p in ham), reverse=True)
    base = top[TAIL]
    excess = sum(x - base for x in top[:TAIL]) / TAIL
    wanted = training.MAX_FPR * len(ham)
    return _clip(_prob(base + excess * math.log(TAIL / wanted)))


def hd(ham: Sequence[float]) -> float:
    """Harrell and Davis's estimate of the (1 - MAX_FPR) quantile of the ham's logits."""
    from scipy.stats import beta  # type: ignore[import-untyped]  # this script's only scipy

    xs = sorted(_logit(p) for p in ham)
    n = len(xs)
    q = 1.0 - training.MAX_FPR
    a, b = q * (n + 1), (1.0 - q) * (n + 1)
    cdf = beta(a, b).cdf
    # only the top ~60 letters carry weight above 1e-12
    est = 0.0
    for i in range(max(1, n - 200), n + 1):
        w = cdf(i / n) - cdf((i - 1) / n)
        est += w * xs[i - 1]
    return _clip(_prob(est))


RULES: dict[str, Rule] = {"rank": rank, "tail": tail, "hd": hd}


def replay_beside(oof_file: Path) -> Path:
    found = sorted(oof_file.parent.glob("replay-*.pickle"))
    if len(found) != 1:
        raise SystemExit(f"{oof_file.parent}: {len(found)} replay files, want one")
    return found[0]


def mean_of(runs: Sequence[Sequence[float]], how: str = "prob") -> list[float]:
    """Per letter, the mean of several runs' probabilities (``prob``), or the probability of
    the mean of their raw scores (``raw``: the log-odds, what one model made of the runs'
    models by CatBoost's ``sum_models`` with weights 1/K gives)."""
    if how not in ("prob", "raw"):
        raise ValueError(f"mean: prob or raw, not {how!r}")
    k = len(runs)
    if how == "prob":
        return [sum(ps) / k for ps in zip(*runs, strict=True)]
    return [_prob(sum(_logit(p) for p in ps) / k) for ps in zip(*runs, strict=True)]


def measure(
    oof_files: Sequence[Path], how: str = "prob", rules: Sequence[str] = tuple(RULES)
) -> dict[str, Any]:
    """The rules on the mean of these runs' out-of-fold probabilities (runs of one replay:
    the same letters, folds and signs, another fitting seed); ``how``: :func:`mean_of`."""
    with replay_beside(oof_files[0]).open("rb") as fh:
        data, _hashes, phishing = pickle.load(fh)
    runs = []
    for file in oof_files:
        with file.open("rb") as fh:
            runs.append(pickle.load(fh))
    part = runs[0]["part"]
    if any(r["part"] != part for r in runs):
        raise SystemExit("the runs' folds differ")
    oof = mean_of([r["oof"] for r in runs], how) if len(runs) > 1 else list(runs[0]["oof"])
    return scored(data, phishing, part, oof, rules)


def scored(
    data: training.Replay,
    phishing: Sequence[bool],
    part: Sequence[int],
    oof: Sequence[float],
    rules: Sequence[str] = tuple(RULES),
) -> dict[str, Any]:
    """The rules on these out-of-fold probabilities (``data``, ``phishing``: the replay's;
    ``part``: each letter's fold, -1 for a generated letter)."""
    n = len(part)
    oof = list(oof)
    phishing = [
        ph and not (oof[i] < KNOWN_SENDER_BELOW and known_sender(row, signs_of(row), NO_AUTH, ()))
        for i, (ph, row) in enumerate(zip(phishing, data.rows, strict=True))
    ]
    real = [i for i in range(n) if part[i] >= 0]
    folds = sorted({part[i] for i in real})
    out: dict[str, Any] = {}
    for name in rules:
        rule = RULES[name]
        cut = rule([oof[i] for i in real if data.labels[i] == 0])
        nested: dict[str, int] = {}
        cuts = []
        for k in folds:
            mine = [i for i in real if part[i] == k]
            cut_k = rule([oof[i] for i in real if part[i] != k and data.labels[i] == 0])
            cuts.append(cut_k)
            for g, caught in figures(data, mine, oof, phishing, cut_k, short=True).items():
                nested[g] = nested.get(g, 0) + caught
        out[name] = {
            "threshold": round(cut, 4),
            "in_sample": figures(data, real, oof, phishing, cut, short=True),
            "nested": nested,
            "spread": [round(min(cuts), 4), round(max(cuts), 4)],
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--run", action="append", required=True,
        help="NAME=oofTAG.pickle, or NAME=oofA.pickle+oofB.pickle: their mean",
    )  # fmt: skip
    p.add_argument(
        "--mean", choices=("prob", "raw"), default="prob",
        help="several runs: the mean of their probabilities, or of their raw scores",
    )  # fmt: skip
    args = p.parse_args()
    runs = {}
    for item in args.run:
        name, _, file = item.partition("=")
        runs[name] = measure([Path(f) for f in file.split("+")], args.mean)
    emit({"benchmark": "threshold_rules", "tail": TAIL, "runs": runs})


if __name__ == "__main__":
    main()
