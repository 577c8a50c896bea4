"""Fitting the CatBoost model (:class:`pochta.antispam.model.booster.Model`): the content model
and the counters model, summed into one forest (the runtime's :mod:`pochta.antispam.model.booster`
says what the two parts are; :mod:`pochta.antispam.model.design` which columns and constraints).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pochta.antispam.model import design
from pochta.antispam.model.booster import Model

THREADS = 2  # CatBoost's threads: the project's machines are shared
MAX_MODELS = 16
"""At most this many fits averaged by :func:`fit_averaged` (each one's trees are evaluated for
every letter)."""
LEARNING_RATE = 0.08
"""The boosting step. Measured out of fold on the non-sealed letters (issue 28,
``benchmarks/installation_kfold.py --learning-rate``, BENCHMARKS.md): 0.04 at 400 rounds and
0.08 at 800 rounds caught no more spam than 0.08 at 400 at the same share of ham."""


def _params(seed: int, iterations: int, depth: int, learning_rate: float) -> dict[str, Any]:
    return {
        "iterations": iterations,
        "depth": depth,
        "learning_rate": learning_rate,
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
    learning_rate: float = LEARNING_RATE,
) -> Model:
    """The content model and the counters model (see the module's doc), summed. Monotone
    constraints from :func:`design.monotone`; missing columns from :func:`design.defaults`.
    Deterministic for a given ``seed``. ``counters=False``: the content model alone (what
    the summed model gives a letter whose shingles are all unknown). ``learning_rate``: the
    boosting step of both parts."""
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
            **_params(seed, iterations, depth, learning_rate),
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
        **_params(seed, counters_iterations, counters_depth, learning_rate),
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


def fit_averaged(
    rows: Sequence[Mapping[str, float]],
    labels: Sequence[int],
    columns: list[str],
    *,
    models: int = 1,
    seed: int = 0,
    **options: Any,
) -> Model:
    """The mean of ``models`` fits of :func:`fit` with seeds ``seed``, ``seed + 1``...: one
    forest whose raw score (log-odds) is the mean of theirs (CatBoost's ``sum_models`` with
    weights 1/``models``), so the model answers as the average of the K and costs K times the
    trees to evaluate. ``options``: :func:`fit`'s. One model: :func:`fit` itself."""
    if not 1 <= models <= MAX_MODELS:
        raise ValueError(f"models: 1 to {MAX_MODELS}, not {models}")
    fits = [fit(rows, labels, columns, seed=seed + j, **options) for j in range(models)]
    if models == 1:
        return fits[0]
    from catboost import sum_models

    first = fits[0]
    summed = sum_models([m.booster for m in fits], weights=[1.0 / models] * models)
    return Model(_one_model(summed), first.columns, first.threshold, first.info, first.defaults)


def _summand(key: str) -> bool:
    """A summed part's key in ``sum_models``' metadata: ``model0:params``, ``model2:model_guid``
    (one per part: two in a fit, K in an average of K fits)."""
    head, colon, _ = key.partition(":")
    return bool(colon) and head.startswith("model") and head[5:].isdigit()


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
        for key in [k for k in meta if _summand(k)]:
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
