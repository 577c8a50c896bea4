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
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pochta.antispam import tokens as tokens_mod
from pochta.antispam.model import design
from pochta.antispam.model.trees import Trees, from_catboost
from pochta.errors import ConfigError

DATA = "data"


def shipped_dir() -> Path:
    return Path(str(resources.files("pochta.antispam.model").joinpath(DATA)))


@dataclass
class Model:
    booster: Any  # catboost.CatBoostClassifier
    columns: list[str]
    threshold: float = 0.5
    info: dict[str, Any] = field(default_factory=dict)
    defaults: dict[str, float] = field(default_factory=dict)  # a missing column's value
    tokens: tokens_mod.TokenTable | None = None  # the words' table (tokens.json), if any
    _trees: Trees | None = field(default=None, repr=False)

    def row(self, features: Mapping[str, float]) -> list[float]:
        d = self.defaults
        return [float(features.get(c, d.get(c, math.nan))) for c in self.columns]

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
        return self.trees.probability(
            [float(features.get(c, math.nan)) if known else default
             for c, known, default in self._content_columns]
        )  # fmt: skip

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
        self.booster.save_model(str(directory / "model.cbm"))
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


def load(directory: Path | None = None) -> Model | None:
    """The model in ``directory`` (default: the one shipped); None when there is none."""
    directory = directory or shipped_dir()
    cbm, meta = directory / "model.cbm", directory / "model.json"
    if not cbm.is_file() or not meta.is_file():
        return None
    from catboost import CatBoostClassifier, CatBoostError

    try:
        info = json.loads(meta.read_text())
        booster = CatBoostClassifier()
        booster.load_model(str(cbm))
        return Model(
            booster,
            list(info["columns"]),
            float(info["threshold"]),
            info.get("info", {}),
            {str(k): float(v) for k, v in info.get("defaults", {}).items()},
            tokens_mod.load(directory),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, CatBoostError) as exc:
        raise ConfigError(f"cannot load the model in {directory}: {exc!r}") from exc
