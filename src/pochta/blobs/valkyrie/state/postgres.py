"""Valkyrie's position and totals in PostgreSQL (table ``pochta.valkyrie_disks``, migration
0004): a scrubber that moves to another machine resumes where the last one stopped, and
``pochta stats`` on any loader sees every disk's totals."""

from __future__ import annotations

from typing import Any

from pochta.blobs.valkyrie.report import COUNT_NAMES, Counts
from pochta.blobs.valkyrie.state import summarize
from pochta.postgres.database import Postgres

_SETS = ", ".join(f"{n} = d.{n} + excluded.{n}" for n in COUNT_NAMES)
_SAVE = f"""
INSERT INTO pochta.valkyrie_disks AS d (disk, position, passes, last_pass, {", ".join(COUNT_NAMES)})
VALUES (%s, %s, %s, %s, {", ".join(["%s"] * len(COUNT_NAMES))})
ON CONFLICT (disk) DO UPDATE SET
    position = excluded.position,
    passes = d.passes + excluded.passes,
    last_pass = coalesce(excluded.last_pass, d.last_pass),
    {_SETS}
"""  # noqa: S608 - column names from COUNT_NAMES, values as parameters


class PostgresValkyrieState:
    def __init__(self, db: Postgres) -> None:
        """``db`` is this state's: it closes it (``db.share()`` to keep using it)."""
        self._db = db

    def position(self, disk: str) -> str:
        rows = self._db.query("SELECT position FROM pochta.valkyrie_disks WHERE disk = %s", (disk,))
        return str(rows[0][0]) if rows else ""

    def save(self, disk: str, position: str, delta: Counts, *, finished_at: float | None) -> None:
        """Store the position (``""`` after a finished pass) and add ``delta`` to the totals:
        one statement."""
        counts = delta.as_dict()
        passes = 0 if finished_at is None else 1
        self._db.execute(
            _SAVE, (disk, position, passes, finished_at, *(counts[n] for n in COUNT_NAMES))
        )

    def summary(self) -> dict[str, Any]:
        rows = self._db.query(
            f"SELECT disk, position, passes, last_pass, {', '.join(COUNT_NAMES)}"  # noqa: S608
            " FROM pochta.valkyrie_disks ORDER BY disk"
        )
        return summarize([tuple(int(v) if isinstance(v, int) else v for v in r) for r in rows])

    def close(self) -> None:
        self._db.close()
