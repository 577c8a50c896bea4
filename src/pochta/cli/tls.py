"""``pochta tls self-signed``: a certificate and key for a test install."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated

import typer

from pochta.cli.common import JsonOpt, emit, handles_errors, out
from pochta.errors import ConfigError, InvalidInput
from pochta.server.tls import self_signed as make_self_signed

app = typer.Typer(help="TLS certificates.", no_args_is_help=True)


@app.command("self-signed")
@handles_errors
def self_signed(
    host: Annotated[
        list[str] | None,
        typer.Option(
            help="a name or IP address the certificate is for (repeat for more;"
            " default: this host's FQDN, localhost, 127.0.0.1)"
        ),
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", help="directory for cert.pem and key.pem")
    ] = Path("."),
    days: Annotated[int, typer.Option(help="validity in days")] = 365,
    force: Annotated[bool, typer.Option(help="replace cert.pem / key.pem if they exist")] = False,
    json_output: JsonOpt = False,
) -> None:
    """Write a self-signed certificate (cert.pem) and its key (key.pem, mode 0600) for a test
    install; point [tls] cert_file / key_file at them. Clients must be told to trust it."""
    hosts = host or [socket.getfqdn(), "localhost", "127.0.0.1"]
    if not 1 <= days <= 3650:
        raise InvalidInput("--days is between 1 and 3650")
    if any(not h or len(h) > 253 or any(c.isspace() for c in h) for h in hosts):
        raise InvalidInput("--host is a name or an address, without spaces, at most 253 characters")
    cert_path, key_path = out_dir / "cert.pem", out_dir / "key.pem"
    if not force and (cert_path.exists() or key_path.exists()):
        raise InvalidInput(f"{cert_path} or {key_path} exists (--force replaces them)")
    cert, key = make_self_signed(list(dict.fromkeys(hosts)), days)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        _write(key_path, key, 0o600)
        _write(cert_path, cert, 0o644)
    except OSError as exc:
        raise ConfigError(f"cannot write to {out_dir}: {exc.strerror}") from None

    def human() -> None:
        out.print(f"certificate: {cert_path.resolve()} (for {', '.join(hosts)}; {days} days)")
        out.print(f"key:         {key_path.resolve()}")
        out.print(
            f'pochta.toml:\n  [tls]\n  cert_file = "{cert_path.resolve()}"\n'
            f'  key_file = "{key_path.resolve()}"',
            markup=False,
        )

    emit(
        json_output,
        {
            "cert_file": str(cert_path.resolve()),
            "key_file": str(key_path.resolve()),
            "hosts": hosts,
        },
        human,
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    """Written to a temporary name, then renamed: never half a file under the final name."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
