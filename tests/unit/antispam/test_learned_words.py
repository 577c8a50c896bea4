"""The words an installation learns (pochta.antispam.words) as the scanner uses them: read
with the shipped table, taught only by sure verdicts and people's word, and never able to
teach themselves."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.mailtools import letter

from pochta.antispam import tokens
from pochta.antispam import words as words_mod
from pochta.antispam.auth.results import NO_AUTH
from pochta.antispam.model import booster
from pochta.antispam.verdict import Learning, Scanner, Verdict
from pochta.antispam.words import FEEDBACK_WEIGHT, Words, merged_table
from pochta.antispam.words.memory import MemoryWordStore
from pochta.antispam.words.sqlite import SQLiteWordStore
from pochta.mime.letter import parse

NEWSLETTER = letter(
    subject="Your weekly garden digest",
    text="This week in the garden: tomatoes, compost, seedlings and irrigation. "
    "Read the full article on our site. Unsubscribe any time from your settings.",
)


@pytest.fixture(scope="module")
def model() -> booster.Model:
    m = booster.load()
    assert m is not None and m.tokens is not None, "the shipped model has a token table"
    return m


def scanner(model: booster.Model, store: MemoryWordStore | None = None) -> tuple[Scanner, Words]:
    words = Words(store or MemoryWordStore(), shipped=model.tokens, buffered=False)
    return Scanner(model=model, words=words), words


def test_with_nothing_learned_the_score_is_the_shipped_tables(model: booster.Model) -> None:
    plain = Scanner(model=model).scan(NEWSLETTER)
    learning, _ = scanner(model)
    got = learning.scan(NEWSLETTER)
    assert got.features[tokens.FEATURE] == pytest.approx(plain.features[tokens.FEATURE])
    assert got.probability == pytest.approx(plain.probability)
    assert got.content_probability == pytest.approx(plain.content_probability)


def test_learned_words_move_the_score_and_not_what_the_letter_shows(
    model: booster.Model,
) -> None:
    s, words = scanner(model)
    first = s.scan(NEWSLETTER)
    hashes = first.hashes
    assert hashes, "the verdict carries the letter's word hashes"
    for _ in range(40):  # people said "spam" about letters with these words
        words.learn(hashes, "spam", FEEDBACK_WEIGHT)
    after = s.scan(NEWSLETTER)
    assert after.features[tokens.FEATURE] > first.features[tokens.FEATURE] + 0.2
    assert after.probability is not None and first.probability is not None
    assert after.probability >= first.probability
    # the decision of what to learn reads the shipped knowledge only: unchanged
    assert after.content_probability == pytest.approx(first.content_probability)


def verdict(label: str, p: float, content: float, partial: tuple[str, ...] = ()) -> Verdict:
    return Verdict(label, p, 0.0, [], [], NO_AUTH, {}, [], partial, content, (), (1, 2, 3))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("label", "p", "content", "partial", "counted", "taught"),
    [
        ("spam", 0.99, 0.99, (), "spam", "spam"),  # sure spam: the shingles count it, words too
        ("spam", 0.99, 0.60, (), None, None),  # sure only by what was learned: nothing
        ("ham", 0.02, 0.05, (), "ham", "ham"),  # sure ham by the shipped knowledge
        ("ham", 0.30, 0.30, (), "ham", None),  # a ham verdict, not sure: the words wait
        ("ham", 0.01, 0.30, (), "ham", None),  # sure only by what was learned: nothing
        ("ham", 0.02, 0.02, ("features",), None, None),  # partial: nothing
        ("phishing", 0.0, 0.0, (), None, None),
    ],
)
def test_what_a_verdict_teaches(
    label: str, p: float, content: float, partial: tuple[str, ...], counted: str | None,
    taught: str | None,
) -> None:  # fmt: skip
    v = verdict(label, p, content, partial)
    assert Learning(ham_below=0.1, from_verdicts=True).kind(v, counted) == taught
    assert Learning(ham_below=0.1).kind(v, counted) is None  # the default: people's word only


def test_learn_teaches_the_store_as_the_policy_says(model: booster.Model) -> None:
    store = MemoryWordStore()
    s, _ = scanner(model, store)
    s.learning = Learning(ham_below=0.99, from_verdicts=True)  # every sure-enough ham teaches
    v = s.scan(NEWSLETTER)
    assert v.label == "ham"
    s.learn(v)
    assert store.totals(0) == (0, 1)
    assert store.counts(0, list(v.hashes)) == {h: (0, 1) for h in v.hashes}
    s.learning = Learning(ham_below=0.99)  # the default: a verdict teaches nothing
    s.learn(v)
    assert store.totals(0) == (0, 1)


def test_a_persons_word_counts_as_several_letters(model: booster.Model) -> None:
    store = MemoryWordStore()
    s, _ = scanner(model, store)
    s.feedback(parse(NEWSLETTER), "spam", verdict="ham")  # "spam" on a letter pochta let in
    s.feedback(parse(NEWSLETTER), "read", verdict="ham")  # not a word on spam: nothing
    assert store.totals(0) == (FEEDBACK_WEIGHT, 0)
    s.feedback(parse(NEWSLETTER), "not_spam", verdict="spam")  # "not spam" on a filed one
    assert store.totals(0) == (FEEDBACK_WEIGHT, FEEDBACK_WEIGHT)


@pytest.mark.parametrize("verdict", ["ham", "spam", "phishing", None])
def test_moving_a_letter_to_and_fro_teaches_at_most_once(
    model: booster.Model, verdict: str | None
) -> None:
    """Found in review: every move taught anew, so toggling one letter between Spam and the
    Inbox a thousand times pulled every letter's score toward neutral."""
    store = MemoryWordStore()
    s, words = scanner(model, store)
    letter = parse(NEWSLETTER)
    into_spam_first = verdict not in ("spam", "phishing")  # where the letter is not yet
    moves = ["spam", "not_spam"] if into_spam_first else ["not_spam", "spam"]
    s.feedback(letter, moves[0], verdict)
    once = store.totals(0)
    assert sum(once) == FEEDBACK_WEIGHT
    h = words.hashes(tokens.tokenize(letter))
    counts_once = store.counts(0, list(h))
    for _ in range(200):
        s.feedback(letter, moves[1], verdict)
        s.feedback(letter, moves[0], verdict)
    assert store.totals(0) == once
    assert store.counts(0, list(h)) == counts_once
    s.feedback(letter, moves[1], verdict)  # and back where pochta put it: nothing taught
    assert store.totals(0) == (0, 0)


