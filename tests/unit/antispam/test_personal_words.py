"""A user's own words in that user's verdicts (pochta.antispam.words.personal and
``Scanner.for_owner``): counted once the user taught enough of both kinds, for that user
only, at no cost for anyone else."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.mailtools import letter

from pochta.antispam import tokens
from pochta.antispam.model import booster
from pochta.antispam.verdict import Scanner
from pochta.antispam.words import FEEDBACK_WEIGHT, Words
from pochta.antispam.words.memory import MemoryWordStore
from pochta.antispam.words.personal import Personal, PersonalRule, blended, own_term, shifted
from pochta.errors import StorageError
from pochta.mime.letter import parse

ALICE, BOB, CAROL = 11, 12, 13


@pytest.fixture(scope="module")
def model() -> booster.Model:
    m = booster.load()
    assert m is not None and m.tokens is not None
    return m


def club(i: int) -> bytes:
    return letter(
        sender="Rowing Club <club@rowing.example>",
        subject=f"Rowing club notes, week {i}",
        text=f"Hi all, the regatta meeting moved to Thursday {i}. The boathouse keys are with"
        " Pete; the new oars arrived. Training schedule attached below as usual. Cheers, the"
        " committee",
    )


PILLS = [
    letter(subject=f"cheap pills {j}", text="buy cheap viagra now, best price online pharmacy")
    for j in range(3)
]
LUNCH = letter(subject="lunch", text="see you at noon")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def setup(model: booster.Model, store: MemoryWordStore | None = None) -> tuple[Scanner, Clock]:
    words = Words(store or MemoryWordStore(), shipped=model.tokens, buffered=False)
    clock = Clock()
    personal = Personal(words, PersonalRule(min_spam=3, min_ham=1, weight=2), clock=clock)
    return Scanner(model=model, words=words, personal=personal), clock


def teach(s: Scanner) -> None:
    """Alice says the club's notes are spam, Bob that they are not; both said "spam" of three
    pill letters and "not spam" of a lunch note (enough of both kinds)."""
    for i in range(4):
        s.feedback(parse(club(i)), "spam", "ham", owner=ALICE)
        s.feedback(parse(club(i + 4)), "not_spam", "spam", owner=BOB)
    for owner in (ALICE, BOB):
        s.feedback(parse(LUNCH), "not_spam", "spam", owner=owner)
        for raw in PILLS:
            s.feedback(parse(raw), "spam", "ham", owner=owner)


def test_a_users_word_decides_for_that_user_only(model: booster.Model) -> None:
    s, _ = setup(model)
    teach(s)
    analysis = s.analyzer.analyze(parse(club(20)))
    everyone = s.decide(analysis)
    alice = s.for_owner(everyone, analysis, ALICE)
    bob = s.for_owner(everyone, analysis, BOB)
    assert alice.label == "spam" and alice.folder == "Spam"
    assert bob.label == "ham" and bob.folder == "Inbox"
    assert alice.probability is not None and bob.probability is not None
    assert everyone.probability is not None
    assert alice.probability > everyone.probability > bob.probability
    # the shipped model's word weights move with what was taught (tokens.TokenTable.weighed):
    # Alice's spam words most, the installation's (4 spam, 4 ham club notes) less, Bob's least
    w = tokens.WEIGHTS_FEATURE
    assert w in analysis.features
    assert alice.features[w] > everyone.features[w] > bob.features[w]
    assert everyone.features[w] != analysis.features[w]
    # Carol taught nothing: the installation's verdict, the very same object (nothing read)
    assert s.for_owner(everyone, analysis, CAROL) is everyone


def test_a_model_switch_during_an_owners_verdict_reads_one_table_for_the_column(
    model: booster.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Words.use`` (a promoted model) landing between the owner's tables and the column:
    the column is moved against the shipped counts the tables were merged with, not the
    new table's (whose every differing word would read as learned)."""
    s, _ = setup(model)
    teach(s)
    assert s.personal is not None and model.tokens is not None
    personal, old = s.personal, model.tokens
    analysis = s.analyzer.analyze(parse(club(20)))
    everyone = s.decide(analysis)
    letter_ = list(analysis.tokens)
    swapped = {t: (c[1], c[0]) for t, c in old.counts.items() if t in set(letter_)}
    new = dataclasses.replace(old, counts={**old.counts, **swapped})
    expected = {}
    for t in (old, new):
        personal.words.use(t)
        table, _ = personal.tables(ALICE, analysis.tokens, analysis.hashes)
        expected[t is new] = t.weighed(letter_, table)
    personal.words.use(old)
    assert expected[False] != expected[True]
    tables = personal.tables

    def switched(*args: object, **kwargs: object) -> object:
        out = tables(*args, **kwargs)
        personal.words.use(new)  # the promotion lands after the owner's tables were read
        return out

    monkeypatch.setattr(personal, "tables", switched)
    alice = s.for_owner(everyone, analysis, ALICE)
    assert alice.features[tokens.WEIGHTS_FEATURE] in expected.values()


