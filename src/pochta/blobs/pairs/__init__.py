"""PairDB (``pochta.types.PairDB``: pair id -> two disks, flags, free bytes), one file per
engine as every port's:

    memory.py     MemoryPairDB: the fake, for tests
    sqlite.py     SQLitePairDB: the embedded default (``<data_dir>/pairdb.sqlite3``)
    postgres.py   PostgresPairDB: shared by every loader

and here what they share: the check that a new pair is two disks no pair uses yet.
"""

from __future__ import annotations

from pochta.errors import InvalidInput
from pochta.types import DiskSpec, Pair


def check_distinct(disks: tuple[DiskSpec, DiskSpec], existing: list[Pair]) -> None:
    """A pair is two different disks, neither already in use by another pair."""
    if disks[0] == disks[1]:
        raise InvalidInput(f"both disks of a pair are {disks[0]}: a pair needs two disks")
    used = {d: p.id for p in existing for d in p.disks}
    for disk in disks:
        if disk in used:
            raise InvalidInput(f"disk {disk} already belongs to pair {used[disk]}")
