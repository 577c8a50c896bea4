"""``pochta db``: the PostgreSQL schema: its version, and upgrading it."""

from __future__ import annotations

import typer
from pydantic import SecretStr

from pochta.app import postgres_pool
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, out, settings
from pochta.config import Settings
from pochta.errors import ConfigError

app = typer.Typer(help="The PostgreSQL database: schema version, upgrade.", no_args_is_help=True)


def _databases(conf: Settings) -> list[tuple[str, SecretStr | None]]:
    """The main database and FileDB's shards (``postgres.filedb_shards``), by role."""
    return [("main", None)] + [
        (f"filedb shard {i}", dsn) for i, dsn in enumerate(conf.postgres.filedb_shards)
    ]


@app.command()
@handles_errors
def upgrade(data: DataOpt = None, config: ConfigOpt = None, json_output: JsonOpt = False) -> None:
    """Apply the schema migrations the PostgreSQL database lacks, in order, each in one
    transaction; safe to run from several machines at once. Refuses (exit 6) a database
    upgraded by a newer pochta. FileDB's shards (``postgres.filedb_shards``) are upgraded too,
    after the main database."""
    from pochta.postgres import migrate  # psycopg only for the commands that need it

    conf = settings(data, config)
    done: list[dict[str, object]] = []
    lines: list[str] = []
    for role, dsn in _databases(conf):
        pg = postgres_pool(conf, dsn)
        try:
            before = migrate.current(pg)
            applied = migrate.upgrade(pg)
            where = pg.where
        finally:
            pg.close()
        done.append(
            {
                "database": where,
                "role": role,
                "from": before,
                "to": migrate.head(),
                "applied": [{"version": m.version, "name": m.name} for m in applied],
            }
        )
        lines += [f"applied {m.version:04d}_{m.name}" for m in applied]
        lines.append(
            f"{where}: schema at version {migrate.head()}"
            + ("" if applied else " (already up to date)")
            + ("" if role == "main" else f" ({role})")
        )
    emit(
        json_output,
        {**done[0], "shards": done[1:]},
        lambda: out.print("\n".join(lines)),
    )


@app.command()
@handles_errors
def status(data: DataOpt = None, config: ConfigOpt = None, json_output: JsonOpt = False) -> None:
    """The database's schema version (and each FileDB shard's) and this pochta's. Exit 6 when
    one differs."""
    from pochta.postgres import migrate

    conf = settings(data, config)
    seen: list[dict[str, object]] = []
    behind: ConfigError | None = None  # the first database not at this pochta's version
    for role, dsn in _databases(conf):
        pg = postgres_pool(conf, dsn)
        try:
            seen.append(
                {
                    "database": pg.where,
                    "role": role,
                    "version": migrate.current(pg),
                    "expected": migrate.head(),
                }
            )
            try:
                migrate.check(pg)
            except ConfigError as exc:
                behind = behind or exc
        finally:
            pg.close()
    emit(
        json_output,
        {**seen[0], "shards": seen[1:]},
        lambda: out.print(
            "\n".join(
                f"{row['database']}: schema at version {row['version']}, this pochta expects"
                f" {row['expected']}" + ("" if row["role"] == "main" else f" ({row['role']})")
                for row in seen
            )
        ),
    )
    if behind is not None:
        raise behind
