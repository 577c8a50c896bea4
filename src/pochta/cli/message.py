"""``pochta message``: list, get, delete a user's letters."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.errors import UserNotFound
from pochta.mailbox.service import Mailbox
from pochta.types import StoredLetter, User

app = typer.Typer(help="A user's letters: list, get, delete.", no_args_is_help=True)

UserOpt = Annotated[str, typer.Option("--user", help="the user's e-mail address")]


def find_user(mailbox: Mailbox, email: str) -> User:
    user = mailbox.user(email)
    if user is None:
        raise UserNotFound(f"no user {email}")
    return user


def letter_dict(m: StoredLetter) -> dict[str, Any]:
    return {
        "id": m.id,
        "folder": m.folder,
        "size": m.size,
        "received": m.received,
        "date": m.date,
        "from": m.sender,
        "subject": m.subject,
        "seen": m.seen,
        "flagged": m.flagged,
        "verdict": m.verdict,
    }


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")


@app.command("list")
@handles_errors
def list_(
    user: UserOpt,
    folder: Annotated[str, typer.Option(help="folder name")] = "Inbox",
    limit: Annotated[int, typer.Option(min=1, help="at most this many, newest first")] = 50,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """List the letters of a folder, newest first."""
    with opened(data, config) as pochta:
        owner = find_user(pochta.mailbox, user)
        letters = pochta.mailbox.letters(owner.id, folder, limit)

    def human() -> None:
        for m in letters:
            mark = " " if m.seen else "*"
            out.print(
                f"{m.id:>8} {mark} {_when(m.date or m.received)}  {m.sender[:30]:<30}  "
                f"{m.subject[:60]}",
                markup=False,
            )
        out.print(f"{len(letters)} letter(s) in {folder}")

    emit(json_output, [letter_dict(m) for m in letters], human)


@app.command()
@handles_errors
def get(
    message_id: Annotated[int, typer.Argument(help="the letter's id", show_default=False)],
    user: UserOpt,
    raw: Annotated[bool, typer.Option("--raw", help="the letter byte for byte")] = False,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="write here (default: stdout)")
    ] = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Show a letter (headers, text, attachments), or with --raw its exact bytes."""
    with opened(data, config) as pochta:
        owner = find_user(pochta.mailbox, user)
        if raw:
            content = pochta.mailbox.raw(owner.id, message_id)
            if output is not None:
                output.write_bytes(content)
            else:
                sys.stdout.buffer.write(content)
                sys.stdout.flush()
            return
        letter, summary = pochta.mailbox.message(owner.id, message_id)
    payload = {
        **letter_dict(letter),
        "to": list(summary.to),
        "text": summary.body_text,
        "attachments": [
            {"n": a.n, "filename": a.filename, "content_type": a.content_type, "size": a.size}
            for a in summary.attachments
        ],
    }

    def human() -> None:
        out.print(f"From:    {letter.sender}", markup=False)
        out.print(f"To:      {', '.join(summary.to)}", markup=False)
        out.print(f"Subject: {letter.subject}", markup=False)
        out.print(f"Date:    {_when(letter.date)}   folder {letter.folder}")
        for a in summary.attachments:
            out.print(f"  [{a.n}] {a.filename or '-'} ({a.content_type}, {a.size} bytes)")
        out.print()
        out.print(summary.body_text or "(no text part)", markup=False)

    emit(json_output, payload, human)


@app.command()
@handles_errors
def delete(
    message_id: Annotated[int, typer.Argument(help="the letter's id", show_default=False)],
    user: UserOpt,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Delete a letter and release its attachments (the deletion is recorded first)."""
    with opened(data, config) as pochta:
        owner = find_user(pochta.mailbox, user)
        pochta.mailbox.delete(owner.id, message_id)
        finished = pochta.mailbox.process_deletions()
    emit(
        json_output,
        {"id": message_id, "deleted": True, "deletions_finished": finished},
        lambda: out.print(f"letter {message_id} deleted"),
    )
