"""Versioned schema migrations: the numbered SQL files shipped in ``migrations/``.

``NNNN_name.sql`` is version NNNN. ``pochta.schema_version`` holds one row per applied
version. ``upgrade`` applies the missing versions in order, each in its own transaction
(PostgreSQL's DDL is transactional: a failing file leaves nothing behind), all under one
advisory lock so that two processes starting at once never apply a file twice. A database
whose newest version is above what this pochta ships was upgraded by a newer pochta:
``check`` and ``upgrade`` refuse it rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from pochta.errors import ConfigError
from pochta.postgres.database import Postgres

LOCK = 0x706F6368_74610001  # pg_advisory_xact_lock number of the migrations ("pochta" + 1)

BOOTSTRAP = """
CREATE SCHEMA IF NOT EXISTS pochta;
CREATE TABLE IF NOT EXISTS pochta.schema_version (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
"""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def shipped() -> list[Migration]:
    """The migrations in this package, by version (versions are 1, 2, ... without gaps)."""
    found = []
    for entry in resources.files("pochta.postgres.migrations").iterdir():
        number, _, rest = entry.name.partition("_")
        if len(number) == 4 and number.isdigit() and rest.endswith(".sql"):
            name = rest.removesuffix(".sql")
            found.append(Migration(int(number), name, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda x: x.version)
    if [x.version for x in found] != list(range(1, len(found) + 1)):
        raise AssertionError(f"migrations are not numbered 1..N: {[x.version for x in found]}")
    return found


def head() -> int:
    """The schema version this pochta expects."""
    return len(shipped())


def _applied(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT to_regclass('pochta.schema_version') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return 0
    got = conn.execute("SELECT coalesce(max(version), 0) FROM pochta.schema_version").fetchone()
    return int(got[0]) if got else 0


def current(db: Postgres) -> int:
    """The database's schema version (0: never migrated)."""
    with db.connection() as conn:
        return _applied(conn)


def _too_new(db: Postgres, version: int) -> ConfigError:
    return ConfigError(
        f"{db.where}: the database's schema is at version {version}, newer than this pochta"
        f" knows (version {head()}): it was upgraded by a newer pochta; run that version"
        " (downgrading a schema is not supported)"
    )


def check(db: Postgres) -> int:
    """Refuse a database that is not at this pochta's version: older (``pochta db upgrade``
    brings it up) or newer. Returns the version."""
    version = current(db)
    if version > head():
        raise _too_new(db, version)
    if version < head():
        raise ConfigError(
            f"{db.where}: the database's schema is at version {version}, this pochta needs"
            f" version {head()}: run `pochta db upgrade` (or set postgres.migrate_on_start)"
        )
    return version


def upgrade(db: Postgres) -> list[Migration]:
    """Apply the missing migrations in order; return those applied (none when up to date).
    ConfigError for a database newer than this pochta."""
    done: list[Migration] = []
    for migration in shipped():
        # no time limit, on the server or here: an index on a big table takes what it takes
        with db.connection(deadline=False) as conn, conn.transaction():
            conn.execute("SET LOCAL statement_timeout = 0")
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK,))
            conn.execute(BOOTSTRAP)
            version = _applied(conn)
            if version > head():
                raise _too_new(db, version)
            if migration.version <= version:
                continue
            conn.execute(migration.sql.encode())  # a script: no parameters
            conn.execute(
                "INSERT INTO pochta.schema_version (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
        done.append(migration)
    if not done:  # nothing to apply: still refuse a newer database
        check(db)
    return done
