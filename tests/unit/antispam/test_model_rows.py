"""The model's rows built by ``map`` over per-model fallbacks (issue 29, item 3): ``Model.row``
and the row ``content_probability`` reads are the lists the per-column expressions gave
(``float(features.get(c, defaults.get(c, nan)))``; the counters' columns at their defaults),
compared on the shipped model with generated feature dicts (columns missing, present, ints,
bools) and the unsealed corpus letters' features."""

from __future__ import annotations

import math
import random

from pochta.antispam.model import booster
from pochta.antispam.model.booster import Model
from pochta.antispam.shingles.counters.memory import MemoryStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.verdict import Scanner
from pochta.mime import letter as letter_mod
from pochta_factory import corpus


def row_by_column(model: Model, features: dict[str, float]) -> list[float]:
    d = model.defaults
    return [float(features.get(c, d.get(c, math.nan))) for c in model.columns]


def content_row_by_column(model: Model, features: dict[str, float]) -> list[float]:
    return [
        float(features.get(c, math.nan)) if known else default
        for c, known, default in model._content_columns
    ]


def same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        x == y or (x != x and y != y) for x, y in zip(a, b, strict=True)
    )


def test_rows_on_generated_features() -> None:
    model = booster.load().for_workers()
    rng = random.Random(29)
    values: list[float] = [0.0, 1.0, -3.5, math.nan, math.inf, 7, True, False]
    for _ in range(300):
        chosen = rng.sample(model.columns, rng.randint(0, len(model.columns)))
        features = {c: rng.choice(values) for c in chosen}
        features["not.a.column"] = 2.0
        assert same(model.row(features), row_by_column(model, features))
        want = model.trees.probability(content_row_by_column(model, features))
        got = model.content_probability(features)
        assert got == want or (got != got and want != want)
        assert model.probability(features) == model.trees.probability(
            row_by_column(model, features)
        )


def test_rows_on_the_corpus_letters() -> None:
    model = booster.load().for_workers()
    scanner = Scanner(model=model, counters=Counters(MemoryStore(), buffered=False))
    for m in list(corpus.unsealed(("easy-ham-1", "spam-1", "hard-ham-1")))[::11]:
        verdict = scanner.scan(letter_mod.parse(m.raw))
        f = verdict.features
        assert same(model.row(f), row_by_column(model, f))
        assert model.content_probability(f) == model.trees.probability(
            content_row_by_column(model, f)
        )
