"""Time buckets and windows (pochta.antispam.shingles.counters.buckets): property tests against a
brute-force model written in seconds, not bucket numbers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.antispam.shingles.counters import Ref
from pochta.antispam.shingles.counters.buckets import (
    DAY,
    KINDS,
    SLOT,
    Buckets,
    Window,
    day_key,
    parse_window,
    shard_of,
    slot_of,
    span,
    stem,
    window_sum,
    window_sums,
)
from pochta.antispam.shingles.counters.buffer import ReadCache, ShardBuffer
from pochta.antispam.shingles.counters.memory import MemoryStore
from pochta.errors import InvalidInput

NOW = 1_730_000_000.0  # 2024-10-27 03:33:20 UTC
KIND_LIST = list(KINDS)


@pytest.mark.parametrize(
    ("text", "unit", "count"),
    [
        ("10m", "10m", 1),
        ("1h", "10m", 6),
        ("90m", "10m", 9),
        ("95m", "10m", 10),  # rounded up to whole buckets
        ("24h", "10m", 144),
        ("1d", "10m", 144),
        ("25h", "1d", 2),
        ("3d", "1d", 3),
        ("14d", "1d", 14),
        ("3600", "10m", 6),
        ("1s", "10m", 1),
    ],
)
def test_parse_window(text: str, unit: str, count: int) -> None:
    w = parse_window(text)
    assert (w.unit, w.count, w.name) == (unit, count, text)


@pytest.mark.parametrize("text", ["", "0h", "15d", "337h", "1w", "-1h", "h", "1.5h"])
def test_bad_windows_are_invalid_input(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_window(text)


def test_seed_bucket_numbers_count_from_the_unix_epoch() -> None:
    t = 1_698_911_400  # 2023-11-02 07:50 UTC, the seed's example
    assert slot_of(t) == 2_831_519
    assert math.floor(t / DAY) == 19_663


def test_key_format_is_the_seeds_with_a_hash_tag() -> None:
    h = 0x5791F8CAC2B7D8DD
    s = stem("mass_in", shard_of(h), h, 14)
    assert s == "mass_in{0dd}_5791f8cac2b7d8dd_14"
    assert day_key(s, 19_663) == "mass_in{0dd}_5791f8cac2b7d8dd_14_1d_19663"
    assert 19_663 * 144 + 47 == 2_831_519  # its field "s47" is the seed's 10-minute period


# -- the model ------------------------------------------------------------------------------
def model_sum(events: list[tuple[float, str, int]], window: str, now: float) -> dict[str, int]:
    """Increments whose time lies in the window's whole buckets, derived from seconds: up to a
    day, from the start of the 10-minute period ``ceil(w/600) - 1`` periods before now's;
    beyond, from the start of the day ``ceil(w/86400) - 1`` days before today."""
    w = parse_window(window)
    seconds = w.count * (SLOT if w.unit == "10m" else DAY)
    size = SLOT if w.unit == "10m" else DAY
    end = (now // size + 1) * size  # the end of the current bucket
    start = end - seconds
    out = dict.fromkeys(KINDS, 0)
    for t, kind, n in events:
        if start <= t < end and t <= now:
            out[kind] += n
    return out


events_strategy = st.lists(
    st.tuples(
        st.floats(min_value=NOW - 16 * DAY, max_value=NOW, allow_nan=False),
        st.sampled_from(KIND_LIST),
        st.integers(min_value=1, max_value=2**40),
    ),
    max_size=60,
)
window_strategy = st.sampled_from(["10m", "1h", "90m", "6h", "24h", "2d", "7d", "14d"])


@settings(max_examples=300, deadline=None)
@given(events_strategy, window_strategy, st.floats(min_value=0, max_value=DAY))
def test_window_sum_of_buckets_equals_the_brute_force_model(
    events: list[tuple[float, str, int]], window: str, later: float
) -> None:
    now = NOW + later
    b = Buckets()
    for t, kind, n in events:
        b.add_slot(KINDS[kind], slot_of(t), n)
    assert window_sum(b, parse_window(window), now) == model_sum(events, window, now)


@settings(max_examples=200, deadline=None)
@given(
    events_strategy,
    st.lists(window_strategy, min_size=1, max_size=4),
    st.floats(min_value=0, max_value=DAY),
    st.booleans(),
)
def test_window_sums_is_each_window_sum(
    events: list[tuple[float, str, int]], windows: list[str], later: float, huge: bool
) -> None:
    """The one pass over the buckets for every window gives what each window's own sum does
    (a name given twice: the later window; a sum past MAX_VALUE: saturated)."""
    now = NOW + later
    b = Buckets()
    for t, kind, n in events:
        b.add_slot(KINDS[kind], slot_of(t), n * (1 << 62) if huge else n)
    ws = [parse_window(w) for w in windows] + [Window("24h", "10m", 6)]  # "24h" again
    assert window_sums(b, ws, now) == {w.name: window_sum(b, w, now) for w in ws}


@settings(max_examples=100, deadline=None)
@given(events_strategy, st.lists(window_strategy, min_size=1, max_size=3, unique=True))
def test_buffer_and_store_agree_with_the_model(
    events: list[tuple[float, str, int]], windows: list[str]
) -> None:
    """Increments buffered, drained in pieces into a store, read back over a span: same sums."""
    ref = Ref(14, 0xDEADBEEF)
    store = MemoryStore()
    buf = ShardBuffer()
    for i, (t, kind, n) in enumerate(events):
        buf.add(ref.type, ref.hash, KINDS[kind], slot_of(t), n)
        if i % 7 == 6:  # a flush now and then
            store.apply([(ref.shard, buf.drain())])
            buf = ShardBuffer()
    ws = [parse_window(w) for w in windows]
    sp = span(ws, NOW)
    (stored,) = store.read([ref], sp)
    buf.contribution(ref.id, stored)
    for w in windows:
        assert window_sum(stored, parse_window(w), NOW) == model_sum(events, w, NOW)


@settings(max_examples=100, deadline=None)
@given(events_strategy)
def test_a_longer_window_never_counts_less(events: list[tuple[float, str, int]]) -> None:
    b = Buckets()
    for t, kind, n in events:
        b.add_slot(KINDS[kind], slot_of(t), n)
    order = ["10m", "1h", "6h", "24h", "2d", "7d", "14d"]
    sums = [sum(window_sum(b, parse_window(w), NOW).values()) for w in order]
    assert sums == sorted(sums)


def test_one_hour_counts_the_current_bucket_and_five_before() -> None:
    now = 12 * 3600 + 34 * 60  # 12:34 on day 0
    b = Buckets()
    for minute in (11 * 60 + 39, 11 * 60 + 40, 12 * 60 + 34):
        b.add_slot("s", slot_of(minute * 60), 1)
    assert window_sum(b, parse_window("1h"), now)["spam"] == 2  # 11:40 and 12:34, not 11:39


def test_fourteen_days_is_today_and_thirteen_before() -> None:
    b = Buckets()
    b.add_slot("h", slot_of(NOW - 13 * DAY), 1)
    b.add_slot("h", slot_of(NOW - 14 * DAY), 100)
    assert window_sum(b, parse_window("14d"), NOW)["ham"] == 1


# -- expiry ---------------------------------------------------------------------------------
def test_expiry_drops_only_what_no_window_reaches() -> None:
    store = MemoryStore()
    ref = Ref(8, 42)
    times = [NOW - 15 * DAY, NOW - 13 * DAY, NOW - 25 * 3600, NOW - 23 * 3600, NOW]
    store.apply([(ref.shard, [(8, 42, "s", slot_of(t), 1, None) for t in times])])
    ws = [parse_window("24h"), parse_window("14d")]
    (before,) = store.read([ref], span(ws, NOW))
    dropped = store.expire(NOW)
    (after,) = store.read([ref], span(ws, NOW))
    assert dropped > 0
    for w in ws:
        assert window_sum(after, w, NOW) == window_sum(before, w, NOW)
    assert window_sum(after, ws[1], NOW)["spam"] == 4  # the 15-day-old one was never in
    assert window_sum(after, ws[0], NOW)["spam"] == 2


def test_span_reads_only_the_buckets_the_windows_need() -> None:
    sp = span([parse_window("1h")], NOW)
    assert sp.slot_to - sp.slot_from + 1 == 6
    assert sp.day_from > sp.day_to  # no day buckets
    sp = span([parse_window("3d"), parse_window("10m")], NOW)
    assert list(sp.days) == [
        math.floor(NOW / DAY) - 2,
        math.floor(NOW / DAY) - 1,
        math.floor(NOW / DAY),
    ]
    assert sp.slot_from == sp.slot_to == slot_of(NOW)


# -- the write buffer -----------------------------------------------------------------------
def test_buffer_adds_increments_of_one_cell_up() -> None:
    buf = ShardBuffer()
    slot = slot_of(NOW)
    assert buf.add(8, 1, "s", slot, 1) == 1
    for _ in range(4):
        assert buf.add(8, 1, "s", slot, 1) == 0
    buf.add(8, 1, "s", slot + 1, 5)
    buf.add(8, 1, "h", slot, 2)
    assert buf.size == 3
    assert sorted(buf.drain()) == sorted(
        [(8, 1, "s", slot, 5, None), (8, 1, "s", slot + 1, 5, None), (8, 1, "h", slot, 2, None)]
    )


def test_buffer_counts_each_distinct_pair_once_for_its_unique() -> None:
    buf = ShardBuffer()
    slot = slot_of(NOW)
    unique = (31, 7)
    for pair in (100, 100, 101, 102, 102, 102):
        buf.add(30, pair, "h", slot, 1, unique)
    buf.add(30, 100, "h", slot + 1, 1, unique)  # a new bucket of the same day
    out = Buckets()
    buf.contribution(unique, out)
    w = Window("10m", "10m", 1)
    assert window_sum(out, w, slot * SLOT)["ham"] == 3
    assert window_sum(out, parse_window("1h"), (slot + 1) * SLOT)["ham"] == 4
    assert window_sum(out, parse_window("1d"), (slot + 1) * SLOT)["ham"] >= 3
    assert window_sum(out, parse_window("2d"), (slot + 1) * SLOT)["ham"] == 3  # distinct per day


def test_a_cached_value_handed_to_a_reader_is_never_changed_by_a_flush() -> None:
    """A query reads a cached value outside the counters' lock while the flusher adds a batch to
    the cache under it: the reader's value must stay as it was (a slot added to the dict it
    iterates raised "dictionary changed size during iteration"); the cache has the new value."""
    cache = ReadCache(size=10, ttl=60)
    sp = span([parse_window("24h")], 1_700_000_000)
    value = Buckets()
    value.add_slot("h", sp.slot_to, 2)
    cache.put((8, 1), value, sp, at=0.0)
    handed = cache.get((8, 1), sp, now=1.0)
    assert handed is not None
    before = (dict(handed.slots), dict(handed.days))
    cache.written([(8, 1, "s", sp.slot_to, 3, None), (8, 1, "h", sp.slot_to, 1, None)])
    assert (handed.slots, handed.days) == before
    now = cache.get((8, 1), sp, now=1.0)
    assert now is not None and now.slots == {("h", sp.slot_to): 3, ("s", sp.slot_to): 3}
