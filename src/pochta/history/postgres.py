"""The history in PostgreSQL (migration 0009): one history for every loader of an
installation, so that the admin pages show the installation, not the loader that served them.

Each loader's recorder adds its own hour's events up and writes increments: ``add_tallies``
adds to the stored cell (``n = n + excluded.n``), never overwrites it, so two loaders' tallies
of one hour sum. Its rows are sorted before the upsert (every writer locks cells in the same
order: no deadlock between loaders). A storage sample is the shared store's size as one loader
saw it: one row per sample (a loader does not sample before the last one, whoever took it, is
``web.sample_seconds`` old, so the loaders take turns rather than each adding its own); the
pages draw them in time order and show the newest. Audits likewise: one row each, newest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pochta.postgres.database import Postgres
from pochta.types import AuditRecord, HistoryStore, StorageSample, Tally


def _text(s: str) -> str:
    """What PostgreSQL's text can hold: a NUL (a shingle's value may have one) becomes U+FFFD
    and a lone surrogate ``?``, rather than one odd name failing every tally of its batch."""
    return s.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


class PostgresHistory:
    def __init__(self, db: Postgres) -> None:
        """``db`` is this store's: it closes it (``db.share()`` to keep using it)."""
        self._db = db

    def add_sample(self, sample: StorageSample) -> None:
        self._db.execute(
            "INSERT INTO pochta.history_samples"
            " (at, letters, logical_bytes, stored_bytes, physical_bytes)"
            " VALUES (%s, %s, %s, %s, %s)",
            (
                sample.at,
                sample.letters,
                sample.logical_bytes,
                sample.stored_bytes,
                sample.physical_bytes,
            ),
        )

    def samples(self, since: float, limit: int = 10_000) -> list[StorageSample]:
        rows = self._db.query(
            "SELECT * FROM (SELECT at, letters, logical_bytes, stored_bytes, physical_bytes"
            " FROM pochta.history_samples WHERE at >= %s ORDER BY at DESC LIMIT %s) AS s"
            " ORDER BY at",
            (since, max(limit, 0)),
        )
        return [
            StorageSample(float(at), int(letters), int(logical), int(stored), int(physical))
            for at, letters, logical, stored, physical in rows
        ]

    def add_tallies(self, tallies: Sequence[Tally]) -> None:
        if not tallies:
            return
        cells: dict[tuple[str, int, str], int] = {}
        for t in tallies:  # one row per cell: an upsert may not touch a row twice
            key = (_text(t.series), t.hour, _text(t.name))
            cells[key] = cells.get(key, 0) + t.n
        rows = sorted(cells.items())

        def step(conn: Any) -> None:
            conn.execute(
                "INSERT INTO pochta.history_tallies AS t (series, hour, name, n)"
                " SELECT s, h, x, n FROM unnest(%s::text[], %s::bigint[], %s::text[],"
                " %s::bigint[]) AS u(s, h, x, n) ORDER BY s, h, x"
                " ON CONFLICT (series, hour, name) DO UPDATE SET n = t.n + excluded.n",
                (
                    [k[0] for k, _ in rows],
                    [k[1] for k, _ in rows],
                    [k[2] for k, _ in rows],
                    [n for _, n in rows],
                ),
            )

        self._db.transaction(step)

    def tallies(self, series: str, since_hour: int, limit: int = 10_000) -> list[Tally]:
        rows = self._db.query(
            "SELECT hour, name, n FROM pochta.history_tallies WHERE series = %s AND hour >= %s"
            ' ORDER BY hour, name COLLATE "C" LIMIT %s',
            (_text(series), since_hour, max(limit, 0)),
        )
        return [Tally(int(hour), series, str(name), int(n)) for hour, name, n in rows]

    def top(self, series: str, since_hour: int, n: int = 10) -> list[tuple[str, int]]:
        rows = self._db.query(
            "SELECT name, sum(n) AS total FROM pochta.history_tallies"
            " WHERE series = %s AND hour >= %s"
            ' GROUP BY name ORDER BY total DESC, name COLLATE "C" LIMIT %s',
            (_text(series), since_hour, max(n, 0)),
        )
        return [(str(name), int(total)) for name, total in rows]

    def add_audit(self, audit: AuditRecord) -> None:
        self._db.execute(
            "INSERT INTO pochta.history_audits"
            " (at, lines, malformed, unknown, wrong, valid, reset, seconds)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (
                audit.at,
                audit.lines,
                audit.malformed,
                audit.unknown,
                audit.wrong,
                audit.valid,
                audit.reset,
                audit.seconds,
            ),
        )

    def audits(self, limit: int = 20) -> list[AuditRecord]:
        rows = self._db.query(
            "SELECT at, lines, malformed, unknown, wrong, valid, reset, seconds"
            " FROM pochta.history_audits ORDER BY at DESC LIMIT %s",
            (max(limit, 0),),
        )
        return [
            AuditRecord(
                float(at),
                int(lines),
                int(malformed),
                int(unknown),
                int(wrong),
                int(valid),
                int(reset),
                float(seconds),
            )
            for at, lines, malformed, unknown, wrong, valid, reset, seconds in rows
        ]

    def prune(self, before: float) -> int:
        hour = int(before // 3600)

        def step(conn: Any) -> int:
            gone = conn.execute(
                "DELETE FROM pochta.history_samples WHERE at < %s", (before,)
            ).rowcount
            return int(gone) + int(
                conn.execute("DELETE FROM pochta.history_tallies WHERE hour < %s", (hour,)).rowcount
            )

        return self._db.transaction(step)

    def close(self) -> None:
        self._db.close()


def _check(store: PostgresHistory) -> HistoryStore:  # the Protocol, checked by mypy
    return store