def test_the_store_keeps_hashes_never_the_words(tmp_path: Path, model: booster.Model) -> None:
    store = SQLiteWordStore(tmp_path / "words.sqlite3")
    s, words = scanner(model)
    words.store = store
    s.feedback(parse(letter(subject="x", text="zanzibarquokka personalsecret 491827")), "spam")
    assert store.totals(0) == (FEEDBACK_WEIGHT, 0)
    store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    for word in (b"zanzibarquokka", b"personalsecret", b"491827"):
        assert word not in raw


@settings(max_examples=50, deadline=None)
@given(
    words=st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "s:offer"]), unique=True),
    learned=st.dictionaries(
        st.sampled_from(["alpha", "beta", "gamma", "delta", "s:offer"]),
        st.tuples(st.integers(0, 50), st.integers(0, 50)),
    ),
    totals=st.tuples(st.integers(0, 100), st.integers(0, 100)),
)
def test_merged_is_the_table_of_the_summed_counts(
    words: list[str], learned: dict[str, tuple[int, int]], totals: tuple[int, int]
) -> None:
    shipped = tokens.TokenTable({"alpha": (5, 1), "beta": (0, 9), "s:offer": (7, 0)}, 10, 20)
    key = b"installation key"
    toks, hashes = tokens.hashed(words, key)
    by_hash = {tokens.token_hash(w, key): c for w, c in learned.items()}
    got = merged_table(toks, hashes, shipped, by_hash, totals, key)
    want: dict[str, tuple[int, int]] = {}
    for w in words:
        a, b = shipped.counts.get(w, (0, 0)), learned.get(w, (0, 0))
        if a[0] + b[0] or a[1] + b[1]:
            want[w] = (a[0] + b[0], a[1] + b[1])
    assert dict(got.counts) == want
    assert (got.spam_letters, got.ham_letters) == (10 + totals[0], 20 + totals[1])


