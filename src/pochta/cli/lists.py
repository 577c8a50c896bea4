"""``pochta lists``: an account's sender list (allow / block), for the operator: show, add,
remove. The same service as the API and the webmail (the same validation and bounds)."""

from __future__ import annotations

from typing import Annotated

import typer

from pochta.app import Pochta
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.errors import ConfigError, UserNotFound
from pochta.mailbox.lists import SenderListService
from pochta.types import User

app = typer.Typer(
    help="An account's sender list: show, add, remove (allow: never spam; block: always spam).",
    no_args_is_help=True,
)

UserOpt = Annotated[
    str, typer.Option("--user", help="the account's e-mail address", show_default=False)
]
Value = Annotated[
    str,
    typer.Argument(
        help="an address (bob@shop.example) or a domain (shop.example, with its subdomains)",
        show_default=False,
    ),
]


def _account(pochta: Pochta, email: str) -> tuple[SenderListService, User]:
    lists = pochta.mailbox.lists
    if lists is None:
        raise ConfigError("sender lists are not set up")
    user = pochta.mailbox.user(email)
    if user is None:
        raise UserNotFound(f"no user {email}")
    return lists, user


@app.command()
@handles_errors
def show(
    user: UserOpt,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """The account's entries, by value."""
    with opened(data, config) as pochta:
        lists, account = _account(pochta, user)
        entries = lists.entries(account.id)
    payload = [{"value": e.value, "action": e.action} for e in entries]

    def human() -> None:
        for e in entries:
            out.print(f"{e.action:<6} {e.value}", markup=False)
        out.print(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}")

    emit(json_output, payload, human)


@app.command()
@handles_errors
def add(
    value: Value,
    user: UserOpt,
    block: Annotated[
        bool, typer.Option("--block/--allow", help="always spam (block) or never spam (allow)")
    ] = False,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Add an entry (or change the action of the same one)."""
    with opened(data, config) as pochta:
        lists, account = _account(pochta, user)
        entry = lists.add(account.id, value, "block" if block else "allow")
    emit(
        json_output,
        {"value": entry.value, "action": entry.action},
        lambda: out.print(f"{entry.action} {entry.value} for {account.email}", markup=False),
    )


@app.command()
@handles_errors
def remove(
    value: Value,
    user: UserOpt,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Remove an entry."""
    with opened(data, config) as pochta:
        lists, account = _account(pochta, user)
        entry = lists.remove(account.id, value)
    emit(
        json_output,
        {"value": entry.value, "action": entry.action},
        lambda: out.print(f"removed {entry.value} for {account.email}", markup=False),
    )