def test_below_the_rule_nothing_changes_and_the_set_is_refreshed(model: booster.Model) -> None:
    s, clock = setup(model)
    analysis = s.analyzer.analyze(parse(club(20)))
    for i in range(2):  # two "spam": below min_spam = 3, and no "not spam"
        s.feedback(parse(club(i)), "spam", "ham", owner=ALICE)
    v = s.decide(analysis)
    assert s.for_owner(v, analysis, ALICE) is v
    s.feedback(parse(club(2)), "spam", "ham", owner=ALICE)
    s.feedback(parse(LUNCH), "not_spam", "spam", owner=ALICE)
    v = s.decide(analysis)
    assert s.for_owner(v, analysis, ALICE) is v  # the cached set: not refreshed yet
    clock.now += 61
    assert s.for_owner(v, analysis, ALICE) is not v


def test_rules_verdicts_and_a_store_down_are_left_alone(model: booster.Model) -> None:
    class Down(MemoryWordStore):
        fail = False

        def counts(self, owner: int, words: object) -> dict[int, tuple[int, int]]:
            if self.fail:
                raise StorageError("down")
            return super().counts(owner, words)  # type: ignore[arg-type]

    store = Down()
    s, _ = setup(model, store)
    teach(s)
    analysis = s.analyzer.analyze(parse(club(20)))
    v = s.decide(analysis)
    phishing = dataclasses.replace(v, label="phishing", probability=None)
    assert s.for_owner(phishing, analysis, ALICE) is phishing
    store.fail = True
    assert s.for_owner(v, analysis, ALICE) is v


def test_the_rule_counts_letters_of_both_kinds() -> None:
    rule = PersonalRule(min_spam=3, min_ham=1, weight=2)
    w = FEEDBACK_WEIGHT
    assert rule.ready((3 * w, 1 * w))
    assert not rule.ready((3 * w, 0)) and not rule.ready((2 * w, 5 * w))


