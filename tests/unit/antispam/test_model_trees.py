"""The NumPy evaluation of CatBoost's trees gives CatBoost's own probabilities."""

from __future__ import annotations

import math
import random

import pytest

from pochta.antispam.model import booster
from pochta.antispam.model.trees import from_catboost


def _rows(columns: int, n: int, seed: int) -> list[list[float]]:
    rng = random.Random(seed)
    return [
        [
            math.nan if rng.random() < 0.2 else rng.choice((0.0, 1.0, rng.uniform(-5, 50)))
            for _ in range(columns)
        ]
        for _ in range(n)
    ]


@pytest.mark.parametrize("nan_mode", ["Min", "Max"])
def test_a_small_model_with_missing_values(nan_mode: str) -> None:
    from catboost import CatBoostClassifier

    train = _rows(6, 300, 1)
    labels = [int((r[0] if not math.isnan(r[0]) else 9) > 3 or r[2] == 1.0) for r in train]
    model = CatBoostClassifier(
        iterations=40,
        depth=4,
        verbose=False,
        random_seed=0,
        nan_mode=nan_mode,
        allow_writing_files=False,
        thread_count=1,
    )
    model.fit(train, labels)
    trees = from_catboost(model, 6)
    test = _rows(6, 200, 2)
    expected = [p[1] for p in model.predict_proba(test)]
    got = [trees.probability(r) for r in test]
    assert max(abs(a - b) for a, b in zip(expected, got, strict=True)) < 1e-9


def test_the_shipped_model() -> None:
    model = booster.load()
    assert model is not None
    rows = _rows(len(model.columns), 100, 3)
    expected = [p[1] for p in model.booster.predict_proba(rows)]
    got = [model.trees.probability(r) for r in rows]
    assert max(abs(a - b) for a, b in zip(expected, got, strict=True)) < 1e-9
