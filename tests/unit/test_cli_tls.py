"""``pochta tls self-signed``, ``pochta tls ca``, ``pochta tls cert``."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from typer.testing import CliRunner

from pochta.cli import app
from pochta.tls import server_context

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


def test_a_ca_and_certificates_it_signs_for_servers_and_clients(tmp_path: Path) -> None:
    ca_dir, node = tmp_path / "ca", tmp_path / "node1"
    r = runner.invoke(app, ["tls", "ca", "--out", str(ca_dir), "--name", "example CA", "--json"])
    assert r.exit_code == 0, r.output
    assert (ca_dir / "ca-key.pem").stat().st_mode & 0o777 == 0o600
    r = runner.invoke(
        app, ["tls", "cert", "--ca", str(ca_dir), "--host", "10.0.0.2", "--host", "node1.test",
              "--out", str(node), "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    written = json.loads(r.stdout)
    assert written["hosts"] == ["10.0.0.2", "node1.test"]
    assert (node / "key.pem").stat().st_mode & 0o777 == 0o600
    assert (node / "ca.pem").read_bytes() == (ca_dir / "ca.pem").read_bytes()
    leaf = x509.load_pem_x509_certificate((node / "cert.pem").read_bytes())
    usage = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usage) == {x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                          x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH}  # fmt: skip
    # a TLS handshake in each direction: the server verified by name, the client by the CA
    server = server_context(node / "cert.pem", node / "key.pem")
    server.verify_mode = ssl.CERT_REQUIRED
    server.load_verify_locations(node / "ca.pem")
    client = ssl.create_default_context(cafile=node / "ca.pem")
    client.load_cert_chain(node / "cert.pem", node / "key.pem")
    _handshake(server, client, "10.0.0.2")
    _handshake(server, client, "node1.test")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(server, client, "node2.test")  # a name it was not made for


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, name: str) -> None:
    """A whole handshake over memory BIOs: the client checks ``name``, the server the
    client's certificate."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=name)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for side, obj in (("client", client), ("server", server)):
            if not done[side]:
                try:
                    obj.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            assert server.getpeercert() is not None  # the client's certificate, verified
            return
    raise AssertionError("the handshake did not finish")


def test_cert_refuses_a_missing_or_wrong_ca(tmp_path: Path) -> None:
    missing = runner.invoke(
        app, ["tls", "cert", "--ca", str(tmp_path / "none"), "--host", "a", "--out", str(tmp_path)]
    )
    assert missing.exit_code == 2 and "pochta tls ca" in missing.output, missing.output
    # a self-signed server certificate is no CA
    assert runner.invoke(app, ["tls", "self-signed", "--host", "a", "--out", str(tmp_path / "s")]
                         ).exit_code == 0  # fmt: skip
    (tmp_path / "s" / "cert.pem").rename(tmp_path / "s" / "ca.pem")
    (tmp_path / "s" / "key.pem").rename(tmp_path / "s" / "ca-key.pem")
    not_ca = runner.invoke(
        app,
        ["tls", "cert", "--ca", str(tmp_path / "s"), "--host", "a", "--out", str(tmp_path / "o")],
    )
    assert not_ca.exit_code == 2 and "not a CA" in not_ca.output, not_ca.output
    assert not (tmp_path / "o" / "cert.pem").exists()
    # a CA's certificate with another CA's key
    for name in ("one", "two"):
        assert runner.invoke(app, ["tls", "ca", "--out", str(tmp_path / name)]).exit_code == 0
    (tmp_path / "two" / "ca-key.pem").replace(tmp_path / "one" / "ca-key.pem")
    mixed = runner.invoke(
        app,
        ["tls", "cert", "--ca", str(tmp_path / "one"), "--host", "a", "--out", str(tmp_path / "o")],
    )
    assert mixed.exit_code == 2 and "not the CA certificate's" in mixed.output, mixed.output
    again = runner.invoke(app, ["tls", "ca", "--out", str(tmp_path / "two")])
    assert again.exit_code == 2 and "--force" in again.output
