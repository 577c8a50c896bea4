"""The CatBoost model: P(spam) from a letter's features.

A model is two files: ``model.cbm`` (CatBoost's own format) and ``model.json`` (the input
columns in order, each column's value when a letter lacks it, the decision threshold, and how
it was trained). The model pochta ships lives in ``pochta/antispam/model/data/``;
``pochta model train`` writes a new one (there by default). A feature a letter does not have is
its column's default (the counters' ``spam_lean``: 0, "nothing known"), else NaN to the model
(CatBoost's ``nan_mode=Min``: below every value).

:func:`fit` builds the model in two parts (see :mod:`pochta.antispam.model.design`): a content
model over every column but the counters', and a counters model over ``spam_lean`` only,
fitted on the content model's out-of-fold log-odds and shifted so that a letter whose shingles
are all unknown gets exactly 0 from it. CatBoost's ``sum_models`` makes them one model, so
evaluation (:mod:`.trees`) and SHAP explanations (:mod:`.explain`) see a single forest.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
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

    def probability(self, features: Mapping[str, float]) -> float:
        """P(spam) of one letter (evaluated with NumPy: 20x cheaper than CatBoost's call)."""
        return self.trees.probability(self.row(features))

    def content_probability(self, features: Mapping[str, float]) -> float:
        """P(spam) with the counters' columns at their defaults ("nothing known"): what the
        letter itself says (exactly the content model's part of :func:`fit`)."""
        d = self.defaults
        return self.trees.probability(
            [d[c] if design.LEAN.match(c) else float(features.get(c, math.nan))
             for c in self.columns]
        )  # fmt: skip

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
    from catboost import CatBoostClassifier

    try:
        info = json.loads(meta.read_text())
        booster = CatBoostClassifier()
        booster.load_model(str(cbm))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load the model in {directory}: {exc}") from exc
    return Model(
        booster,
        list(info["columns"]),
        float(info["threshold"]),
        info.get("info", {}),
        {str(k): float(v) for k, v in info.get("defaults", {}).items()},
        tokens_mod.load(directory),
    )


THREADS = 2  # CatBoost's threads: the project's machines are shared


def _params(seed: int, iterations: int, depth: int) -> dict[str, Any]:
    return {
        "iterations": iterations,
        "depth": depth,
        "learning_rate": 0.08,
        "loss_function": "Logloss",
        "random_seed": seed,
        "verbose": False,
        "thread_count": THREADS,
        "allow_writing_files": False,
    }


def fit(
    rows: Sequence[Mapping[str, float]],
    labels: Sequence[int],
    columns: list[str],
    *,
    iterations: int = 400,
    depth: int = 6,
    counters_iterations: int = 200,
    counters_depth: int = 4,
    folds: int = 5,
    seed: int = 0,
    threshold: float = 0.5,
    weights: Sequence[float] | None = None,
    info: dict[str, Any] | None = None,
    counters: bool = True,
) -> Model:
    """The content model and the counters model (see the module's doc), summed. Monotone
    constraints from :func:`design.monotone`; missing columns from :func:`design.defaults`.
    Deterministic for a given ``seed``. ``counters=False``: the content model alone (what
    the summed model gives a letter whose shingles are all unknown)."""
    from catboost import CatBoostClassifier, Pool, sum_models

    model = Model(None, columns, threshold, info or {}, design.defaults(columns))
    x = [model.row(r) for r in rows]
    y = list(labels)
    w = None if weights is None else list(weights)
    mono = design.monotone(columns)
    lean = [i for i, c in enumerate(columns) if design.LEAN.match(c)]
    other = [i for i in range(len(columns)) if i not in set(lean)]

    def content_model() -> Any:
        return CatBoostClassifier(
            **_params(seed, iterations, depth),
            monotone_constraints=mono,
            ignored_features=lean or None,
        )

    content = content_model()
    content.fit(x, y, sample_weight=w)
    if not lean or not other or not counters:
        model.booster = content
        return model
    # the counters model learns what the content model, not having seen a letter, leaves
    base = [0.0] * len(x)
    for k in range(folds):
        test = list(range(k, len(x), folds))
        train = [i for i in range(len(x)) if i % folds != k]
        part = content_model()
        part.fit([x[i] for i in train], [y[i] for i in train],
                 sample_weight=None if w is None else [w[i] for i in train])  # fmt: skip
        for i, raw in zip(
            test, part.predict([x[i] for i in test], prediction_type="RawFormulaVal"), strict=True
        ):
            base[i] = float(raw)
    shingles = CatBoostClassifier(
        **_params(seed, counters_iterations, counters_depth),
        monotone_constraints=mono,
        ignored_features=other,
        model_shrink_rate=0,
    )
    shingles.fit(Pool(x, y, baseline=base, weight=w))
    unknown = model.row({})  # every spam_lean 0: nothing known
    neutral = float(shingles.predict([unknown], prediction_type="RawFormulaVal")[0])
    summed = sum_models([content, shingles])
    scale, bias = summed.get_scale_and_bias()
    summed.set_scale_and_bias(scale, bias - neutral)
    model.booster = _one_model(summed)
    return model


def _one_model(summed: Any) -> Any:
    """``sum_models``' result as a plain classifier. Its metadata keeps both parts' training
    parameters (``model0:params``...), which CatBoost then reads back as "invalid params"
    on every load (a warning on stderr); only the loss function is kept, and the model's
    GUID is derived from its trees."""
    from catboost import CatBoostClassifier

    with tempfile.TemporaryDirectory(prefix="pochta-model-") as tmp:
        path = Path(tmp) / "model.json"
        summed.save_model(str(path), format="json")
        exported = json.loads(path.read_text())
        meta = exported["model_info"]
        for key in [k for k in meta if k.startswith(("model0:", "model1:"))]:
            del meta[key]
        meta["params"] = {"flat_params": {"loss_function": "Logloss"}}
        # CatBoost draws the GUID at random; from the trees, the same training gives the
        # same bytes
        trees = json.dumps(exported["oblivious_trees"], sort_keys=True).encode()
        meta["model_guid"] = hashlib.sha256(trees).hexdigest()[:32]
        path.write_text(json.dumps(exported))
        booster = CatBoostClassifier()
        booster.load_model(str(path), format="json")
    return booster
