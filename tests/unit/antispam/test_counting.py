"""What a delivered letter's verdict counts (Scanner.learn): only what the model is sure of."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from tests.mailtools import letter

from pochta.antispam.auth.results import NO_AUTH
from pochta.antispam.shingles.counters import Ref
from pochta.antispam.shingles.counters.buckets import Buckets
from pochta.antispam.shingles.counters.memory import MemoryStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.registry import Shingle, ShingleType
from pochta.antispam.verdict import COUNTERS, Counting, Label, Scanner, Verdict
from pochta.errors import StorageError
from pochta_factory import training

SHINGLES = [Shingle.of(ShingleType.FROM_ADDRESS, "a@example.net")]


def verdict(
    label: Label, p: float | None, partial: tuple[str, ...] = (), content: float | None = None
) -> Verdict:
    content = p if content is None else content
    return Verdict(label, p, 0.0, [], [], NO_AUTH, {}, SHINGLES, partial, content)


@pytest.mark.parametrize(
    ("label", "p", "content", "partial", "kind"),
    [
        ("spam", 0.99, 0.99, (), "spam"),
        ("spam", 0.95, 0.97, (), "spam"),
        ("spam", 0.70, 0.70, (), None),  # over the threshold, not sure: not counted
        ("spam", 0.99, 0.60, (), None),  # sure only because of the counters: not counted
        ("ham", 0.50, 0.97, (), "ham"),  # every ham verdict counts ham
        ("ham", 0.19, 0.19, (), "ham"),
        ("ham", 0.01, 0.30, (), "ham"),
        ("phishing", None, None, (), None),  # a forged sender must not become spam evidence
        ("spam", 0.99, 0.99, ("shingles",), None),  # the budget cut the analysis
    ],
)
def test_only_sure_verdicts_are_counted(
    label: Label, p: float | None, content: float | None, partial: tuple[str, ...],
    kind: str | None,
) -> None:  # fmt: skip
    assert Counting().kind(verdict(label, p, partial, content), threshold=0.6) == kind


def test_the_policy_can_be_stricter() -> None:
    # a model whose threshold is above spam_at: a letter under it is ham, and counts so
    assert Counting(spam_at=0.9).kind(verdict("ham", 0.93), threshold=0.97) == "ham"
    assert Counting(ham_below=0.2).kind(verdict("ham", 0.3), threshold=0.6) is None
    assert Counting(ham_below=0.3).kind(verdict("spam", 0.25), threshold=0.2) is None
    # without the content rule, the full model's P alone decides
    loose = Counting(spam_by_content=False)
    assert loose.kind(verdict("spam", 0.99, content=0.6), threshold=0.6) == "spam"


def test_a_false_positive_does_not_snowball() -> None:
    """A sender whose letters the counters hold for spam: its next letter, no spammier than
    the first, is filed in Spam by the counters' word, but not counted spam again."""
    first = verdict("spam", 0.96, content=0.96)  # a confident mistake: counted once
    assert Counting().kind(first, threshold=0.6) == "spam"
    second = verdict("spam", 0.999, content=0.7)  # the counters push it; its content does not
    assert Counting().kind(second, threshold=0.6) is None


def test_without_a_model_the_rules_label_counts() -> None:
    assert Counting().kind(verdict("spam", None), threshold=None) == "spam"
    assert Counting().kind(verdict("ham", None), threshold=None) == "ham"
    assert Counting().kind(verdict("phishing", None), threshold=None) is None


class Broken(MemoryStore):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def apply(self, batches: Sequence[tuple[int, list[tuple[int, int, str, int, int, object]]]]
              ) -> list[Exception | None]:  # fmt: skip
        raise self.error


@pytest.mark.parametrize("error", [StorageError("down"), RuntimeError("a bug")])
def test_learn_never_raises(error: Exception) -> None:
    scanner = Scanner(counters=Counters(Broken(error), buffered=False))
    v = scanner.scan(letter(subject="Lunch tomorrow?", text="Shall we meet at noon?\n"))
    assert v.label == "ham" and v.shingles
    assert scanner.learn(v) is None


class Unreadable(MemoryStore):
    """A counters store that is down: every read fails."""

    def read(self, refs: Sequence[Ref], span: object) -> list[Buckets]:  # type: ignore[override]
        raise StorageError("shingle counters: Redis unavailable: connection refused")


def test_counters_that_cannot_be_read_leave_a_partial_verdict_not_a_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A letter scored while the counters' store is down: the verdict is given without
    them (as for a letter nothing is known about), says so (partial=counters), and counts
    nothing; the same letter with readable, empty counters gets the same label."""
    raw = letter(subject="Lunch tomorrow?", text="Shall we meet at noon?\n")
    down = Scanner(counters=Counters(Unreadable(), buffered=False))
    v = down.scan(raw)
    assert v.partial == (COUNTERS,) and v.shingles
    assert "partial=counters" in v.header()
    assert down.learn(v) is None
    assert "not read" in caplog.text
    up = Scanner(counters=Counters(MemoryStore(), buffered=False)).scan(raw)
    assert up.partial == () and up.label == v.label


def test_learn_counts_and_says_what() -> None:
    store = MemoryStore()
    scanner = Scanner(counters=Counters(store, buffered=False))
    v = scanner.scan(letter(subject="Lunch tomorrow?", text="Shall we meet at noon?\n"))
    assert scanner.learn(v) == "ham"  # no model: the rules' label


def test_simulated_users_answer_misfiled_letters_an_hour_later() -> None:
    users = training.Users(share=1.0, seed=1)
    refs = [Ref(14, 1)]
    users.react("ham", "spam", refs, at=100.0, words=(7, 8))  # a false positive: "not spam"
    users.react("spam", "ham", refs, at=200.0)  # a miss: "spam"
    users.react("ham", "ham", refs, at=300.0)  # filed right: nothing
    assert users.said == {"unspam": 1, "complaint": 1}
    assert users.due(3699.0) == []
    due = users.due(3800.0)
    assert [k for _, _, _, k in due] == ["unspam", "complaint"]
    assert [w for _, _, w, _ in due] == [(7, 8), ()]  # the letter's words go with the word
    none = training.Users(share=0.0, seed=1)
    none.react("ham", "spam", refs, at=1.0)
    assert none.said == {"unspam": 0, "complaint": 0}
