"""The PairDB contract: every backend of ``PAIRDB_KINDS`` (conftest.py), one suite."""

from __future__ import annotations

import pytest

from pochta.errors import InvalidInput, PairNotFound
from pochta.types import DiskSpec, Pair, PairDB, PairFlag

A = DiskSpec("local", "/srv/disks/a")
B = DiskSpec("local", "/srv/disks/b")
C = DiskSpec("http://node3:8080", "disk0")
D = DiskSpec("http://node4:8080", "disk0")


def test_add_then_get(pairdb: PairDB) -> None:
    pair = pairdb.add((A, B), (1000, 2000))
    assert pair.disks == (A, B)
    assert pair.flags is PairFlag.NONE
    assert pair.free == (1000, 2000)
    assert pair.id > 0
    assert pairdb.get(pair.id) == pair


def test_list_holds_every_pair_in_id_order(pairdb: PairDB) -> None:
    assert pairdb.list() == []
    first = pairdb.add((A, B), (1, 2))
    second = pairdb.add((C, D), (3, 4))
    assert first.id != second.id
    assert pairdb.list() == sorted([first, second], key=lambda p: p.id)


def test_webdav_disks_round_trip(pairdb: PairDB) -> None:
    pair = pairdb.add((C, D), (0, 0))
    assert pairdb.get(pair.id).disks == (C, D)
    assert [str(d) for d in pairdb.get(pair.id).disks] == [
        "http://node3:8080/disk0",
        "http://node4:8080/disk0",
    ]


@pytest.mark.parametrize("flags", [PairFlag(v) for v in range(8)])
def test_flags_round_trip(pairdb: PairDB, flags: PairFlag) -> None:
    pair = pairdb.add((A, B), (10, 20))
    updated = pairdb.set_flags(pair.id, flags)
    assert updated == Pair(pair.id, (A, B), flags, (10, 20))
    assert pairdb.get(pair.id).flags == flags
    assert pairdb.get(pair.id).flags.writable is (flags == PairFlag.NONE)


def test_set_flags_touches_only_that_pair(pairdb: PairDB) -> None:
    first = pairdb.add((A, B), (1, 2))
    second = pairdb.add((C, D), (3, 4))
    pairdb.set_flags(first.id, PairFlag.SERVICE)
    assert pairdb.get(second.id) == second
    pairdb.set_flags(first.id, PairFlag.NONE)
    assert pairdb.get(first.id) == first


def test_set_free(pairdb: PairDB) -> None:
    first = pairdb.add((A, B), (1, 2))
    second = pairdb.add((C, D), (3, 4))
    pairdb.set_flags(first.id, PairFlag.LOCKED)
    pairdb.set_free(first.id, (2**40, 0))
    assert pairdb.get(first.id) == Pair(first.id, (A, B), PairFlag.LOCKED, (2**40, 0))
    assert pairdb.get(second.id) == second


def test_unknown_pair(pairdb: PairDB) -> None:
    pair = pairdb.add((A, B), (1, 2))
    missing = pair.id + 1000
    with pytest.raises(PairNotFound):
        pairdb.get(missing)
    with pytest.raises(PairNotFound):
        pairdb.set_flags(missing, PairFlag.READONLY)
    with pytest.raises(PairNotFound):
        pairdb.set_free(missing, (5, 5))
    assert pairdb.list() == [pair]


def test_a_pair_is_two_different_disks(pairdb: PairDB) -> None:
    with pytest.raises(InvalidInput):
        pairdb.add((A, A), (1, 1))
    assert pairdb.list() == []


def test_a_disk_belongs_to_one_pair(pairdb: PairDB) -> None:
    pair = pairdb.add((A, B), (1, 2))
    with pytest.raises(InvalidInput):
        pairdb.add((C, B), (1, 1))
    with pytest.raises(InvalidInput):
        pairdb.add((A, D), (1, 1))
    assert pairdb.list() == [pair]
    # the same root on another node is another disk
    other = pairdb.add((DiskSpec("http://node5", A.root), D), (1, 1))
    assert pairdb.get(other.id).disks[0].node == "http://node5"


def test_remove_forgets_a_pair(pairdb: PairDB) -> None:
    first = pairdb.add((A, B), (1, 2))
    second = pairdb.add((C, D), (3, 4))
    pairdb.remove(first.id)
    assert pairdb.list() == [second]
    with pytest.raises(PairNotFound):
        pairdb.get(first.id)
    with pytest.raises(PairNotFound):
        pairdb.remove(first.id)
    again = pairdb.add((A, B), (5, 6))  # its disks are free again
    assert again.disks == (A, B)
