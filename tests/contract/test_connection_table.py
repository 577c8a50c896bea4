"""The connection-table contract (``pochta.types.ConnectionTable``): the in-memory table and
the memory-mapped slots shared by the processes of ``serve --workers`` pass the same suite.
Each "writer" stands for one process; reads sum every live writer's counts.

A new backend joins by adding a branch to ``writers``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pochta.guard.anvil.mapped import MappedConnectionTable
from pochta.guard.anvil.memory import MemoryConnections, MemoryConnectionTable
from pochta.types import ConnectionTable, ConnectionTally

KINDS = ["memory", "mapped"]
W = 1000  # a window


Writers = Callable[..., list[ConnectionTable]]


@pytest.fixture(params=KINDS)
def writers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Writers]:
    opened: list[ConnectionTable] = []
    shared = MemoryConnections()

    def make(n: int = 1, capacity: int | None = None) -> list[ConnectionTable]:
        tables: list[ConnectionTable] = []
        for _ in range(n):
            if request.param == "memory":
                tables.append(MemoryConnectionTable(shared, capacity=capacity))
            else:
                tables.append(
                    MappedConnectionTable(
                        tmp_path / "connections", capacity=capacity or 1024, refresh=0.0
                    )
                )
        opened.extend(tables)
        return tables

    yield make
    for table in opened:
        table.close()


def test_an_unknown_key_counts_nothing(writers: Writers) -> None:
    (t,) = writers()
    assert t.read(12345, W) == ConnectionTally(0, 0, 0)
    assert t.read(12345, W, total=True) == ConnectionTally(0, 0, 0)


def test_connections_and_attempts_add_up(writers: Writers) -> None:
    (t,) = writers()
    assert t.add(7, W, connections=1, attempts=1)
    assert t.add(7, W, connections=1, attempts=1)
    assert t.add(7, W, attempts=3)
    assert t.read(7, W) == ConnectionTally(2, 5, 0)
    assert t.add(7, W, connections=-1)
    assert t.read(7, W) == ConnectionTally(1, 5, 0)
    assert t.read(8, W) == ConnectionTally()  # another key


def test_attempts_move_back_a_window_then_go_while_connections_stay(writers: Writers) -> None:
    (t,) = writers()
    t.add(7, W, connections=2, attempts=4)
    assert t.read(7, W + 1) == ConnectionTally(2, 0, 4)
    t.add(7, W + 1, attempts=1)
    assert t.read(7, W + 1) == ConnectionTally(2, 1, 4)
    assert t.read(7, W + 2) == ConnectionTally(2, 0, 1)
    assert t.read(7, W + 5) == ConnectionTally(2, 0, 0)
    t.add(7, W + 5, connections=-2)
    assert t.read(7, W + 5) == ConnectionTally(0, 0, 0)


def test_reads_sum_every_writer(writers: Writers) -> None:
    a, b, c = writers(3)
    a.add(7, W, connections=1, attempts=1)
    b.add(7, W, connections=2, attempts=2)
    c.add(7, W - 1, attempts=5)
    c.add(9, W, connections=1, total=True)
    for t in (a, b, c):
        assert t.read(7, W) == ConnectionTally(3, 3, 5)
        assert t.read(9, W, total=True) == ConnectionTally(1, 0, 0)
    b.add(7, W, connections=-2)  # each writer takes back only its own
    assert a.read(7, W) == ConnectionTally(1, 3, 5)


def test_a_closed_writer_counts_no_more(writers: Writers) -> None:
    a, b = writers(2)
    a.add(7, W, connections=1, attempts=1)
    b.add(7, W, connections=3, attempts=3)
    assert a.read(7, W).connections == 4
    b.close()
    assert a.read(7, W) == ConnectionTally(1, 1, 0)


def test_totals_always_find_room_and_addresses_take_back_what_counts_nothing(
    writers: Writers,
) -> None:
    (t,) = writers(capacity=8)
    for key in range(1, 9):
        assert t.add(key * 7919, W, connections=1)
    assert not t.add(99991, W, connections=1, attempts=1)  # no room: nothing counted
    assert t.read(99991, W) == ConnectionTally()
    assert t.add(424242, W, connections=1, total=True)  # a total: its own room
    assert t.read(424242, W, total=True) == ConnectionTally(1, 0, 0)
    t.add(7919, W, connections=-1)  # closed, but its attempt window is not over
    assert not t.add(99991, W + 1, connections=1)
    assert t.add(99991, W + 2, connections=1)  # now it counts nothing: its room is taken
    assert t.read(99991, W + 2) == ConnectionTally(1, 0, 0)
    assert t.read(7919, W + 2) == ConnectionTally()
    assert t.read(2 * 7919, W + 2) == ConnectionTally(1, 0, 0)  # the others are kept
