"""``pochta tls``: certificates. ``self-signed`` makes one certificate for a test install;
``ca`` makes an installation's own certificate authority and ``cert`` a machine's certificate
signed by it (what the several-machines recipe uses: every machine trusts ``ca.pem``, serves
its listeners with its own certificate and shows it to the storage nodes as a client)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated

import typer

from pochta.cli.common import JsonOpt, emit, handles_errors, out
from pochta.errors import ConfigError, InvalidInput
from pochta.tls import new_ca, signed
from pochta.tls import self_signed as make_self_signed

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
    install; point tls.cert_file / tls.key_file at them. Clients must be told to trust it."""
    hosts = _hosts(host or [socket.getfqdn(), "localhost", "127.0.0.1"])
    _check_days(days)
    cert_path, key_path = out_dir / "cert.pem", out_dir / "key.pem"
    _check_free([cert_path, key_path], force)
    cert, key = make_self_signed(hosts, days)
    _write_all(out_dir, [(key_path, key, 0o600), (cert_path, cert, 0o644)])

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


@app.command("ca")
@handles_errors
def ca(
    out_dir: Annotated[
        Path, typer.Option("--out", help="directory for ca.pem and ca-key.pem")
    ] = Path("."),
    name: Annotated[str, typer.Option(help="the CA's name (its common name)")] = "pochta CA",
    days: Annotated[int, typer.Option(help="validity in days")] = 3650,
    force: Annotated[bool, typer.Option(help="replace ca.pem / ca-key.pem if they exist")] = False,
    json_output: JsonOpt = False,
) -> None:
    """Write a certificate authority for one installation: ca.pem (every machine trusts it)
    and ca-key.pem (mode 0600; it signs the machines' certificates with `pochta tls cert`:
    keep it on the admin machine, off the servers)."""
    _check_days(days)
    if not name.strip() or len(name) > 64:
        raise InvalidInput("--name has 1 to 64 characters")
    cert_path, key_path = out_dir / "ca.pem", out_dir / "ca-key.pem"
    _check_free([cert_path, key_path], force)
    cert, key = new_ca(name, days)
    _write_all(out_dir, [(key_path, key, 0o600), (cert_path, cert, 0o644)])

    def human() -> None:
        out.print(f"CA certificate: {cert_path.resolve()} ({name!r}; {days} days)")
        out.print(f"CA key:         {key_path.resolve()} (keep it off the servers)")
        out.print(f"next: pochta tls cert --ca {out_dir} --host <address or name> --out <dir>")

    emit(
        json_output,
        {"ca_file": str(cert_path.resolve()), "ca_key_file": str(key_path.resolve())},
        human,
    )


@app.command("cert")
@handles_errors
def cert(
    ca_dir: Annotated[
        Path, typer.Option("--ca", help="directory holding ca.pem and ca-key.pem (`pochta tls ca`)")
    ],
    host: Annotated[
        list[str],
        typer.Option(help="a name or IP address the certificate is for (repeat for more)"),
    ],
    out_dir: Annotated[
        Path, typer.Option("--out", help="directory for cert.pem, key.pem and ca.pem")
    ] = Path("."),
    days: Annotated[int, typer.Option(help="validity in days")] = 365,
    force: Annotated[bool, typer.Option(help="replace the files if they exist")] = False,
    json_output: JsonOpt = False,
) -> None:
    """Write a machine's certificate signed by the CA (cert.pem), its key (key.pem, mode
    0600) and a copy of the CA's certificate (ca.pem). The certificate serves the machine's
    listeners (tls.cert_file, PostgreSQL, Redis, a storage node's nginx) and is its client
    certificate for the storage nodes (blobs.node_cert_file)."""
    hosts = _hosts(host)
    _check_days(days)
    try:
        ca_cert = (ca_dir / "ca.pem").read_bytes()
        ca_key = (ca_dir / "ca-key.pem").read_bytes()
    except OSError as exc:
        raise InvalidInput(
            f"--ca {ca_dir}: cannot read {exc.filename}: {exc.strerror} (make a CA with"
            " `pochta tls ca`)"
        ) from None
    paths = [out_dir / "cert.pem", out_dir / "key.pem", out_dir / "ca.pem"]
    if (ca_dir / "ca.pem").resolve() == paths[2].resolve():
        paths = paths[:2]  # the CA's own directory: ca.pem is there already
    _check_free(paths, force)
    try:
        leaf, key = signed(hosts, ca_cert, ca_key, days)
    except ValueError as exc:
        raise InvalidInput(f"--ca {ca_dir}: {exc}") from None
    files = [(paths[1], key, 0o600), (paths[0], leaf, 0o644)]
    if len(paths) == 3:
        files.append((paths[2], ca_cert, 0o644))
    _write_all(out_dir, files)

    def human() -> None:
        out.print(f"certificate: {paths[0].resolve()} (for {', '.join(hosts)}; {days} days)")
        out.print(f"key:         {paths[1].resolve()}")
        out.print(f"CA:          {(out_dir / 'ca.pem').resolve()}")

    emit(
        json_output,
        {
            "cert_file": str(paths[0].resolve()),
            "key_file": str(paths[1].resolve()),
            "ca_file": str((out_dir / "ca.pem").resolve()),
            "hosts": hosts,
        },
        human,
    )


def _hosts(hosts: list[str]) -> list[str]:
    if any(not h or len(h) > 253 or any(c.isspace() for c in h) for h in hosts):
        raise InvalidInput("--host is a name or an address, without spaces, at most 253 characters")
    return list(dict.fromkeys(hosts))


def _check_days(days: int) -> None:
    if not 1 <= days <= 3650:
        raise InvalidInput("--days is between 1 and 3650")


def _check_free(paths: list[Path], force: bool) -> None:
    if not force and any(p.exists() for p in paths):
        names = " or ".join(str(p) for p in paths)
        raise InvalidInput(f"{names} exists (--force replaces them)")


def _write_all(out_dir: Path, files: list[tuple[Path, bytes, int]]) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for path, data, mode in files:
            _write(path, data, mode)
    except OSError as exc:
        raise ConfigError(f"cannot write to {out_dir}: {exc.strerror}") from None


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
