"""The NumPy evaluation of CatBoost's trees gives CatBoost's own probabilities."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import math
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pochta.antispam.model import booster
from pochta.antispam.model import trees as trees_mod
from pochta.antispam.model.trees import arrays, from_catboost
from pochta.errors import ConfigError


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


def _shipped_columns() -> int:
    model = booster.load()
    assert model is not None
    return len(model.columns)


def _copy_shipped(to: Path) -> Path:
    to.mkdir()
    for name in ("model.cbm", "model.json", "tokens.json"):
        shutil.copy(booster.shipped_dir() / name, to / name)
    return to


def test_the_shipped_trees_are_those_of_the_shipped_model() -> None:
    """The shipped ``trees.npz`` is keyed by the shipped ``model.cbm`` (retraining it rewrites
    both): a server reads the shipped model without importing CatBoost."""
    model = booster.load()
    assert model is not None
    assert isinstance(model.booster, booster.LazyBooster)
    assert not model.booster.loaded  # the trees came from trees.npz
    exported = from_catboost(model.booster.classifier(), len(model.columns))
    for name, array in arrays(exported).items():
        assert np.array_equal(arrays(model.trees)[name], array), name


def test_a_model_without_its_trees_gets_them_written_and_read_back(tmp_path: Path) -> None:
    folder = _copy_shipped(tmp_path / "model")
    first = booster.load(folder)
    assert first is not None
    assert first.booster.loaded  # read by CatBoost: there were no trees
    assert (folder / booster.TREES_FILE).is_file()
    again = booster.load(folder)
    assert again is not None
    assert not again.booster.loaded  # the trees from the file, no CatBoost
    rows = _rows(len(again.columns), 100, 4)
    expected = [p[1] for p in again.booster.predict_proba(rows)]  # CatBoost read now
    got = [again.trees.probability(r) for r in rows]
    assert max(abs(a - b) for a, b in zip(expected, got, strict=True)) < 1e-9


@pytest.mark.parametrize("damage", ["other model", "truncated", "not trees"])
def test_trees_of_another_model_or_broken_are_not_read(tmp_path: Path, damage: str) -> None:
    folder = _copy_shipped(tmp_path / "model")
    trees_file = folder / booster.TREES_FILE
    if damage == "other model":  # the right trees, keyed by other bytes
        shutil.copy(booster.shipped_dir() / booster.TREES_FILE, trees_file)
        model_cbm = (folder / "model.cbm").read_bytes()
        columns = _shipped_columns()
        assert booster.load_trees(folder, model_cbm + b"\0", columns) is None
        assert booster.load_trees(folder, model_cbm, columns) is not None
        return
    if damage == "truncated":
        trees_file.write_bytes((booster.shipped_dir() / booster.TREES_FILE).read_bytes()[:999])
    else:
        np.savez(trees_file, key=np.array(booster.trees_key((folder / "model.cbm").read_bytes())))
    model = booster.load(folder)
    assert model is not None
    assert model.booster.loaded  # CatBoost read it, and the trees were written anew
    cbm = (folder / "model.cbm").read_bytes()
    assert booster.load_trees(folder, cbm, _shipped_columns()) is not None


def test_a_broken_model_is_a_config_error_even_beside_trees(tmp_path: Path) -> None:
    folder = _copy_shipped(tmp_path / "model")
    shutil.copy(booster.shipped_dir() / booster.TREES_FILE, folder / booster.TREES_FILE)
    (folder / "model.cbm").write_bytes(b"not a model")  # the trees' key no longer matches
    with pytest.raises(ConfigError, match="cannot load the model"):
        booster.load(folder)


def test_a_saved_model_keeps_its_trees(tmp_path: Path) -> None:
    model = booster.load()
    assert model is not None
    model.save(tmp_path / "saved")
    assert not model.booster.loaded  # the model's own bytes written, CatBoost not needed
    again = booster.load(tmp_path / "saved")
    assert again is not None
    assert not again.booster.loaded
    assert (tmp_path / "saved" / "model.cbm").read_bytes() == model.booster.body


def test_loading_the_shipped_model_imports_no_catboost() -> None:
    code = (
        "import sys\n"
        "from pochta.antispam.model import booster\n"
        "m = booster.load()\n"
        "assert m is not None and m.probability({}) > 0\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in ('catboost', 'pandas')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# The conversion's source when CONVERTER was last set: a change to from_json or from_catboost
# must bump trees.CONVERTER (every cached trees.npz, the shipped one too, becomes stale and is
# converted again) and then this hash.
CONVERTER_SOURCE = (1, "3b28d02fa5cd1c4dbee8cef3a59fde605660cbab156a6ea33100d93ebbb868af")


def test_a_change_of_the_conversion_makes_every_cache_stale() -> None:
    source = inspect.getsource(trees_mod.from_json) + inspect.getsource(trees_mod.from_catboost)
    now = (trees_mod.CONVERTER, hashlib.sha256(source.encode()).hexdigest())
    assert now == CONVERTER_SOURCE, (
        "the conversion of a model into trees changed: bump trees.CONVERTER, write the shipped"
        " trees.npz again (delete it, load the model), and set CONVERTER_SOURCE to"
        f" {(trees_mod.CONVERTER + 1, now[1])}"
    )
    assert booster.trees_key(b"x").endswith(f":{trees_mod.TREES_FORMAT}:{trees_mod.CONVERTER}")


def _raw_by_fancy_indexing(trees: trees_mod.Trees, x: list[float]) -> float:
    """Trees.raw as it was written before its flat arrays: 2-D fancy indexing."""
    values = np.asarray(x, dtype=np.float64)
    if trees.nan_true.any():
        values = np.where(np.isnan(values) & trees.nan_true, np.inf, values)
    bits = values[trees.features] > trees.borders
    index = bits @ (1 << np.arange(trees.features.shape[1]))
    total = float(trees.leaves[np.arange(trees.features.shape[0]), index].sum())
    return trees.scale * total + trees.bias


def test_the_flat_reading_gives_the_same_floats_also_in_a_worker() -> None:
    """``raw`` reads flat copies of the arrays with ``take``: the same leaves in the same
    order, so the same sum to the last bit; also on a pickled copy (what a worker gets)."""
    import pickle

    model = booster.load()
    assert model is not None
    trees = model.trees
    copy = pickle.loads(pickle.dumps(trees))
    nan_true = dataclasses.replace(trees, nan_true=np.ones_like(trees.nan_true))
    for row in _rows(len(model.columns), 300, 4):
        expected = _raw_by_fancy_indexing(trees, row)
        assert trees.raw(row) == expected
        assert copy.raw(row) == expected
        assert nan_true.raw(row) == _raw_by_fancy_indexing(nan_true, row)
