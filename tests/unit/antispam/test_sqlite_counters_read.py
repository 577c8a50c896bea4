"""The SQLite counter store reads a letter's shingles in one statement per table (issue 29,
item 3): ``day IN (...) AND hash IN (...)``, the rows of types not asked for left out. The
buckets are those the statements per shingle gave (``day IN (...) AND hash = ? AND
type = ?``), compared on generated counters: one value under several types (one hash), a
shingle asked twice, unknown shingles, spans of every width, and more hashes than one
statement takes."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pochta.antispam.shingles.counters import Ref
from pochta.antispam.shingles.counters import sqlite as sqlite_mod
from pochta.antispam.shingles.counters.buckets import (
    SLOTS_PER_DAY,
    Buckets,
    Span,
    parse_window,
    slot_of,
    span,
)
from pochta.antispam.shingles.counters.sqlite import SQLiteStore, signed

NOW = 1_730_000_000.0
HASHES = [1, 2**63 + 5, 2**64 - 1, 12345, 2**40]  # signed and unsigned halves
TYPES = [14, 17, 31]


def read_one_by_one(store: SQLiteStore, refs: Sequence[Ref], sp: Span) -> list[Buckets]:
    """What ``read`` was: two statements per shingle."""
    out = []
    slot_days, days = list(sp.slot_days), list(sp.days)
    day_sql = (
        "SELECT day, kind, n FROM shingle_day"
        f" WHERE day IN ({','.join('?' * len(days))}) AND hash = ? AND type = ?"
    )
    slot_sql = (
        "SELECT day, kind, slot, n FROM shingle_slot"
        f" WHERE day IN ({','.join('?' * len(slot_days))}) AND hash = ? AND type = ?"
    )
    conn: sqlite3.Connection = store.db.reader()
    for ref in refs:
        b = Buckets()
        h = signed(ref.hash)
        if days:
            for day, code, n in conn.execute(day_sql, (*days, h, ref.type)):
                b.days[(code, day)] = n
        if slot_days:
            for day, code, offset, n in conn.execute(slot_sql, (*slot_days, h, ref.type)):
                slot = day * SLOTS_PER_DAY + offset
                if sp.slot_from <= slot <= sp.slot_to:
                    b.slots[(code, slot)] = n
        out.append(b)
    return out


cells = st.lists(
    st.tuples(
        st.sampled_from(HASHES),
        st.sampled_from(TYPES),
        st.sampled_from(["h", "s", "c"]),
        st.integers(-16 * SLOTS_PER_DAY, 0),  # slots before NOW's
        st.integers(1, 4),
    ),
    max_size=40,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    written=cells,
    asked=st.lists(st.tuples(st.sampled_from([*HASHES, 99]), st.sampled_from(TYPES)), max_size=12),
    window=st.sampled_from(["10m", "1h", "24h", "2d", "14d"]),
    chunk=st.sampled_from([1, 2, 500]),
)
def test_one_statement_reads_what_one_per_shingle_read(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    written: list[tuple[int, int, str, int, int]],
    asked: list[tuple[int, int]],
    window: str,
    chunk: int,
) -> None:
    monkeypatch.setattr(sqlite_mod, "READ_CHUNK", chunk)
    path = tmp_path / f"c{len(list(tmp_path.iterdir()))}.sqlite3"
    store = SQLiteStore(path)
    try:
        slot = slot_of(NOW)
        cells_ = [(t, h, code, slot + back, n, None) for h, t, code, back, n in written]
        assert store.apply([(0, cells_)]) == [None]
        refs = [Ref(t, h) for h, t in asked]
        windows = [parse_window(window), parse_window("14d")]
        for sp in (span(windows, NOW), span([parse_window(window)], NOW)):
            assert store.read(refs, sp) == read_one_by_one(store, refs, sp)
    finally:
        store.close()


def test_one_value_under_two_types_and_a_shingle_asked_twice(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "c.sqlite3")
    try:
        slot = slot_of(NOW)
        h = 2**63 + 7  # read back through its signed form
        cells_ = [(14, h, "s", slot, 2, None), (17, h, "h", slot - 200, 1, None)]
        assert store.apply([(0, cells_)]) == [None]
        sp = span([parse_window("1h"), parse_window("14d")], NOW)
        refs = [Ref(14, h), Ref(17, h), Ref(14, h), Ref(31, h), Ref(14, 5)]
        got = store.read(refs, sp)
        assert got == read_one_by_one(store, refs, sp)
        assert got[0].slots == {("s", slot): 2} and got[0].days == {("s", slot // 144): 2}
        assert got[1].slots == {} and got[1].days == {("h", (slot - 200) // 144): 1}
        assert got[2] == got[0] and got[2] is not got[0] and got[2].slots is not got[0].slots
        assert not got[3] and not got[4]
    finally:
        store.close()
