"""Fitting the word weights a trained model carries (:class:`pochta.antispam.tokens.WordWeights`):
a logistic regression over the training letters' tokens, as ``benchmarks/token_statistic_kfold.py``
measured it out of fold (BENCHMARKS.md, "Developing the model by k-fold").

Online, with AdaGrad: :data:`PASSES` passes over the letters in an order shuffled with a fixed
seed, a small L2 pull toward 0; only tokens seen in at least ``tokens.MIN_LETTERS`` letters
get a weight (the same words the token table keeps). The few passes are the regularization
that matters: a weight grows only as far as its letters push it in that many steps, so a word
seen in a handful of letters stays small. Deterministic for a seed.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence

from pochta.antispam import tokens as tokens_mod

PASSES = 8
RATE = 0.2
BIAS_RATE = 0.05
L2 = 1e-4
KEEP = 1e-4
"""Weights smaller than this in size are left out of the file (they change no score)."""


def fit_weights(
    toks: Sequence[Iterable[str]], labels: Sequence[int], *, seed: int = 0, passes: int = PASSES
) -> tokens_mod.WordWeights:
    """The weights of these letters (label 1: spam)."""
    letters = [frozenset(t) for t in toks]
    seen: Counter[str] = Counter()
    for t in letters:
        seen.update(t)
    feats = [sorted(x for x in t if seen[x] >= tokens_mod.MIN_LETTERS) for t in letters]
    w: dict[str, float] = {}
    g2: dict[str, float] = {}
    bias = 0.0
    order = list(range(len(letters)))
    rng = random.Random(seed)
    for _ in range(passes):
        rng.shuffle(order)
        for i in order:
            f = feats[i]
            z = bias + sum(w.get(x, 0.0) for x in f)
            g = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z)))) - labels[i]
            bias -= BIAS_RATE * g
            for x in f:
                wx = w.get(x, 0.0)
                gx = g + L2 * wx
                acc = g2.get(x, 0.0) + gx * gx
                g2[x] = acc
                w[x] = wx - RATE * gx / math.sqrt(acc + 1e-8)
    kept = {x: round(v, 5) for x, v in w.items() if abs(v) >= KEEP}
    if len(kept) > tokens_mod.MAX_WEIGHTS:  # the heaviest words, as many as a file may carry
        heaviest = sorted(kept, key=lambda x: (-abs(kept[x]), x))[: tokens_mod.MAX_WEIGHTS]
        kept = {x: kept[x] for x in heaviest}
    return tokens_mod.WordWeights(round(bias, 5), kept)
