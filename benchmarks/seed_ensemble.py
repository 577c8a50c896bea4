"""Averaging several fitting seeds' models, measured out of fold on the NON-sealed letters
(issue 28, helper ``spam28e``; BENCHMARKS.md): does the mean of K models steady the factory's
threshold rule against the one seed it is fitted with?

Each seed's out-of-fold file comes from one run on the same replay (the same letters, folds,
signs and word columns; only CatBoost's ``random_seed`` differs)::

    python benchmarks/installation_kfold.py --tag base               # seed 0, and the replay
    python benchmarks/kfold_variants.py --tag s1 --seed 1             # seeds 1, 2, ...
    python benchmarks/seed_ensemble.py --seeds 0-8 --set 0,1,2 --set 3,4,5 --every 3 --every 5

For every single seed and every ``--set`` (the mean of its seeds' probabilities, ``prob``, and
of their raw scores, ``raw``: what one ``sum_models`` model with weights 1/K gives), the
factory's rule (``rank``: the 7th most spam-like of the 3,349 corpus ham) in sample and nested
(each fold at the threshold the other folds' ham chose: the figure for unseen letters), as
``threshold_rules.py`` measures them; ``by_ham``: spam caught by P(spam) alone at 0.2 % of the
ham; the out-of-fold log loss. Cells: spam caught of 1,498 / easy-ham-1 / easy-ham-2 /
hard-ham-1 in Spam. Seed 0's file is ``oofbase.pickle``, seed S's ``oofsS.pickle``.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import emit, note
from installation_kfold import CACHE, ranking
from threshold_rules import mean_of, replay_beside, scored

SPAM = ("spam-1", "spam-2")
HAM = ("easy-ham-1", "easy-ham-2", "hard-ham-1")


def file_of(directory: Path, seed: int) -> Path:
    return directory / ("oofbase.pickle" if seed == 0 else f"oofs{seed}.pickle")


def seeds_of(text: str) -> list[int]:
    """``0-4`` or ``0,2,5``: a list of seeds."""
    out: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.partition("-")
        out.extend(range(int(lo), int(hi) + 1) if dash else [int(lo)])
    return out


def cell(groups: dict[str, int]) -> list[int]:
    return [sum(groups[g] for g in SPAM), *(groups[g] for g in HAM)]


class Runs:
    """The replay and every seed's out-of-fold probabilities, read once."""

    def __init__(self, directory: Path, seeds: Sequence[int]) -> None:
        with replay_beside(file_of(directory, seeds[0])).open("rb") as fh:
            self.data, _hashes, self.phishing = pickle.load(fh)
        self.oof: dict[int, list[float]] = {}
        self.part: list[int] = []
        for seed in seeds:
            with file_of(directory, seed).open("rb") as fh:
                run = pickle.load(fh)
            if self.part and run["part"] != self.part:
                raise SystemExit(f"seed {seed}: the folds differ")
            self.part = run["part"]
            self.oof[seed] = run["oof"]
        self.real = [i for i, k in enumerate(self.part) if k >= 0]

    def row(self, seeds: Sequence[int], how: str = "prob") -> dict[str, Any]:
        """The factory's rule on the mean of these seeds' models (:func:`mean_of`)."""
        runs = [self.oof[s] for s in seeds]
        oof = mean_of(runs, how) if len(runs) > 1 else runs[0]
        rank = scored(self.data, self.phishing, self.part, oof, rules=("rank",))["rank"]
        ranked = ranking(oof, self.data.labels, self.real)
        return {
            "threshold": rank["threshold"],
            "spread": rank["spread"],
            "in_sample": cell(rank["in_sample"]),
            "nested": cell(rank["nested"]),
            "p_alone_0.2%": ranked["by_ham"]["0.2%"]["spam_caught"],
            "log_loss": ranked["log_loss"],
        }


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean, lowest and highest of each cell over these rows (spam, then ham letters)."""
    out: dict[str, Any] = {"rows": len(rows)}
    for key in ("in_sample", "nested"):
        cells = list(zip(*(r[key] for r in rows), strict=True))
        out[key] = {
            name: [round(statistics.fmean(c), 2), min(c), max(c)]
            for name, c in zip(("spam", *HAM), cells, strict=True)
        }
        hams = [sum(r[key][1:]) for r in rows]
        out[key]["ham"] = [round(statistics.fmean(hams), 2), min(hams), max(hams)]
    for key in ("threshold", "p_alone_0.2%", "log_loss"):
        values = [r[key] for r in rows]
        out[key] = [round(statistics.fmean(values), 4), min(values), max(values)]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", type=Path, default=CACHE, help="the out-of-fold files and replay")
    p.add_argument("--seeds", default="0", help="the seeds' runs to read: 0-8 or 0,3,5")
    p.add_argument("--set", action="append", default=[], help="seeds averaged: 0,1,2")
    p.add_argument(
        "--every", type=int, action="append", default=[],
        help="K: the summary over every set of K of the seeds read",
    )  # fmt: skip
    args = p.parse_args()
    seeds = seeds_of(args.seeds)
    runs = Runs(args.dir, seeds)
    single = {str(s): runs.row([s]) for s in seeds}
    out: dict[str, Any] = {
        "benchmark": "seed_ensemble",
        "single": single,
        "single_summary": summary(list(single.values())),
        "sets": {},
        "every": {},
    }
    for text in args.set:
        chosen = seeds_of(text)
        out["sets"][text] = {how: runs.row(chosen, how) for how in ("prob", "raw")}
        note(f"set {text}: {out['sets'][text]['prob']['nested']} nested (prob)")
    for k in args.every:
        for how in ("prob", "raw"):
            rows = [runs.row(c, how) for c in itertools.combinations(seeds, k)]
            out["every"][f"{k} {how}"] = summary(rows)
        note(f"every {k}: {out['every'][f'{k} prob']['nested']['spam']} nested spam (prob)")
    emit(out)


if __name__ == "__main__":
    main()