class CountingStore(MemoryWordStore):
    """A store that counts its reads (what a refresh costs on a store across the network)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def totals(self, owner: int) -> tuple[int, int]:
        self.reads += 1
        return super().totals(owner)

    def all_totals(self) -> dict[int, tuple[int, int]]:
        self.reads += 1
        return super().all_totals()

    def owners(self) -> list[int]:
        self.reads += 1
        return super().owners()


def test_the_ready_set_is_one_read_of_the_store_however_many_owners_taught() -> None:
    """Every loader refreshes the set every minute, in a delivery: one query for all the
    owners, not one per owner (100,000 users who taught anything: 100,000 queries a minute
    per loader). Buffered letters count too."""
    store = CountingStore()
    words = Words(store, buffered=True)
    w = FEEDBACK_WEIGHT
    for owner in range(1, 201):
        store.add(owner, {1: (3 * w, w)}, (3 * w, w if owner % 2 else 0), day=1)
    words.learn([5], "ham", weight=w, owner=2)  # buffered: owner 2 now has its ham letter
    personal = Personal(words, PersonalRule(min_spam=3, min_ham=1))
    store.reads = 0
    ready = personal.refresh()
    assert store.reads == 1
    assert ready == frozenset(range(1, 201, 2)) | {2}
    words.close()


@given(
    inst=st.dictionaries(st.integers(0, 20), st.tuples(st.integers(0, 50), st.integers(0, 50))),
    own=st.dictionaries(st.integers(0, 20), st.tuples(st.integers(0, 50), st.integers(0, 50))),
    weight=st.integers(1, 5),
)
def test_blended_adds_weight_times_the_owners_counts(
    inst: dict[int, tuple[int, int]], own: dict[int, tuple[int, int]], weight: int
) -> None:
    out, totals = blended(inst, (100, 200), own, (7, 9), weight)
    assert totals == (100 + 7 * weight, 200 + 9 * weight)
    assert set(out) == set(inst) | set(own)
    for h, (s, m) in out.items():
        a, b = inst.get(h, (0, 0))
        c, d = own.get(h, (0, 0))
        assert (s, m) == (a + weight * c, b + weight * d)


def test_own_words_after_the_model_move_the_verdict_further_and_within_the_bound(
    model: booster.Model,
) -> None:
    """With ``bound`` the owner's own words alone (their Fisher score) also shift the
    model's log-odds: toward spam for what Alice taught as spam, toward ham for Bob, never
    by more than ``bound`` (a word-weights model's fixed column cannot drown them)."""
    words = Words(MemoryWordStore(), shipped=model.tokens, buffered=False)
    plain = Scanner(
        model=model,
        words=words,
        personal=Personal(words, PersonalRule(min_spam=3, min_ham=1, weight=2, bound=0.0)),
    )
    words = Words(MemoryWordStore(), shipped=model.tokens, buffered=False)
    bound = 2.0
    termed = Scanner(
        model=model,
        words=words,
        personal=Personal(words, PersonalRule(min_spam=3, min_ham=1, weight=2, bound=bound)),
    )
    for s in (plain, termed):
        teach(s)
    analysis = plain.analyzer.analyze(parse(club(20)))
    v = plain.decide(analysis)
    for owner, toward_spam in ((ALICE, True), (BOB, False)):
        a = plain.for_owner(v, analysis, owner).probability
        b = termed.for_owner(termed.decide(analysis), analysis, owner).probability
        assert a is not None and b is not None
        assert (b > a) if toward_spam else (b < a)
        shift = math.log(b / (1 - b)) - math.log(a / (1 - a))
        assert abs(shift) <= bound + 1e-9


@given(score=st.floats(-1, 2, allow_nan=False), bound=st.floats(0, 10))
def test_the_own_term_is_bounded_and_monotone(score: float, bound: float) -> None:
    t = own_term(score, bound)
    assert -bound <= t <= bound
    assert own_term(0.5, bound) == 0.0
    assert own_term(min(score + 0.1, 2.0), bound) >= t
    p = shifted(0.3, t)
    assert 0.0 < p < 1.0
    assert (p >= 0.3 - 1e-12) if t >= 0 else (p <= 0.3 + 1e-12)


def test_the_own_term_grows_with_the_scarcer_kind_taught() -> None:
    """A user just past the rule (3 spam, 1 ham) would otherwise make every word of her spam
    that her one ham letter lacks a clue, and push ordinary letters toward spam by the whole
    bound: the term may use bound x (letters of the scarcer kind / ramp), at most bound."""
    w = FEEDBACK_WEIGHT
    rule = PersonalRule(min_spam=3, min_ham=1, weight=2, bound=1.0, ramp=10)
    assert rule.own_bound((3 * w, 1 * w)) == pytest.approx(0.1)
    assert rule.own_bound((30 * w, 5 * w)) == pytest.approx(0.5)
    assert rule.own_bound((10 * w, 10 * w)) == pytest.approx(1.0)
    assert rule.own_bound((400 * w, 200 * w)) == 1.0
    assert PersonalRule().own_bound((3 * w, 1 * w)) == pytest.approx(1 / 3)  # the default: 3
    assert PersonalRule(bound=2.0, ramp=0).own_bound((3 * w, 1 * w)) == 2.0
    assert PersonalRule(bound=0.0).own_bound((50 * w, 50 * w)) == 0.0
