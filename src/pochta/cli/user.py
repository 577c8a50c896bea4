"""``pochta user``: add, list, passwd, admin, delete."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.cli.words import forget_twice
from pochta.errors import InvalidInput

app = typer.Typer(help="Mailbox users: add, list, passwd, admin, delete.", no_args_is_help=True)

PasswordStdin = Annotated[
    bool,
    typer.Option("--password-stdin", help="read the password from the first line of stdin"),
]


def read_password(from_stdin: bool) -> str:
    if from_stdin:
        line = sys.stdin.readline()
        if not line:
            raise InvalidInput("no password on stdin")
        return line.rstrip("\r\n")
    if not sys.stdin.isatty():
        raise InvalidInput("no terminal to ask for a password on: use --password-stdin")
    password: str = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    return password


@app.command()
@handles_errors
def add(
    email: Annotated[str, typer.Argument(help="the user's e-mail address", show_default=False)],
    password_stdin: PasswordStdin = False,
    admin: Annotated[
        bool, typer.Option("--admin", help="may open the admin pages (/admin)")
    ] = False,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Create a user (with folders Inbox and Spam); the password is hashed with argon2id."""
    with opened(data, config) as pochta:  # a missing data directory is said before the prompt
        user = pochta.mailbox.add_user(email, read_password(password_stdin), admin=admin)
    role = " as an admin" * user.admin
    emit(
        json_output,
        {"id": user.id, "email": user.email, "admin": user.admin},
        lambda: out.print(f"user {user.email} added{role} (id {user.id})"),
    )


@app.command("list")
@handles_errors
def list_(data: DataOpt = None, config: ConfigOpt = None, json_output: JsonOpt = False) -> None:
    """List users."""
    with opened(data, config) as pochta:
        users = pochta.mailbox.list_users()
    payload = [
        {"id": u.id, "email": u.email, "reset_required": u.reset_required, "admin": u.admin}
        for u in users
    ]

    def human() -> None:
        for u in users:
            out.print(
                f"{u.id:>6}  {u.email}"
                + ("  (admin)" * u.admin)
                + ("  (password reset required)" * u.reset_required)
            )
        out.print(f"{len(users)} user(s)")

    emit(json_output, payload, human)


@app.command()
@handles_errors
def passwd(
    email: Annotated[str, typer.Argument(help="the user's e-mail address", show_default=False)],
    password_stdin: PasswordStdin = False,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Set a user's password (this also clears a reset required after a leak)."""
    with opened(data, config) as pochta:
        pochta.mailbox.set_password(email, read_password(password_stdin))
    emit(json_output, {"email": email}, lambda: out.print(f"password of {email} changed"))


@app.command()
@handles_errors
def admin(
    email: Annotated[str, typer.Argument(help="the user's e-mail address", show_default=False)],
    revoke: Annotated[
        bool, typer.Option("--revoke", help="take the admin role away instead")
    ] = False,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Grant a user the admin role (the admin pages at /admin), or with --revoke take it
    away; an unknown user is exit 2."""
    with opened(data, config) as pochta:
        user = pochta.mailbox.set_admin(email, not revoke)
    emit(
        json_output,
        {"id": user.id, "email": user.email, "admin": user.admin},
        lambda: out.print(
            f"{user.email} is {'now an admin' if user.admin else 'no longer an admin'}"
        ),
    )


@app.command()
@handles_errors
def delete(
    email: Annotated[str, typer.Argument(help="the user's e-mail address", show_default=False)],
    no_wait: Annotated[
        bool,
        typer.Option("--no-wait", help="do not wait for a running server's learned words"),
    ] = False,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Delete an account and everything of it: its letters (through the deletion job, as
    any deletion), its learned words, sessions and folders, then the account. Safe to run
    again after a crash; an unknown address is exit 3."""
    with opened(data, config) as pochta:
        user, marked = pochta.mailbox.delete_user(email)
        finished = 0
        while n := pochta.mailbox.process_deletions():  # 0: a running server's job does it
            finished += n
        if pochta.scanner.words is not None:
            forget_twice(pochta.scanner.words, user.id, wait=not no_wait)
    left = marked - finished
    emit(
        json_output,
        {"id": user.id, "email": user.email, "letters": marked, "letters_left": max(0, left)},
        lambda: out.print(
            f"user {user.email} deleted: {marked} letter(s)"
            + (f", {left} left to the running server's deletion job" if left > 0 else "")
        ),
    )
