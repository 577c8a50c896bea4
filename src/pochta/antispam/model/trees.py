"""CatBoost's oblivious trees evaluated with NumPy, from the model's own JSON export. Pure.

CatBoost's ``predict_proba`` costs about 0.9 ms per call for one letter on this project's
machine (building its data pool, its thread pool); the same 400 trees of depth 6 evaluated
here take about 0.05 ms. An oblivious tree applies one split per level to every example: bit
``j`` of the leaf index is ``x[feature_j] > border_j``; the raw value is the sum of the leaves
reached, ``scale * sum + bias``; P(spam) is its sigmoid. Missing values (NaN) go the way the
model's ``nan_value_treatment`` says (``AsTrue``: the split holds; otherwise it does not).

:func:`from_catboost` exports the model with ``save_model(format="json")`` (public API) and reads
that. The equality with CatBoost's own predictions is checked by the tests, letter by letter.
:func:`arrays` and :func:`from_arrays` turn the trees into named arrays and back (what
``model.trees.npz`` beside a model holds: loading it needs no CatBoost, see
:mod:`pochta.antispam.model.booster`).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Trees:
    features: npt.NDArray[np.intp]  # (trees, depth): the column each split reads
    borders: npt.NDArray[np.float64]  # (trees, depth)
    leaves: npt.NDArray[np.float64]  # (trees, 2**depth)
    nan_true: npt.NDArray[np.bool_]  # (columns,): NaN passes every split on this column
    scale: float
    bias: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "_powers", 1 << np.arange(self.features.shape[1]))
        object.__setattr__(self, "_rows", np.arange(self.features.shape[0]))
        object.__setattr__(self, "_any_nan_true", bool(self.nan_true.any()))
        # the same arrays flat, read with ``take`` (one letter's row: NumPy's fancy indexing
        # of 2-D arrays costs more than the work): each leaf row starts at its tree's offset
        object.__setattr__(self, "_flat_features", self.features.ravel())
        object.__setattr__(self, "_flat_borders", self.borders.ravel())
        object.__setattr__(self, "_flat_leaves", self.leaves.ravel())
        object.__setattr__(self, "_offsets", self._rows * self.leaves.shape[1])  # type: ignore[attr-defined]

    def raw(self, x: Sequence[float]) -> float:
        values = np.asarray(x, dtype=np.float64)
        if self._any_nan_true:  # type: ignore[attr-defined]
            values = np.where(np.isnan(values) & self.nan_true, np.inf, values)
        bits = values.take(self._flat_features) > self._flat_borders  # type: ignore[attr-defined]
        index = bits.reshape(self.features.shape) @ self._powers  # type: ignore[attr-defined]
        reached = self._flat_leaves.take(self._offsets + index)  # type: ignore[attr-defined]
        return self.scale * float(reached.sum()) + self.bias

    def probability(self, x: Sequence[float]) -> float:
        return 1.0 / (1.0 + math.exp(-self.raw(x)))


def from_json(model: dict[str, Any], columns: int) -> Trees:
    float_features = model["features_info"].get("float_features", [])
    flat = {f["feature_index"]: f["flat_feature_index"] for f in float_features}
    nan_true = np.zeros(columns, dtype=bool)
    for f in float_features:
        if f.get("nan_value_treatment") == "AsTrue":
            nan_true[f["flat_feature_index"]] = True
    trees = model["oblivious_trees"]
    depth = max((len(t["splits"]) for t in trees), default=0)
    features = np.zeros((len(trees), depth), dtype=np.intp)
    borders = np.full((len(trees), depth), np.inf)  # a missing level never splits
    leaves = np.zeros((len(trees), 2**depth))
    for i, tree in enumerate(trees):
        for j, split in enumerate(tree["splits"]):
            if split.get("split_type", "FloatFeature") != "FloatFeature":
                raise ValueError(f"split type {split.get('split_type')} is not supported")
            features[i, j] = flat[split["float_feature_index"]]
            borders[i, j] = split["border"]
        values = tree["leaf_values"]
        leaves[i, : len(values)] = values
    scale, bias = model.get("scale_and_bias", [1.0, [0.0]])
    bias_value = bias[0] if isinstance(bias, list) else bias
    return Trees(features, borders, leaves, nan_true, float(scale), float(bias_value))


def from_catboost(booster: Any, columns: int) -> Trees:
    with tempfile.TemporaryDirectory(prefix="pochta-model-") as tmp:
        path = Path(tmp) / "model.json"
        booster.save_model(str(path), format="json")
        return from_json(json.loads(path.read_text()), columns)


TREES_FORMAT = 1
"""The version of :func:`arrays`' layout; arrays of another version are not read."""

CONVERTER = 1
"""The version of :func:`from_json` / :func:`from_catboost`, part of a cached ``trees.npz``'s
key: a change in how a model becomes trees must make every cache stale (bump it; the test
of the conversion's source in tests/unit/antispam/test_model_trees.py says when)."""


def arrays(trees: Trees) -> dict[str, npt.NDArray[Any]]:
    """The trees as named arrays (for ``numpy.savez``)."""
    return {
        "format": np.array(TREES_FORMAT),
        "features": trees.features,
        "borders": trees.borders,
        "leaves": trees.leaves,
        "nan_true": trees.nan_true,
        "scale_bias": np.array([trees.scale, trees.bias], dtype=np.float64),
    }


def from_arrays(named: Mapping[str, npt.NDArray[Any]], columns: int) -> Trees:
    """The trees back from :func:`arrays`; ValueError when they are not trees of a model with
    ``columns`` columns in this layout."""
    try:
        if int(named["format"]) != TREES_FORMAT:
            raise ValueError(f"trees of format {int(named['format'])}, not {TREES_FORMAT}")
        features = np.asarray(named["features"], dtype=np.intp)
        borders = np.asarray(named["borders"], dtype=np.float64)
        leaves = np.asarray(named["leaves"], dtype=np.float64)
        nan_true = np.asarray(named["nan_true"], dtype=np.bool_)
        scale, bias = (float(v) for v in np.asarray(named["scale_bias"], dtype=np.float64))
    except KeyError as exc:
        raise ValueError(f"no {exc.args[0]!r} in the trees") from None
    trees_, depth = features.shape if features.ndim == 2 else (-1, -1)
    if (
        trees_ < 0
        or borders.shape != (trees_, depth)
        or leaves.shape != (trees_, 2**depth)
        or nan_true.shape != (columns,)
        or (features.size and (features.min() < 0 or features.max() >= columns))
    ):
        raise ValueError("the trees' arrays do not fit together")
    return Trees(features, borders, leaves, nan_true, scale, bias)
