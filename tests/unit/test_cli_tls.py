"""``pochta tls self-signed``."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

from cryptography import x509
from typer.testing import CliRunner

from pochta.cli import app
from pochta.server.tls import server_context

runner = CliRunner()


def test_self_signed_writes_a_usable_pair(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    r = runner.invoke(
        app, ["tls", "self-signed", "--host", "mx.example.test", "--host", "127.0.0.1",
              "--out", str(out), "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    written = json.loads(r.stdout)
    assert written["hosts"] == ["mx.example.test", "127.0.0.1"]
    cert, key = out / "cert.pem", out / "key.pem"
    assert key.stat().st_mode & 0o777 == 0o600
    server_context(cert, key)  # the key matches the certificate
    san = x509.load_pem_x509_certificate(cert.read_bytes()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert san.value.get_values_for_type(x509.DNSName) == ["mx.example.test"]
    assert [str(a) for a in san.value.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    client = ssl.create_default_context(cafile=cert)  # a client can be told to trust it
    assert client.cert_store_stats()["x509"] == 1


def test_self_signed_refuses_to_overwrite_and_bad_input(tmp_path: Path) -> None:
    args = ["tls", "self-signed", "--host", "localhost", "--out", str(tmp_path)]
    assert runner.invoke(app, args).exit_code == 0
    before = (tmp_path / "cert.pem").read_bytes()
    again = runner.invoke(app, args)
    assert again.exit_code == 2 and "--force" in again.output
    assert (tmp_path / "cert.pem").read_bytes() == before
    assert runner.invoke(app, [*args, "--force"]).exit_code == 0
    assert (tmp_path / "cert.pem").read_bytes() != before
    assert runner.invoke(app, [*args, "--force", "--days", "0"]).exit_code == 2
    assert runner.invoke(app, ["tls", "self-signed", "--host", "a b", "--out", str(tmp_path),
                               "--force"]).exit_code == 2  # fmt: skip
    assert not list(tmp_path.glob(".*.tmp"))
