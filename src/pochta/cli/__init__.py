"""The ``pochta`` command."""

from __future__ import annotations

import typer

from pochta.cli import blob, pairs, serve

app = typer.Typer(
    help="pochta: the storage and protection core of a mail service.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("serve")(serve.serve)
app.add_typer(blob.app, name="blob")
app.add_typer(pairs.app, name="pairs")


def main() -> None:
    app()
