"""``pochta guard``: lift the login limits of an IP or an account."""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.errors import InvalidInput

app = typer.Typer(help="Login limits: reset.", no_args_is_help=True)


@app.command()
@handles_errors
def reset(
    ip: Annotated[
        str | None, typer.Option("--ip", help="the client IP whose limits are lifted")
    ] = None,
    account: Annotated[
        str | None, typer.Option("--account", help="the e-mail whose limit is lifted")
    ] = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Lift the login limits of an IP (failures and successes counted from it) and/or an
    account (failures counted against it), e.g. for an office locked out by a typo storm."""
    if ip is None and account is None:
        raise InvalidInput("name what to reset: --ip ADDRESS and/or --account EMAIL")
    if ip is not None:
        try:
            ip = str(ipaddress.ip_address(ip.strip()))
        except ValueError:
            raise InvalidInput(f"not an IP address: {ip!r}") from None
    if account is not None and "@" not in account:
        raise InvalidInput(f"not an e-mail address: {account!r}")
    with opened(data, config) as pochta:
        logins = pochta.mailbox.users.logins
        if logins is None:
            raise InvalidInput("login limits are off")
        logins.reset(ip=ip, email=account)
    done = [f"IP {ip}"] * (ip is not None) + [f"account {account}"] * (account is not None)
    emit(
        json_output,
        {"ip": ip, "account": account, "reset": True},
        lambda: out.print(f"login limits lifted for {' and '.join(done)}"),
    )