def test_the_hash_needs_the_installations_key() -> None:
    """Unkeyed, a short word (a code) is found again by hashing every candidate."""
    assert tokens.token_hash("491827", b"k1") != tokens.token_hash("491827", b"k2")
    assert tokens.token_hash("491827", b"k1") != tokens.token_hash("491827")
    shipped = tokens.TokenTable({"offer": (5, 1)}, 10, 20)
    assert shipped.by_hash(b"k1") == {tokens.token_hash("offer", b"k1"): (5, 1)}


def test_warm_keys_the_shipped_table_once_before_the_first_letter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker calls ``warm`` at start: the first letter's table hashes none of the shipped
    words again, and reads the same counts as without it."""
    shipped = tokens.TokenTable({"offer": (5, 1), "free": (9, 0), "meeting": (0, 8)}, 10, 20)
    key = b"installation key"
    cold = Words(MemoryWordStore(), shipped=tokens.TokenTable(shipped.counts, 10, 20), key=key)
    words = Words(MemoryWordStore(), shipped=shipped, key=key, buffered=False)
    calls: list[str] = []
    real = tokens.token_hash

    def counted(token: str, key: bytes = b"") -> int:
        calls.append(token)
        return real(token, key)

    monkeypatch.setattr(tokens, "token_hash", counted)
    words.warm()
    assert sorted(calls) == ["free", "meeting", "offer"]
    toks, hashes = tokens.hashed(["free", "offer", "unknown"], key)
    calls.clear()
    table = words.table(toks, hashes)
    assert calls == []
    assert dict(table.counts) == dict(cold.table(toks, hashes).counts)
    assert dict(table.counts) == {"free": (9, 0), "offer": (5, 1)}


def test_warm_without_a_shipped_table_does_nothing() -> None:
    Words(MemoryWordStore(), buffered=False).warm()


_SHIPPED = tokens.TokenTable(
    {"cheap": (40, 1), "meeting": (1, 30), "zero": (0, 0), "even": (5, 5), "rare": (2, 0)},
    spam_letters=50,
    ham_letters=60,
)
_TOKENS = st.lists(
    st.sampled_from(["cheap", "meeting", "zero", "even", "rare", "unknown", "s:offer", "x"]),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(_TOKENS, _TOKENS, st.sampled_from([b"", b"key"]), st.booleans())
def test_words_judge_is_the_letters_table_judging(
    letter_tokens: list[str], learned_tokens: list[str], key: bytes, buffered: bool
) -> None:
    """``Words.judge`` (the shipped table's own judgment when nothing is learned) gives what
    the letter's merged table gives, nothing learned, some words learned (stored or still
    buffered), duplicate tokens, tokens the shipped table does not know or counts (0, 0)."""
    words = Words(MemoryWordStore(), shipped=_SHIPPED, key=key, buffered=buffered)
    try:
        given_ = tuple(letter_tokens)
        hashes = words.hashes(given_)
        for _ in range(2):
            want = words.table(given_, hashes).judge(given_, shown=3)
            assert words.judge(given_, hashes, 3) == want
            if not learned_tokens:
                break
            words.learn(words.hashes(learned_tokens), "ham", 2)
    finally:
        words.close()


_WEIGHED = dataclasses.replace(
    _SHIPPED,
    weights=tokens.WordWeights(-0.5, {"cheap": 1.5, "meeting": -1.2, "even": 0.1, "rare": 0.4}),
)


@settings(max_examples=100, deadline=None)
@given(_TOKENS, _TOKENS, st.sampled_from(["spam", "ham"]))
def test_learned_words_move_the_weights_column_as_the_shipped_table_weighs_them(
    letter_tokens: list[str], learned_tokens: list[str], kind: words_mod.Kind
) -> None:
    """``Words.judged``'s third answer: None when nothing of the letter's words was learned
    (the analysis's shipped score stands), else the shipped table's ``weighed`` of the
    letter's merged table; it moves the learned kind's way."""
    words = Words(MemoryWordStore(), shipped=_WEIGHED, buffered=False)
    given_ = tuple(letter_tokens)
    hashes = words.hashes(given_)
    score, shown, weights = words.judged(given_, hashes, 3)
    # the letter's table judges (not Words.judge: that is judged's first two answers)
    assert weights is None and (score, shown) == words.table(given_, hashes).judge(given_, 3)
    words.learn(words.hashes(learned_tokens), kind, FEEDBACK_WEIGHT)
    score, shown, weights = words.judged(given_, hashes, 3)
    assert (score, shown) == words.table(given_, hashes).judge(given_, 3)
    if not set(learned_tokens) & set(given_):
        assert weights is None
        return
    assert weights == _WEIGHED.weighed(given_, words.table(given_, hashes))
    assert _WEIGHED.weights is not None
    plain = _WEIGHED.weights.score(given_)
    assert (weights > plain) if kind == "spam" else (weights < plain)


def test_a_model_switch_during_a_judgment_reads_one_table_for_the_score_and_the_column(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Words.use`` (a promoted model) may land while a letter is judged: the letter's
    merged table and the column's shipped counts must come from the same table, or every
    word whose counts differ between the two tables reads as learned and moves the column."""
    old = _WEIGHED
    new = dataclasses.replace(
        _WEIGHED, counts={**_WEIGHED.counts, "cheap": (1, 30), "meeting": (40, 1)}
    )
    words = Words(MemoryWordStore(), shipped=old, buffered=False)
    words.learn(words.hashes(["rare"]), "spam", FEEDBACK_WEIGHT)
    given_ = ("cheap", "meeting", "rare")
    hashes = words.hashes(given_)
    learned, totals = words.learned(words_mod.INSTALLATION, hashes)
    read = words.learned

    def switched(
        owner: int, hs: Sequence[int]
    ) -> tuple[dict[int, tuple[int, int]], tuple[int, int]]:
        out = read(owner, hs)
        words.use(new)  # the promotion lands after the store was read
        return out

    monkeypatch.setattr(words, "learned", switched)
    score, _, weights = words.judged(given_, hashes)
    consistent = {
        (
            merged_table(given_, hashes, t, learned, totals).score(given_),
            t.weighed(given_, merged_table(given_, hashes, t, learned, totals)),
        )
        for t in (old, new)
    }
    assert (score, weights) in consistent


def test_words_judge_with_nothing_learned_reads_the_shipped_table(model: booster.Model) -> None:
    _, words = scanner(model)
    letter_tokens = tuple(sorted(tokens.tokenize(parse(NEWSLETTER))))
    hashes = words.hashes(letter_tokens)
    assert model.tokens is not None
    assert words.judge(letter_tokens, hashes, 5) == model.tokens.judge(letter_tokens, shown=5)
    assert words.judge(letter_tokens, hashes, 5) == (
        words.table(letter_tokens, hashes).judge(letter_tokens, shown=5)
    )


def test_the_sqlite_store_reads_what_another_connection_wrote_after_it_read_nothing(
    tmp_path: Path,
) -> None:
    """A read that found nothing learned is remembered only until the file changes: words
    another process (here: another store on the same file) or this store's own writer adds,
    and words it forgets, are read at once; another owner's words are not this owner's."""
    path = tmp_path / "words.sqlite3"
    reader, other = SQLiteWordStore(path), SQLiteWordStore(path)
    try:
        h1, h2 = tokens.token_hash("cheap"), tokens.token_hash("meeting")
        assert reader.counts(0, [h1, h2]) == {}
        assert reader.counts(0, [h1, h2]) == {}
        other.add(0, {h1: (3, 1)}, (1, 0), day=1)
        assert reader.counts(0, [h1, h2]) == {h1: (3, 1)}
        assert reader.counts(7, [h1, h2]) == {}
        reader.add(7, {h2: (0, 2)}, (0, 1), day=1)  # this store's own writer connection
        assert reader.counts(7, [h1, h2]) == {h2: (0, 2)}
        assert other.counts(7, [h2]) == {h2: (0, 2)}
        other.forget(0)
        assert reader.counts(0, [h1, h2]) == {}
        other.add(0, {h2: (1, 1)}, (1, 1), day=2)
        assert reader.counts(0, [h1, h2]) == {h2: (1, 1)}
        assert reader.counts(0, []) == {}
    finally:
        reader.close()
        other.close()


def test_the_sqlite_store_looks_no_word_up_where_nothing_was_learned(tmp_path: Path) -> None:
    """With nothing stored for the owner, a letter's words are not asked one by one (the
    read that was ~0.1-0.3 ms a letter): the file is asked whether anything changed."""
    store = SQLiteWordStore(tmp_path / "words.sqlite3")
    try:
        asked: list[str] = []
        store.db.reader().set_trace_callback(asked.append)
        hashes = [tokens.token_hash(f"word{i}") for i in range(300)]
        for _ in range(3):
            assert store.counts(0, hashes) == {}
        assert not [sql for sql in asked if " IN (" in sql]
        store.add(0, {hashes[5]: (1, 0)}, (1, 0), day=1)
        assert store.counts(0, hashes) == {hashes[5]: (1, 0)}
        assert [sql for sql in asked if " IN (" in sql]
    finally:
        store.close()


def test_a_new_shipped_table_is_keyed_before_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """``use`` (a promoted model's table, ``app.switch_model``) hashes the new table's words
    before it replaces the old one: the first letter after it hashes none of them, and is
    judged by the new table's counts."""
    key = b"installation key"
    old = tokens.TokenTable({"offer": (5, 1)}, 10, 20)
    new = tokens.TokenTable({"free": (9, 0), "meeting": (0, 8)}, 10, 20)
    words = Words(MemoryWordStore(), shipped=old, key=key, buffered=False)
    words.warm()
    calls: list[str] = []
    read: list[tokens.TokenTable | None] = []  # the table letters read meanwhile
    real = tokens.token_hash

    def counted(token: str, key: bytes = b"") -> int:
        calls.append(token)
        read.append(words.shipped)
        return real(token, key)

    monkeypatch.setattr(tokens, "token_hash", counted)
    words.use(new)
    assert sorted(calls) == ["free", "meeting"]
    assert [t is old for t in read] == [True, True]
    assert words.shipped is new
    calls.clear()
    toks, hashes = tokens.hashed(["free", "offer"], key)
    assert words.judge(toks, hashes, 3) == new.judge(toks, shown=3)
    assert dict(words.table(toks, hashes).counts) == {"free": (9, 0)}
    assert calls == []


def test_the_sqlite_store_remembers_nothing_learned_per_thread(tmp_path: Path) -> None:
    """Each thread reads on its own connection, whose ``data_version`` counts on its own: what
    one thread's connection found empty is not another's answer after a word was stored."""
    store = SQLiteWordStore(tmp_path / "words.sqlite3")
    try:
        h = tokens.token_hash("cheap")
        assert store.counts(0, [h]) == {}  # this thread: nothing learned
        store.add(0, {h: (2, 0)}, (1, 0), day=1)
        got: list[dict[int, tuple[int, int]]] = []
        with ThreadPoolExecutor(2) as pool:  # new threads: new connections
            got = list(pool.map(lambda _: store.counts(0, [h]), range(4)))
        assert got == [{h: (2, 0)}] * 4
        assert store.counts(0, [h]) == {h: (2, 0)}
        store.forget(0)
        with ThreadPoolExecutor(2) as pool:
            got = list(pool.map(lambda _: store.counts(0, [h]), range(4)))
        assert got == [{}] * 4
        assert store.counts(0, [h]) == {}
    finally:
        store.close()
