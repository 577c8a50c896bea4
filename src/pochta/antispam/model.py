"""The CatBoost model: P(spam) from a letter's features.

A model is two files: ``model.cbm`` (CatBoost's own format) and ``model.json`` (the input
columns in order, the decision threshold, and how it was trained). The model pochta ships
lives in ``pochta/antispam/data/``; ``pochta model train`` writes a new one (there by
default). A feature a letter does not have is NaN to the model (CatBoost treats missing
values as their own case).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pochta.errors import ConfigError

DATA = "data"


def shipped_dir() -> Path:
    return Path(str(resources.files("pochta.antispam").joinpath(DATA)))


@dataclass
class Model:
    booster: Any  # catboost.CatBoostClassifier
    columns: list[str]
    threshold: float = 0.5
    info: dict[str, Any] = field(default_factory=dict)

    def row(self, features: Mapping[str, float]) -> list[float]:
        return [float(features.get(c, math.nan)) for c in self.columns]

    def probability(self, features: Mapping[str, float]) -> float:
        return float(self.booster.predict_proba([self.row(features)])[0][1])

    def probabilities(self, rows: Sequence[Mapping[str, float]]) -> list[float]:
        return [float(p[1]) for p in self.booster.predict_proba([self.row(r) for r in rows])]

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.booster.save_model(str(directory / "model.cbm"))
        meta = {"columns": self.columns, "threshold": self.threshold, "info": self.info}
        (directory / "model.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False))


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
    return Model(booster, list(info["columns"]), float(info["threshold"]), info.get("info", {}))


def fit(
    rows: Sequence[Mapping[str, float]],
    labels: Sequence[int],
    columns: list[str],
    *,
    iterations: int = 400,
    depth: int = 6,
    seed: int = 0,
    threshold: float = 0.5,
    info: dict[str, Any] | None = None,
) -> Model:
    from catboost import CatBoostClassifier

    booster = CatBoostClassifier(
        iterations=iterations,
        depth=depth,
        learning_rate=0.08,
        loss_function="Logloss",
        random_seed=seed,
        verbose=False,
        thread_count=-1,
        allow_writing_files=False,
    )
    model = Model(booster, columns, threshold, info or {})
    booster.fit([model.row(r) for r in rows], list(labels))
    return model
