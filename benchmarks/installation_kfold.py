"""The installation protocol's figures by k-fold cross-validation on the NON-sealed letters
only (issue 28): what the model is developed with, before the one sealed run.

Every non-sealed letter of the five groups (4,847) and the generated legitimate letters are
replayed once in date order, as ``pochta model train`` replays its letters (features as known
at each letter's time, the counters learning true labels). The corpus letters are then cut
into ``--folds`` parts by a hash of the file (as the sealed slice is cut: every group and
date keeps its share); for each part, a model is fitted on the other parts and the generated
letters (:func:`pochta_factory.fitting.fit`, the token table of the other parts), and asked
about the part. A letter is filed as spam when the rules say phishing or its P(spam) reaches
the threshold (a known sender's letter the model is sure of is ham although the rules say
phishing: ``verdict.known_sender``); the threshold is chosen as ``pochta model train``
chooses it (the lowest at which at most ``training.MAX_FPR`` of the corpus ham's
out-of-fold probabilities lie).

Optimistic against the sealed run in one way: a part's letters see counters that learned the
true label of every earlier letter (the sealed run's counters learn pochta's own verdicts
for the sealed letters); the same for every variant, so variants compare.

    python benchmarks/installation_kfold.py                   # the factory's defaults
    python benchmarks/installation_kfold.py --ham-weight 1    # every letter weighs the same
    python benchmarks/installation_kfold.py --word-weights    # with (or --no-) tokens.weights

Beside the factory's threshold rule (``groups``), ``by_ham`` gives the spam caught by P(spam)
alone at a threshold just above the N-th most spam-like corpus ham, for 0.2 %, 0.5 % and 1 %
of the corpus ham, and ``log_loss`` the out-of-fold log loss: the rule's threshold sits on
the seventh most spam-like of 3,349 ham letters, so a variant can move it by a few letters
that say little about the rest; these say how the whole ranking moved.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.antispam import features
from pochta.antispam import tokens as tokens_mod
from pochta.antispam.auth.results import NO_AUTH
from pochta.antispam.model import design
from pochta.antispam.rules import ruleset as rules
from pochta.antispam.signs import checks
from pochta.antispam.signs.registry import Sign
from pochta.antispam.verdict import KNOWN_SENDER_BELOW, known_sender, model_columns
from pochta.mime.letter import parse
from pochta_factory import corpus, legit, training
from pochta_factory.fitting import LEARNING_RATE, fit

CACHE = Path(tempfile.gettempdir()) / "pochta-installation-kfold"


def fold_of(raw: bytes, folds: int) -> int:
    """A letter's part: from the second byte of its SHA-256 (the first decides sealing)."""
    return hashlib.sha256(raw).digest()[1] % folds


def replayed(generated: int) -> tuple[training.Replay, list[int], list[bool]]:
    """The replay of every non-sealed letter and ``generated`` letters, each corpus letter's
    fold key (the second hash byte; -1 for a generated letter), and whether the rules call it
    phishing. Cached in the temporary directory (by the code's inputs: the number of
    generated letters, the source of the replay's modules and the default rules)."""
    key = hashlib.sha256(f"{generated}".encode())
    for mod in (training, design, rules, checks, features):  # the signs', the features' code
        key.update(Path(mod.__file__ or "").read_bytes())
    key.update(rules.default_text().encode())  # the rules' points are features too
    path = CACHE / f"replay-{key.hexdigest()[:16]}.pickle"
    if path.is_file():
        with path.open("rb") as fh:
            data, hashes, phishing = pickle.load(fh)
        return retokenized(data, generated), hashes, phishing
    letters = list(corpus.unsealed())
    samples = training.training_samples(letters, generated)
    scanner = training.fresh_scanner()
    note(f"replaying {len(samples)} letters")
    data = training.replay(samples, scanner, learn_truth=True)
    hashes = []
    phishing = []
    for s, row in zip(samples, data.rows, strict=True):
        hashes.append(hashlib.sha256(s.raw).digest()[1] if s.group != training.GENERATED else -1)
        letter = parse(s.raw)
        analysis = scanner.analyzer.analyze(letter, s.envelope)
        hits = rules.evaluate(scanner.rules, dict(row), list(analysis.signs), analysis.auth)
        phishing.append(rules.verdict(hits, scanner.rules.actions) == "phishing")
    CACHE.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        pickle.dump((data, hashes, phishing), fh)
    return data, hashes, phishing


