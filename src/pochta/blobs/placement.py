"""Choosing a pair for a new file: weighted by the N-th root of free space (seed 004)."""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

from pochta.types import Pair


def pair_weight(pair: Pair, root: float) -> float:
    """A pair is as free as its fuller disk; the N-th root keeps an empty new disk from
    taking every write."""
    free = min(pair.free)
    return float(free) ** (1.0 / root) if free > 0 else 0.0


def choose_pair(
    pairs: Sequence[Pair],
    *,
    size: int,
    root: float,
    rng: random.Random,
    exclude: Collection[int] = (),
) -> Pair | None:
    """Pick a writable pair with room for ``size`` bytes at random, weighted by
    ``min(free)^(1/root)``. None when no pair qualifies."""
    if root <= 0:
        raise ValueError("placement root must be positive")
    eligible = [p for p in pairs if p.flags.writable and p.id not in exclude and min(p.free) > size]
    if not eligible:
        return None
    if len(eligible) == 1:  # the one pair (the embedded default): no weights, no draw
        return eligible[0]
    weights = [pair_weight(p, root) for p in eligible]
    return rng.choices(eligible, weights=weights, k=1)[0]
