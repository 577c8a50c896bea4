"""The model's design: which columns, which constraints, and "an unknown sender is neutral"."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest
from tests.mailtools import letter

from pochta.antispam.model import booster, design
from pochta.antispam.shingles.counters.memory import MemoryStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.registry import ShingleType, update_refs
from pochta.antispam.verdict import Scanner, model_columns, spam_lean
from pochta_factory import fitting

NOW = 1_730_000_000.0


def test_spam_lean_is_zero_when_nothing_is_known() -> None:
    assert spam_lean({}) == 0.0
    assert spam_lean({"ham": 0, "spam": 0, "complaint": 0, "unspam": 0}) == 0.0
    assert spam_lean({"ham": 3, "spam": 3}) == 0.0
    assert spam_lean({"spam": 1}) == pytest.approx(1 / 3)
    assert spam_lean({"ham": 1}) == pytest.approx(-1 / 3)
    assert spam_lean({"spam": 98}) == pytest.approx(0.98)
    # people's word moves letters: 2 complaints on 10 letters counted ham
    assert spam_lean({"ham": 10, "complaint": 2}) == pytest.approx((6 - 4) / 12)
    assert spam_lean({"spam": 10, "unspam": 10}) < -0.8


def test_the_design_drops_and_constrains_what_it_says() -> None:
    columns = design.model_columns(model_columns())
    assert "html.share" not in columns and "subject.reply" not in columns
    assert "rules.score" not in columns and "phish.signs" not in columns
    assert "sign.PHISH_RECEIVED_MISMATCH" not in columns
    assert not any(c.startswith("shingle.") and ".spam_lean_" not in c for c in columns)
    assert {f"shingle.{int(t)}.spam_lean_24h" for t in ShingleType} <= set(columns)
    mono = dict(zip(columns, design.monotone(columns), strict=True))
    assert mono["shingle.14.spam_lean_24h"] == 1
    assert mono["rules.content_score"] == 1
    assert all(v == 1 for c, v in mono.items() if c.startswith("sign.PHISH_"))
    assert mono["headers.has_message_id"] == -1
    # absence read as spam in training (lists have them, personal mail does not)
    assert "headers.has_list_unsubscribe" not in columns and "headers.has_list_id" not in columns
    assert "attachments.bytes" not in columns and "attachments.count" not in columns
    assert mono["links.own_share"] == -1 and mono["headers.message_id_aligned"] == -1
    assert mono["text.words"] == 0
    assert design.defaults(columns)["shingle.8.spam_lean_1h"] == 0.0
    for name in model_columns():
        assert design.decision(name)
        if design.decision(name).startswith("dropped"):
            assert design.reason(name)


def _synthetic(n: int, seed: int) -> tuple[list[dict[str, float]], list[int]]:
    """Rows like the training corpus's: a content feature, and a sender that is unknown (0)
    for most spam but known (and leaning ham) for most ham."""
    rng = random.Random(seed)
    rows, labels = [], []
    for _ in range(n):
        spam = int(rng.random() < 0.3)
        x = rng.gauss(1.0 if spam else 0.0, 1.0)
        known = rng.random() < (0.15 if spam else 0.8)
        lean = (0.6 if spam else -0.6) * rng.random() if known else 0.0
        rows.append({"text.words": x, "shingle.14.spam_lean_24h": lean})
        labels.append(spam)
    return rows, labels


def test_an_unknown_sender_adds_nothing_and_sits_between_ham_and_spam() -> None:
    rows, labels = _synthetic(1500, 1)
    columns = ["text.words", "shingle.14.spam_lean_24h"]
    model = fitting.fit(rows, labels, columns, iterations=60, counters_iterations=40, folds=3)
    # the counters part gives exactly 0 for an unknown sender: the letter is judged on its
    # content, however strongly "unknown" went with spam in training
    content_only = fitting.fit(rows, labels, columns, iterations=60, counters=False)
    for x in (-2.0, -0.5, 0.0, 0.7, 2.5):
        p_unknown = model.probability({"text.words": x})
        assert p_unknown == pytest.approx(model.probability(
            {"text.words": x, "shingle.14.spam_lean_24h": 0.0}))  # fmt: skip
        assert p_unknown == pytest.approx(content_only.probability({"text.words": x}), abs=1e-9)
        p_ham = model.probability({"text.words": x, "shingle.14.spam_lean_24h": -0.5})
        p_spam = model.probability({"text.words": x, "shingle.14.spam_lean_24h": 0.5})
        assert p_spam >= p_unknown >= p_ham
        assert p_spam > p_ham


def test_the_boosting_step_is_an_option_whose_default_is_the_factorys() -> None:
    rows, labels = _synthetic(600, 2)
    columns = ["text.words", "shingle.14.spam_lean_24h"]
    default = fitting.fit(rows, labels, columns, iterations=30, counters=False)
    same = fitting.fit(rows, labels, columns, iterations=30, counters=False,
                       learning_rate=fitting.LEARNING_RATE)  # fmt: skip
    slower = fitting.fit(rows, labels, columns, iterations=30, counters=False, learning_rate=0.01)
    probe = [{"text.words": x} for x in (-2.0, 0.0, 2.5)]
    assert default.probabilities(probe) == same.probabilities(probe)
    # a smaller step leaves the same rounds nearer where boosting starts: less sure both ways
    ham_d, _, spam_d = default.probabilities(probe)
    ham_s, _, spam_s = slower.probabilities(probe)
    assert ham_d < ham_s < spam_s < spam_d


def test_an_averaged_model_answers_the_mean_of_its_fits_log_odds() -> None:
    rows, labels = _synthetic(600, 3)
    columns = ["text.words", "shingle.14.spam_lean_24h"]
    options = {"iterations": 30, "counters_iterations": 20, "folds": 3}
    fits = [fitting.fit(rows, labels, columns, seed=s, **options) for s in (5, 6, 7)]
    mean = fitting.fit_averaged(rows, labels, columns, models=3, seed=5, **options)
    one = fitting.fit_averaged(rows, labels, columns, models=1, seed=5, **options)
    probe = [{"text.words": x, "shingle.14.spam_lean_24h": lean}
             for x in (-2.0, 0.0, 0.7, 2.5) for lean in (-0.5, 0.0, 0.5)]  # fmt: skip
    for row in probe:
        logits = [math.log(p / (1 - p)) for p in (f.probability(row) for f in fits)]
        want = 1 / (1 + math.exp(-sum(logits) / 3))
        assert mean.probability(row) == pytest.approx(want, abs=1e-9)
        # the NumPy trees the workers read and CatBoost's own call agree
        assert mean.probabilities([row])[0] == pytest.approx(want, abs=1e-9)
        assert one.probability(row) == fits[0].probability(row)
    # an unknown sender still adds nothing: every fit's counters part gives 0
    assert mean.probability({"text.words": 0.7}) == pytest.approx(
        mean.content_probability({"text.words": 0.7, "shingle.14.spam_lean_24h": 0.9}), abs=1e-9
    )
    assert len(mean.trees.leaves) == 3 * len(fits[0].trees.leaves)
    with pytest.raises(ValueError, match="models"):
        fitting.fit_averaged(rows, labels, columns, models=0)


def test_an_averaged_model_keeps_none_of_its_parts_metadata(tmp_path: Path) -> None:
    """``sum_models`` notes each part's parameters, GUID and classes (``model2:params``...);
    the averaged model keeps none of them for any K, as one fit keeps none of its two."""
    rows, labels = _synthetic(300, 4)
    columns = ["text.words", "shingle.14.spam_lean_24h"]
    options = {"iterations": 10, "counters_iterations": 10, "folds": 2}
    for k in (1, 3):
        model = fitting.fit_averaged(rows, labels, columns, models=k, **options)
        path = tmp_path / f"{k}.json"
        model.booster.save_model(str(path), format="json")
        meta = json.loads(path.read_text())["model_info"]
        assert [key for key in meta if re.match(r"model\d+:", key)] == []


@pytest.fixture(scope="module")
def shipped() -> booster.Model:
    model = booster.load()
    assert model is not None
    return model


def _counted(raw: bytes, kind: str | None, times: int) -> float:
    counters = Counters(MemoryStore(), buffered=False, clock=lambda: NOW)
    scanner = Scanner(model=booster.load(), counters=counters)
    if kind is not None:
        shingles = scanner.scan(raw, now=NOW).shingles
        for i in range(times):
            counters.update(update_refs(shingles), kind, at=NOW - 3600 - i)
    p = scanner.scan(raw, now=NOW).probability
    assert p is not None
    return p


@pytest.mark.parametrize(
    "raw",
    [
        letter(subject="Your order #4471 has shipped", text="Your parcel is on its way.\n"),
        letter(sender="Deals <deals@cheap-stuff.biz>", subject="FREE!!! Act now",
               text="Buy now, only $19.99!!! Click here: http://cheap-stuff.biz/x\n"),
    ],
)  # fmt: skip
def test_the_shipped_model_orders_spam_seen_unknown_ham_seen(
    shipped: booster.Model, raw: bytes
) -> None:
    unknown = _counted(raw, None, 0)
    as_ham = _counted(raw, "ham", 5)
    as_spam = _counted(raw, "spam", 5)
    assert as_spam >= unknown >= as_ham
    assert as_spam > as_ham
    assert not math.isnan(unknown)


def test_the_content_probability_is_the_letter_with_nothing_known(shipped: booster.Model) -> None:
    raw = letter(subject="Your order #4471 has shipped", text="Your parcel is on its way.\n")
    counters = Counters(MemoryStore(), buffered=False, clock=lambda: NOW)
    scanner = Scanner(model=shipped, counters=counters)
    shingles = scanner.scan(raw, now=NOW).shingles
    for i in range(5):
        counters.update(update_refs(shingles), "spam", at=NOW - 3600 - i)
    v = scanner.scan(raw, now=NOW)
    assert v.probability is not None and v.content_probability is not None
    alone = Scanner(model=shipped).scan(raw, now=NOW).probability
    assert v.content_probability == pytest.approx(alone)
    assert v.probability > v.content_probability
