"""The CatBoost model: P(spam) from a letter's features.

A model is two files: ``model.cbm`` (CatBoost's own format) and ``model.json`` (the input
columns in order, each column's value when a letter lacks it, the decision threshold, and how
it was trained). The model pochta ships lives in ``pochta/antispam/model/data/``;
``pochta model train`` writes a new one (there by default). A feature a letter does not have is
its column's default (the counters' ``spam_lean``: 0, "nothing known"), else NaN to the model
(CatBoost's ``nan_mode=Min``: below every value).

:func:`pochta_factory.fitting.fit` builds the model in two parts (see
:mod:`pochta.antispam.model.design`): a content model over every column but the counters', and
a counters model over ``spam_lean`` only, fitted on the content model's out-of-fold log-odds and
shifted so that a letter whose shingles are all unknown gets exactly 0 from it. CatBoost's
``sum_models`` makes them one model, so evaluation (:mod:`.trees`) and SHAP explanations
(:mod:`.explain`) see a single forest. Fitting is the factory's (:mod:`pochta_factory`); this
module only loads, saves and runs a model.

Beside the two files, :meth:`Model.save` writes ``trees.npz``: the trees for NumPy, keyed by
the SHA-256 of ``model.cbm``. :func:`load` reads them from there when the key matches, and
then leaves CatBoost unloaded (importing it, with pandas and SciPy, costs about a second)
until something asks the booster itself (``probabilities``, ``contributions``, ``save``). A
model without them (or with stale ones) is read with CatBoost, and the trees are written
beside it when its directory can be written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import json
import math
import os
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from pochta.antispam import tokens as tokens_mod
from pochta.antispam.model import design
from pochta.antispam.model.trees import (
    CONVERTER,
    TREES_FORMAT,
    Trees,
    arrays,
    from_arrays,
    from_catboost,
)
from pochta.errors import ConfigError

DATA = "data"
TREES_FILE = "trees.npz"
"""The trees for NumPy beside ``model.cbm`` (:func:`load`)."""


def shipped_dir() -> Path:
    return Path(str(resources.files("pochta.antispam.model").joinpath(DATA)))


class LazyBooster:
    """CatBoost's classifier read from a ``model.cbm``'s bytes the first time one of its
    attributes is asked for (:func:`load`: CatBoost is imported then, not before)."""

    def __init__(self, body: bytes, where: Path) -> None:
        self.body = body
        self.where = where
        self._booster: Any = None

    @property
    def loaded(self) -> bool:
        return self._booster is not None

    def classifier(self) -> Any:
        """The ``catboost.CatBoostClassifier`` (read once); ConfigError when it cannot be."""
        if self._booster is None:
            self._booster = _read_booster(self.body, self.where)
        return self._booster

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy/pickle probing an instance being built
            raise AttributeError(name)
        return getattr(self.classifier(), name)


@dataclass
class Model:
    booster: Any  # catboost.CatBoostClassifier, or a LazyBooster that reads one when used
    columns: list[str]
    threshold: float = 0.5
    info: dict[str, Any] = field(default_factory=dict)
    defaults: dict[str, float] = field(default_factory=dict)  # a missing column's value
    tokens: tokens_mod.TokenTable | None = None  # the words' table (tokens.json), if any
    _trees: Trees | None = field(default=None, repr=False)

    def row(self, features: Mapping[str, float]) -> list[float]:
        """Each column's value: the letter's, else the model's default, else NaN."""
        columns, fallbacks = self._row_fallbacks
        return list(map(float, map(features.get, columns, fallbacks)))

    @functools.cached_property
    def _row_fallbacks(self) -> tuple[list[str], list[float]]:
        """The columns and what ``row`` takes for each one the letter lacks (read once per
        model: ``float(defaults.get(c, nan))``, what ``float`` makes of it on every call)."""
        d = self.defaults
        return list(self.columns), [float(d.get(c, math.nan)) for c in self.columns]

    @functools.cached_property
    def missing_values(self) -> tuple[tuple[str, float], ...]:
        """Each column and the value :meth:`row` takes when a letter lacks it: the column's
        default, else NaN (read once per model)."""
        d = self.defaults
        return tuple((c, d.get(c, math.nan)) for c in self.columns)

    @property
    def trees(self) -> Trees:
        """The booster's trees for NumPy (:mod:`pochta.antispam.model.trees`): read once."""
        if self._trees is None:
            self._trees = from_catboost(self.booster, len(self.columns))
        return self._trees

    def for_workers(self) -> Model:
        """This model without its CatBoost booster: what ``probability`` and
        ``content_probability`` read (the trees in NumPy), small to pickle to a worker
        process; ``probabilities`` and ``contributions`` need the booster and fail there."""
        return dataclasses.replace(self, booster=None, _trees=self.trees)

    def probability(self, features: Mapping[str, float]) -> float:
        """P(spam) of one letter (evaluated with NumPy: 20x cheaper than CatBoost's call)."""
        return self.trees.probability(self.row(features))

    def content_probability(self, features: Mapping[str, float]) -> float:
        """P(spam) with the counters' columns at their defaults ("nothing known"): what the
        letter itself says (exactly the content model's part of :func:`fit`)."""
        columns, nans, fixed = self._content_row
        row = list(map(float, map(features.get, columns, nans)))
        for i, default in fixed:
            row[i] = default
        return self.trees.probability(row)

    @functools.cached_property
    def _content_row(self) -> tuple[list[str], list[float], list[tuple[int, float]]]:
        """``_content_columns`` as ``content_probability`` reads it: every column with NaN for
        a missing value, then the counters' columns set to their defaults."""
        columns = [c for c, _, _ in self._content_columns]
        fixed = [(i, d) for i, (_, known, d) in enumerate(self._content_columns) if not known]
        return columns, [math.nan] * len(columns), fixed

    @functools.cached_property
    def _content_columns(self) -> list[tuple[str, bool, float]]:
        """Per column: its name, whether the letter's value is read (not a counters'
        column), and the default a counters' column takes (read once per model)."""
        d = self.defaults
        return [
            (c, False, d[c]) if design.LEAN.match(c) else (c, True, math.nan) for c in self.columns
        ]

    def probabilities(self, rows: Sequence[Mapping[str, float]]) -> list[float]:
        return [float(p[1]) for p in self.booster.predict_proba([self.row(r) for r in rows])]

    def contributions(self, features: Mapping[str, float]) -> tuple[list[float], float]:
        """SHAP values of one letter (CatBoost's ``ShapValues``): each column's push in
        log-odds toward spam (+) or ham (-), and the log-odds they start from; the two add up
        to the letter's log-odds.

        The counters' columns (``spam_lean``) are measured from their
        default, "nothing known", where the counters model adds exactly 0: their SHAP values
        minus those of the same letter with its counters unknown. Plain SHAP would measure
        them from the average training letter, whose sender was usually known, and call
        "unknown" a push toward spam although it adds nothing. The content columns keep
        plain SHAP (from the average training letter)."""
        from catboost import Pool

        row = self.row(features)
        unknown = [
            self.defaults.get(c, v) if design.LEAN.match(c) else v
            for c, v in zip(self.columns, row, strict=True)
        ]
        own, ref = self.booster.get_feature_importance(
            Pool([row, unknown]), type="ShapValues", thread_count=1
        )
        pushes = [float(v) for v in own[:-1]]
        start = float(own[-1])
        for i, column in enumerate(self.columns):
            if design.LEAN.match(column):
                pushes[i] -= float(ref[i])
                start += float(ref[i])
        return pushes, start

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        cbm = directory / "model.cbm"
        if isinstance(self.booster, LazyBooster) and not self.booster.loaded:
            cbm.write_bytes(self.booster.body)  # the bytes it was read from
        else:
            self.booster.save_model(str(cbm))
        save_trees(self.trees, directory, cbm.read_bytes())
        meta = {
            "columns": self.columns,
            "defaults": self.defaults,
            "threshold": self.threshold,
            "info": self.info,
        }
        (directory / "model.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False))
        stale = directory / tokens_mod.FILE
        if self.tokens is not None:
            tokens_mod.save(self.tokens, directory)
        elif stale.exists():
            stale.unlink()


def trees_key(cbm: bytes) -> str:
    """What ``trees.npz`` must say to be the trees of this ``model.cbm``, converted by this
    version of the conversion (``trees.CONVERTER``)."""
    return f"{hashlib.sha256(cbm).hexdigest()}:{TREES_FORMAT}:{CONVERTER}"


def save_trees(trees: Trees, directory: Path, cbm: bytes) -> None:
    """``trees.npz`` in ``directory``, keyed by ``cbm`` (written whole or not at all)."""
    buffer = io.BytesIO()
    named = {"key": np.array(trees_key(cbm)), **arrays(trees)}
    np.savez_compressed(buffer, **named)  # type: ignore[arg-type]  # (NumPy's stub: allow_pickle)
    fd, tmp = tempfile.mkstemp(prefix=".trees-", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o644)  # as the model's other files (mkstemp makes it 0600)
        with os.fdopen(fd, "wb") as f:
            f.write(buffer.getvalue())
        os.replace(tmp, directory / TREES_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_trees(directory: Path, cbm: bytes, columns: int) -> Trees | None:
    """The trees in ``directory``'s ``trees.npz`` if they are those of ``cbm``; else None."""
    path = directory / TREES_FILE
    try:
        # the file opened here: NumPy leaves its own open when the archive is broken
        with path.open("rb") as f, np.load(f, allow_pickle=False) as named:
            if str(named["key"]) != trees_key(cbm):
                return None
            return from_arrays(named, columns)
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
        return None  # none, unreadable or not trees: CatBoost reads the model


def _read_booster(body: bytes, where: Path) -> Any:
    from catboost import CatBoostClassifier, CatBoostError

    try:
        booster = CatBoostClassifier()
        booster.load_model(blob=body)
    except (ValueError, CatBoostError) as exc:
        raise ConfigError(f"cannot load the model in {where}: {exc!r}") from exc
    return booster


def load(directory: Path | None = None) -> Model | None:
    """The model in ``directory`` (default: the one shipped); None when there is none."""
    directory = directory or shipped_dir()
    cbm, meta = directory / "model.cbm", directory / "model.json"
    if not cbm.is_file() or not meta.is_file():
        return None
    try:
        info = json.loads(meta.read_text())
        body = cbm.read_bytes()
        columns = list(info["columns"])
        model = Model(
            LazyBooster(body, directory),
            columns,
            float(info["threshold"]),
            info.get("info", {}),
            {str(k): float(v) for k, v in info.get("defaults", {}).items()},
            tokens_mod.load(directory),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"cannot load the model in {directory}: {exc!r}") from exc
    model._trees = load_trees(directory, body, len(columns))
    if model._trees is None:  # read by CatBoost (which checks the file), and kept for next time
        try:
            model._trees = from_catboost(model.booster.classifier(), len(columns))
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise ConfigError(f"cannot load the model in {directory}: {exc!r}") from exc
        with contextlib.suppress(OSError):  # a directory this process may not write
            save_trees(model._trees, directory, body)
    return model
