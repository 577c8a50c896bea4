"""``pochta guard``: lift the login limits of an IP or an account; trust an address."""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.errors import InvalidInput

app = typer.Typer(help="Login limits: reset, trust.", no_args_is_help=True)

IpOpt = Annotated[str | None, typer.Option("--ip", help="the client IP whose limits are lifted")]
AccountOpt = Annotated[
    str | None,
    typer.Option("--account", "--email", help="the e-mail whose limit is lifted"),
]


def _ip(ip: str) -> str:
    try:
        return str(ipaddress.ip_address(ip.strip()))
    except ValueError:
        raise InvalidInput(f"not an IP address: {ip!r}") from None


def _email(account: str) -> str:
    if "@" not in account:
        raise InvalidInput(f"not an e-mail address: {account!r}")
    return account


@app.command()
@handles_errors
def reset(
    ip: IpOpt = None,
    account: AccountOpt = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Lift the login limits of an IP (failures and successes counted from it) and/or an
    account (its checks by clients it does not know are no longer slowed), e.g. for an
    office locked out by a typo storm; with both, also that IP's own failures on that
    account."""
    if ip is None and account is None:
        raise InvalidInput("name what to reset: --ip ADDRESS and/or --account EMAIL")
    ip = None if ip is None else _ip(ip)
    account = None if account is None else _email(account)
    with opened(data, config) as pochta:
        logins = pochta.mailbox.logins
        if logins is None:
            raise InvalidInput("login limits are off")
        logins.reset(ip=ip, email=account)
    done = [f"IP {ip}"] * (ip is not None) + [f"account {account}"] * (account is not None)
    emit(
        json_output,
        {"ip": ip, "account": account, "reset": True},
        lambda: out.print(f"login limits lifted for {' and '.join(done)}"),
    )


@app.command()
@handles_errors
def trust(
    ip: Annotated[str, typer.Option("--ip", help="the address the user logs in from")],
    account: Annotated[str, typer.Option("--account", "--email", help="the user's e-mail")],
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Make an address (and its /24 or /64 network) a known client of an account, as a
    successful login from it would: for a user at a new place while the account is under
    attack (guesses from many addresses compete for its slots; a known client does not)."""
    ip, account = _ip(ip), _email(account)
    with opened(data, config) as pochta:
        pochta.mailbox.trust(account, ip)
    emit(
        json_output,
        {"ip": ip, "account": account, "trusted": True},
        lambda: out.print(f"{ip} is now a known client of {account}"),
    )
