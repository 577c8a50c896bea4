"""PairDB in PostgreSQL (table ``pochta.pairs``, migration 0002): shared by every loader.

``add`` checks that neither disk belongs to a pair already while it holds the table's
SHARE ROW EXCLUSIVE lock, so two operators adding pairs at once cannot both take a disk.
"""

from __future__ import annotations

from typing import Any

from pochta.blobs.pairs import check_distinct
from pochta.errors import PairNotFound
from pochta.postgres.database import Postgres
from pochta.types import DiskSpec, Pair, PairFlag

_COLUMNS = "id, node_a, root_a, node_b, root_b, flags, free_a, free_b"


def _pair(row: tuple[Any, ...]) -> Pair:
    return Pair(
        int(row[0]),
        (DiskSpec(row[1], row[2]), DiskSpec(row[3], row[4])),
        PairFlag(row[5]),
        (int(row[6]), int(row[7])),
    )


class PostgresPairDB:
    def __init__(self, db: Postgres) -> None:
        """``db`` is this PairDB's: it closes it (``db.share()`` to keep using it)."""
        self._db = db

    def add(self, disks: tuple[DiskSpec, DiskSpec], free: tuple[int, int]) -> Pair:
        def step(conn: Any) -> Pair:
            conn.execute("LOCK TABLE pochta.pairs IN SHARE ROW EXCLUSIVE MODE")
            rows = conn.execute(f"SELECT {_COLUMNS} FROM pochta.pairs").fetchall()  # noqa: S608
            check_distinct(disks, [_pair(r) for r in rows])
            row = conn.execute(
                "INSERT INTO pochta.pairs (node_a, root_a, node_b, root_b, free_a, free_b)"
                " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (disks[0].node, disks[0].root, disks[1].node, disks[1].root, *free),
            ).fetchone()
            return Pair(int(row[0]), disks, PairFlag.NONE, free)

        return self._db.transaction(step)

    def get(self, pair_id: int) -> Pair:
        rows = self._db.query(
            f"SELECT {_COLUMNS} FROM pochta.pairs WHERE id = %s",  # noqa: S608
            (pair_id,),
        )
        if not rows:
            raise PairNotFound(f"no pair {pair_id}")
        return _pair(rows[0])

    def list(self) -> list[Pair]:
        rows = self._db.query(f"SELECT {_COLUMNS} FROM pochta.pairs ORDER BY id")  # noqa: S608
        return [_pair(r) for r in rows]

    def set_flags(self, pair_id: int, flags: PairFlag) -> Pair:
        rows = self._db.query(
            f"UPDATE pochta.pairs SET flags = %s WHERE id = %s RETURNING {_COLUMNS}",  # noqa: S608
            (int(flags), pair_id),
        )
        if not rows:
            raise PairNotFound(f"no pair {pair_id}")
        return _pair(rows[0])

    def set_free(self, pair_id: int, free: tuple[int, int]) -> None:
        if not self._db.execute(
            "UPDATE pochta.pairs SET free_a = %s, free_b = %s WHERE id = %s", (*free, pair_id)
        ):
            raise PairNotFound(f"no pair {pair_id}")

    def remove(self, pair_id: int) -> None:
        if not self._db.execute("DELETE FROM pochta.pairs WHERE id = %s", (pair_id,)):
            raise PairNotFound(f"no pair {pair_id}")

    def close(self) -> None:
        self._db.close()
