"""The verdict's read of the shingles' counters as plain ints (issue 29, item 3):
``Counters.query_flat`` gives the numbers ``Counters.query`` gives, and
``shingle_features_flat`` of them the features ``shingle_features`` makes of ``query``'s dicts
(the same names, the same floats, in the same order). Compared on generated counters (stored,
buffered, in flight, paired shingles, saturated values, several windows) and on the unsealed
corpus letters' shingles."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.antispam.shingles.counters import Ref
from pochta.antispam.shingles.counters.buckets import (
    KINDS,
    MAX_VALUE,
    Buckets,
    Counts,
    Flat,
    flat_sums,
    parse_window,
    window_sums,
    zeros,
)
from pochta.antispam.shingles.counters.memory import MemoryStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.extract import extract
from pochta.antispam.shingles.registry import Shingle, ShingleType, query_refs, update_refs
from pochta.antispam.verdict import WINDOWS, shingle_features, shingle_features_flat
from pochta.mime import letter as letter_mod
from pochta_factory import corpus

NOW = 1_730_000_000.0
WINDOW_TEXTS = ["10m", "1h", "90m", "24h", "2d", "14d"]
TYPES = [ShingleType.SUBJECT, ShingleType.FROM_ADDRESS, ShingleType.LINK_HOST]


def flattened(by_window: dict[str, Counts]) -> Flat:
    return tuple(by_window[w][k] for w in by_window for k in KINDS)


def pairs_and_uniques(n: int) -> list[Shingle]:
    """``n`` shingles of three plain types, and a sender-recipient pair with its unique."""
    out = [Shingle.of(TYPES[i % len(TYPES)], f"value {i % 7}") for i in range(n)]
    unique = Shingle.of(ShingleType.SENDER_RECIPIENTS_UNIQUE, "sender@example.org")
    for r in range(n % 3 + 1):
        out.append(
            Shingle.of(ShingleType.SENDER_RECIPIENT, f"sender@example.org r{r}@x.org", unique)
        )
    out.append(unique)
    return out


updates = st.lists(
    st.tuples(
        st.integers(0, 11),  # which shingle
        st.sampled_from(sorted(KINDS)),
        st.integers(1, 3),  # n
        st.integers(-20 * 86_400, 0),  # when, before NOW
        st.sampled_from(["stored", "buffered"]),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(
    updates=updates,
    windows=st.lists(st.sampled_from(WINDOW_TEXTS), min_size=1, max_size=4, unique=True),
    huge=st.booleans(),
)
def test_query_flat_is_query_in_numbers(
    updates: list[tuple[int, str, int, int, str]], windows: list[str], huge: bool
) -> None:
    shingles = pairs_and_uniques(9)
    counters = Counters(MemoryStore(), clock=lambda: NOW, cache_ttl=3600.0)
    for which, kind, n, before, where in updates:
        s = shingles[which % len(shingles)]
        refs = update_refs([s]) or [s.ref]
        counters.update(refs, kind, MAX_VALUE if huge and n == 3 else n, at=NOW + before)
        if where == "stored":
            counters.flush()
    ws = [parse_window(w) for w in windows]
    refs = query_refs(shingles)
    for _ in range(2):  # the second read from the read cache
        dicts = counters.query(refs, ws)
        flats = counters.query_flat(refs, ws)
        assert [flattened(d) for d in dicts] == list(flats)
        assert shingle_features_flat(shingles, flats, windows) == shingle_features(shingles, dicts)
        assert list(shingle_features_flat(shingles, flats, windows)) == list(
            shingle_features(shingles, dicts)
        )


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.tuples(
            st.integers(0, 11),  # which shingle
            st.lists(st.integers(0, 5), min_size=15, max_size=15),
        ),
        max_size=12,
    ),
    huge=st.booleans(),
)
def test_features_flat_are_the_features(values: list[tuple[int, list[int]]], huge: bool) -> None:
    """Any sums (not only what a store could hold), shared zeros and equal-valued tuples
    alike."""
    shingles = pairs_and_uniques(9)
    flats: list[Flat] = [zeros(3)] * len(shingles)
    for which, numbers in values:
        flats[which % len(shingles)] = tuple(MAX_VALUE if huge and v == 5 else v for v in numbers)
    dicts = [
        {w: dict(zip(KINDS, flat[i * 5 : i * 5 + 5], strict=True)) for i, w in enumerate(WINDOWS)}
        for flat in flats
    ]
    got = shingle_features_flat(shingles, flats, WINDOWS)
    want = shingle_features(shingles, dicts)
    assert list(got.items()) == list(want.items())


def test_flat_sums_of_nothing_is_the_shared_zeros() -> None:
    ws = [parse_window(w) for w in WINDOWS]
    assert flat_sums(None, ws, NOW) is zeros(3)
    assert flat_sums(Buckets(), ws, NOW) is zeros(3)
    b = Buckets()
    b.add_slot("s", int(NOW // 600) - 1000, 2)  # outside 1h and 24h, inside 14d
    assert flat_sums(b, ws, NOW) == flattened(window_sums(b, ws, NOW))


def test_windows_named_twice_are_refused() -> None:
    s = [Shingle.of(ShingleType.SUBJECT, "x")]
    try:
        shingle_features_flat(s, [zeros(2)], ["1h", "1h"])
    except ValueError:
        return
    raise AssertionError("two windows of one name were taken")


def test_on_the_corpus_letters() -> None:
    """Every 8th unsealed training letter counted with its label at a time around NOW, then
    every 5th unsealed letter's shingles read both ways."""
    counters = Counters(MemoryStore(), clock=lambda: NOW, buffered=False)
    letters = list(corpus.unsealed(("easy-ham-1", "spam-1")))
    ws = [parse_window(w) for w in WINDOWS]
    for i, m in enumerate(letters[::8]):
        refs: Sequence[Ref] = update_refs(extract(letter_mod.parse(m.raw), None))
        kind = "spam" if m.group.startswith("spam") else "ham"
        counters.update(refs, kind, at=NOW - (i % 40) * 3 * 3600)
    read = 0
    for m in letters[::5]:
        shingles = extract(letter_mod.parse(m.raw), None)
        refs = query_refs(shingles)
        dicts = counters.query(refs, ws)
        flats = counters.query_flat(refs, ws)
        assert [flattened(d) for d in dicts] == list(flats)
        got = shingle_features_flat(shingles, flats, WINDOWS)
        assert list(got.items()) == list(shingle_features(shingles, dicts).items())
        read += any(v for f in flats for v in f)
    assert read > 50  # the comparison saw counted shingles, not only zeros
