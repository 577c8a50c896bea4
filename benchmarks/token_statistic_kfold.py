"""The word statistic alone (no model), out of fold on the NON-sealed corpus letters: how many
of the 1,498 spam letters a word score catches at 0.2 % and 0.5 % of the 3,349 ham letters
(issue 28's development; BENCHMARKS.md "Developing the model by k-fold"). Cheap (a minute or
two): for choosing what to try in the model with ``installation_kfold.py``.

The letters are cut into the same parts as ``installation_kfold.py`` (the second byte of the
file's SHA-256); each part is scored by a table of the other four. Scores compared, all over
:func:`pochta.antispam.tokens.tokenize`'s words as they are now:

    fisher      tokens.TokenTable.score (Robinson's f(w), Fisher's chi-square), with the
                constants STRENGTH / MAX_CLUES / MIN_DISTANCE of each row
    nb          a naive-Bayes sum of the present words' log-ratios, each capped at +-3
    lr          a logistic regression over the same words (AdaGrad, 8 passes, seed 0)
    weights     the same regression as the factory fits it for a model's ``tokens.weights``
                (:func:`pochta_factory.wordweights.fit_weights`: each letter's words sorted,
                so the result does not hang on the process's string hashing)

    python benchmarks/token_statistic_kfold.py
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.antispam import tokens
from pochta.mime.letter import parse
from pochta_factory import corpus, wordweights

Scorer = Callable[[frozenset[str]], float]
FISHER = ((1.0, 150, 0.1), (0.45, 150, 0.1), (1.0, 50, 0.1), (1.0, 30, 0.1), (1.0, 75, 0.1))


def fisher(strength: float, clues: int, distance: float) -> Callable[..., Scorer]:
    def make(toks: Sequence[frozenset[str]], labels: Sequence[int]) -> Scorer:
        table = tokens.learn(toks, labels)

        def score(t: frozenset[str]) -> float:
            saved = tokens.STRENGTH, tokens.MAX_CLUES, tokens.MIN_DISTANCE
            tokens.STRENGTH, tokens.MAX_CLUES, tokens.MIN_DISTANCE = strength, clues, distance
            try:
                return table.score(t)
            finally:
                tokens.STRENGTH, tokens.MAX_CLUES, tokens.MIN_DISTANCE = saved

        return score

    return make


def naive_bayes(toks: Sequence[frozenset[str]], labels: Sequence[int]) -> Scorer:
    spam: Counter[str] = Counter()
    ham: Counter[str] = Counter()
    for t, y in zip(toks, labels, strict=True):
        (spam if y else ham).update(t)
    n_spam = sum(labels)
    n_ham = len(labels) - n_spam

    def score(t: frozenset[str]) -> float:
        z = 0.0
        for w in t:
            if spam[w] + ham[w] >= tokens.MIN_LETTERS:
                r = math.log((spam[w] + 0.5) / (n_spam + 1))
                r -= math.log((ham[w] + 0.5) / (n_ham + 1))
                z += max(-3.0, min(3.0, r))
        return z

    return score


def logistic(toks: Sequence[frozenset[str]], labels: Sequence[int]) -> Scorer:
    seen: Counter[str] = Counter()
    for t in toks:
        seen.update(t)
    w: dict[str, float] = {}
    g2: dict[str, float] = {}
    bias = 0.0
    order = list(range(len(toks)))
    rng = random.Random(0)
    for _ in range(8):
        rng.shuffle(order)
        for i in order:
            feats = [x for x in toks[i] if seen[x] >= tokens.MIN_LETTERS]
            z = bias + sum(w.get(x, 0.0) for x in feats)
            g = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z)))) - labels[i]
            bias -= 0.05 * g
            for x in feats:
                gx = g + 1e-4 * w.get(x, 0.0)
                g2[x] = g2.get(x, 0.0) + gx * gx
                w[x] = w.get(x, 0.0) - 0.2 * gx / math.sqrt(g2[x] + 1e-8)
    return lambda t: bias + sum(w.get(x, 0.0) for x in t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folds", type=int, default=5)
    args = p.parse_args()
    started = time.perf_counter()
    letters = list(corpus.unsealed())
    toks = [tokens.tokenize(parse(m.raw)) for m in letters]
    labels = [int(m.label == "spam") for m in letters]
    groups = [m.group for m in letters]
    part = [hashlib.sha256(m.raw).digest()[1] % args.folds for m in letters]
    note(f"tokenized {len(letters)} letters in {time.perf_counter() - started:.0f} s")
    scorers: dict[str, Callable[..., Scorer]] = {
        f"fisher s={s} clues={c} distance={d}": fisher(s, c, d) for s, c, d in FISHER
    }
    scorers["nb"] = naive_bayes
    scorers["lr"] = logistic
    scorers["weights"] = lambda t, y: wordweights.fit_weights(t, y).score
    rows: dict[str, Any] = {}
    for name, make in scorers.items():
        oof = [0.0] * len(toks)
        for k in range(args.folds):
            train = [i for i in range(len(toks)) if part[i] != k]
            score = make([toks[i] for i in train], [labels[i] for i in train])
            for i in range(len(toks)):
                if part[i] == k:
                    oof[i] = score(toks[i])
        ham = sorted((oof[i] for i in range(len(toks)) if labels[i] == 0), reverse=True)
        row: dict[str, Any] = {}
        for share in (0.002, 0.005):
            cut = ham[int(share * len(ham))] + 1e-9
            caught = {g: sum(oof[i] >= cut for i in range(len(toks)) if groups[i] == g)
                      for g in sorted(set(groups))}  # fmt: skip
            caught["spam"] = sum(oof[i] >= cut for i in range(len(toks)) if labels[i])
            row[f"at_ham_{share}"] = caught
        rows[name] = row
        note(f"{name}: {row}")
    emit(
        {
            "benchmark": "token_statistic_kfold",
            "machine": machine(Path(tempfile.gettempdir())),
            "letters": len(toks),
            "folds": args.folds,
            "scores": rows,
            "seconds": round(time.perf_counter() - started, 1),
        }
    )


if __name__ == "__main__":
    main()