def retokenized(data: training.Replay, generated: int) -> training.Replay:
    """``data`` with every letter's tokens as :mod:`pochta.antispam.tokens` cuts them now
    (cached by that module's source): a change of the words needs no new replay."""
    key = hashlib.sha256(f"{generated}".encode() + Path(tokens_mod.__file__ or "").read_bytes())
    path = CACHE / f"tokens-{key.hexdigest()[:16]}.pickle"
    if path.is_file():
        with path.open("rb") as fh:
            data.tokens = pickle.load(fh)
        return data
    samples = training.training_samples(list(corpus.unsealed()), generated)
    note(f"tokenizing {len(samples)} letters")
    data.tokens = [tokens_mod.tokenize(parse(s.raw)) for s in samples]
    with path.open("wb") as fh:
        pickle.dump(data.tokens, fh)
    return data


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--generated", type=int, default=legit.COUNT)
    p.add_argument("--iterations", type=int, default=400)
    p.add_argument("--seed", type=int, default=training.SEED)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--learning-rate", type=float, default=LEARNING_RATE)
    p.add_argument(
        "--ham-weight", type=float, default=training.HAM_WEIGHT, help="a ham letter's weight"
    )
    p.add_argument(
        "--word-weights",
        action=argparse.BooleanOptionalAction,
        default=training.WORD_WEIGHTS,
        help="the tokens.weights column (training.WORD_WEIGHTS; default: the factory's)",
    )
    p.add_argument("--tag", default="", help="names the out-of-fold file")
    args = p.parse_args()
    training.WORD_WEIGHTS = args.word_weights
    started = time.perf_counter()
    data, hashes, phishing = replayed(args.generated)
    note(f"replayed in {time.perf_counter() - started:.0f} s")
    columns = design.model_columns(model_columns())
    n = len(data.rows)
    part = [h % args.folds if h >= 0 else -1 for h in hashes]
    oof = [0.0] * n
    for k in range(args.folds):
        train_idx = [i for i in range(n) if part[i] != k]
        test_idx = [i for i in range(n) if part[i] == k]
        train_rows, test_rows = training.token_rows(data, train_idx, test_idx)
        labels = [data.labels[i] for i in train_idx]
        weights = [1.0 if y else args.ham_weight for y in labels]
        model = fit(train_rows, labels, columns, iterations=args.iterations, seed=args.seed,
                    depth=args.depth, weights=weights,
                    learning_rate=args.learning_rate)  # fmt: skip
        for i, prob in zip(test_idx, model.probabilities(test_rows), strict=True):
            oof[i] = prob
        note(f"fold {k + 1}/{args.folds} at {time.perf_counter() - started:.0f} s")
    real = [i for i in range(n) if part[i] >= 0]
    # the rules' phishing verdict as Scanner.decide gives it: a known sender's letter the
    # model is sure of is ham (verdict.known_sender; offline, no authentication results)
    phishing = [
        ph and not (oof[i] < KNOWN_SENDER_BELOW and known_sender(row, signs_of(row), NO_AUTH, ()))
        for i, (ph, row) in enumerate(zip(phishing, data.rows, strict=True))
    ]
    with (CACHE / f"oof{args.tag}.pickle").open("wb") as fh:
        pickle.dump({"oof": oof, "part": part}, fh)
    threshold = training._threshold([oof[i] for i in real], [data.labels[i] for i in real])
    emit(
        {
            "benchmark": "installation_kfold",
            "machine": machine(Path(tempfile.gettempdir())),
            "folds": args.folds,
            "iterations": args.iterations,
            "generated": args.generated,
            "threshold": threshold,
            "depth": args.depth,
            "learning_rate": args.learning_rate,
            "ham_weight": args.ham_weight,
            "word_weights": args.word_weights,
            "groups": figures(data, real, oof, phishing, threshold),
            "at": {
                str(cut): figures(data, real, oof, phishing, cut, short=True)
                for cut in (0.5, 0.7, 0.8, 0.9, 0.95)
            },
            **ranking(oof, [data.labels[i] for i in range(n)], real),
            "seconds": round(time.perf_counter() - started, 1),
        }
    )


BY_HAM = (0.002, 0.005, 0.01)
"""Shares of the corpus ham for ``by_ham`` (see the module's doc)."""


def ranking(oof: list[float], labels: list[int], idx: list[int]) -> dict[str, Any]:
    """``by_ham`` and ``log_loss`` of these letters' out-of-fold probabilities."""
    ham = sorted((oof[i] for i in idx if labels[i] == 0), reverse=True)
    spam = [oof[i] for i in idx if labels[i] == 1]
    by_ham = {}
    for share in BY_HAM:
        cut = ham[min(int(share * len(ham)), len(ham) - 1)] + 1e-6
        by_ham[f"{share:.1%}"] = {"ham_above": sum(p >= cut for p in ham),
                                  "spam_caught": sum(p >= cut for p in spam)}  # fmt: skip
    loss = -sum(
        math.log(min(max(oof[i] if labels[i] else 1.0 - oof[i], 1e-9), 1.0)) for i in idx
    ) / len(idx)
    return {"by_ham": by_ham, "log_loss": round(loss, 4)}


def signs_of(row: dict[str, float]) -> list[Sign]:
    """The signs a replayed letter showed (its ``sign.*`` columns)."""
    return [
        Sign(k.removeprefix("sign."), "", "") for k, v in row.items() if k.startswith("sign.") and v
    ]


def figures(
    data: training.Replay,
    idx: list[int],
    oof: list[float],
    phishing: list[bool],
    cut: float,
    *,
    short: bool = False,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for g in sorted({data.groups[i] for i in idx}):
        mine = [i for i in idx if data.groups[i] == g]
        spam = [oof[i] >= cut or phishing[i] for i in mine]
        caught = sum(spam)
        if short:
            out[g] = caught
            continue
        row: dict[str, Any] = {"letters": len(mine), "filed_spam": caught}
        row["share"] = round(caught / len(mine), 4)
        row["by_rules_phishing"] = sum(phishing[i] for i in mine)
        out[g] = row
    return out


if __name__ == "__main__":
    main()
