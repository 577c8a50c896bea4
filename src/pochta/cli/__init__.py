"""The ``pochta`` command."""

from __future__ import annotations

import typer

from pochta.cli import (
    antispam,
    backup,
    blob,
    db,
    guard,
    init,
    leaks,
    lists,
    mail,
    message,
    model,
    pairs,
    queue,
    serve,
    shingles,
    tls,
    user,
    valkyrie,
    words,
)

app = typer.Typer(
    help="pochta: the storage and protection core of a mail service.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("init")(init.init)
app.command("serve")(serve.serve)
app.add_typer(blob.app, name="blob")
app.add_typer(pairs.app, name="pairs")
app.add_typer(user.app, name="user")
app.add_typer(lists.app, name="lists")
app.add_typer(message.app, name="message")
app.add_typer(leaks.app, name="leaks")
app.add_typer(guard.app, name="guard")
app.add_typer(shingles.app, name="shingles")
app.add_typer(valkyrie.app, name="valkyrie")
app.add_typer(db.app, name="db")
app.add_typer(backup.app, name="backup")
app.add_typer(queue.app, name="queue")
app.add_typer(tls.app, name="tls")
app.add_typer(model.app, name="model")
app.add_typer(words.app, name="words")
app.command("scan")(antispam.scan)
app.command("import")(mail.import_)
app.command("fsck")(mail.fsck)
app.command("stats")(mail.stats)


def main() -> None:
    app()
