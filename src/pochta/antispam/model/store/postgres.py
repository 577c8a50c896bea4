"""ModelStore in PostgreSQL (tables ``pochta.model_versions``, ``model_files``,
``model_promotions``; migration 0007): the versions and the live pointer shared by every
machine, so that all loaders switch together (:mod:`pochta.antispam.model.store`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pochta.antispam.model.store import MAX_VERSIONS, check_files, check_version
from pochta.errors import InvalidInput, NotFound
from pochta.postgres.database import Postgres


class PostgresModelStore:
    def __init__(self, db: Postgres) -> None:
        """``db`` is this store's: it closes it (``db.share()`` to keep using it)."""
        self._db = db

    def put(self, version: str, files: Mapping[str, bytes], created: float) -> None:
        check_version(version)
        check_files(files)

        def step(conn: Any) -> None:
            conn.execute("LOCK TABLE pochta.model_versions IN SHARE ROW EXCLUSIVE MODE")
            if conn.execute(
                "SELECT 1 FROM pochta.model_versions WHERE version = %s", (version,)
            ).fetchone():
                raise InvalidInput(f"model version {version} exists")
            (count,) = conn.execute("SELECT count(*) FROM pochta.model_versions").fetchone()
            if count >= MAX_VERSIONS:
                raise InvalidInput(f"{MAX_VERSIONS} model versions kept: remove old ones")
            conn.execute(
                "INSERT INTO pochta.model_versions (version, created) VALUES (%s, %s)",
                (version, created),
            )
            for name, body in files.items():
                conn.execute(
                    "INSERT INTO pochta.model_files (version, name, body) VALUES (%s, %s, %s)",
                    (version, name, body),
                )

        self._db.transaction(step)

    def files(self, version: str) -> dict[str, bytes]:
        rows = self._db.query(
            "SELECT name, body FROM pochta.model_files WHERE version = %s", (version,)
        )
        if not rows:
            raise NotFound(f"no model version {version}")
        return {str(name): bytes(body) for name, body in rows}

    def versions(self) -> list[tuple[str, float]]:
        rows = self._db.query(
            "SELECT version, created FROM pochta.model_versions ORDER BY created, version"
        )
        return [(str(v), float(c)) for v, c in rows]

    def promotions(self) -> list[str]:
        rows = self._db.query("SELECT version FROM pochta.model_promotions ORDER BY seq")
        return [str(r[0]) for r in rows]

    def promote(self, version: str) -> None:
        def step(conn: Any) -> None:
            if not conn.execute(
                "SELECT 1 FROM pochta.model_versions WHERE version = %s", (version,)
            ).fetchone():
                raise NotFound(f"no model version {version}")
            conn.execute("INSERT INTO pochta.model_promotions (version) VALUES (%s)", (version,))

        self._db.transaction(step)

    def rollback(self) -> str | None:
        def step(conn: Any) -> str | None:
            conn.execute("LOCK TABLE pochta.model_promotions IN SHARE ROW EXCLUSIVE MODE")
            conn.execute(
                "DELETE FROM pochta.model_promotions"
                " WHERE seq = (SELECT max(seq) FROM pochta.model_promotions)"
            )
            row = conn.execute(
                "SELECT version FROM pochta.model_promotions ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            return None if row is None else str(row[0])

        return self._db.transaction(step)

    def close(self) -> None:
        self._db.close()
