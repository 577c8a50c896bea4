"""``pochta db``: the PostgreSQL schema: its version, and upgrading it."""

from __future__ import annotations

import typer

from pochta.app import postgres_pool
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, out, settings

app = typer.Typer(help="The PostgreSQL database: schema version, upgrade.", no_args_is_help=True)


@app.command()
@handles_errors
def upgrade(data: DataOpt = None, config: ConfigOpt = None, json_output: JsonOpt = False) -> None:
    """Apply the schema migrations the PostgreSQL database lacks, in order, each in one
    transaction; safe to run from several machines at once. Refuses (exit 6) a database
    upgraded by a newer pochta."""
    from pochta.postgres import migrate  # psycopg only for the commands that need it

    pg = postgres_pool(settings(data, config))
    try:
        before = migrate.current(pg)
        applied = migrate.upgrade(pg)
        where = pg.where
    finally:
        pg.close()
    emit(
        json_output,
        {
            "database": where,
            "from": before,
            "to": migrate.head(),
            "applied": [{"version": m.version, "name": m.name} for m in applied],
        },
        lambda: out.print(
            "\n".join(f"applied {m.version:04d}_{m.name}" for m in applied)
            + ("\n" if applied else "")
            + f"{where}: schema at version {migrate.head()}"
            + ("" if applied else " (already up to date)")
        ),
    )


@app.command()
@handles_errors
def status(data: DataOpt = None, config: ConfigOpt = None, json_output: JsonOpt = False) -> None:
    """The database's schema version and this pochta's. Exit 6 when they differ."""
    from pochta.postgres import migrate

    pg = postgres_pool(settings(data, config))
    try:
        version = migrate.current(pg)
        where = pg.where
        emit(
            json_output,
            {"database": where, "version": version, "expected": migrate.head()},
            lambda: out.print(
                f"{where}: schema at version {version}, this pochta expects {migrate.head()}"
            ),
        )
        migrate.check(pg)
    finally:
        pg.close()
