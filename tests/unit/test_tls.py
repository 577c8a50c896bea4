"""pochta.tls: handshakes see the newest certificate; a failed reload changes nothing."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest

from pochta.config import TlsSettings
from pochta.errors import ConfigError
from pochta.tls import ServerTLS, self_signed


def write(directory: Path, hosts: list[str]) -> bytes:
    cert, key = self_signed(hosts)
    (directory / "cert.pem").write_bytes(cert)
    (directory / "key.pem").write_bytes(key)
    return ssl.PEM_cert_to_DER_cert(cert.decode())


def handshake(tls: ServerTLS, sni: str | None) -> bytes:
    """One TLS handshake against ``tls.context`` over a socket pair; the server's cert."""
    a, b = socket.socketpair()
    server = threading.Thread(target=lambda: _serve(tls, a), daemon=True)
    server.start()
    client = ssl.create_default_context()
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    with client.wrap_socket(b, server_hostname=sni) as s:
        der = s.getpeercert(binary_form=True)
    server.join(5)
    assert der is not None
    return der


def _serve(tls: ServerTLS, sock: socket.socket) -> None:
    with tls.context.wrap_socket(sock, server_side=True) as s:
        s.recv(1)


@pytest.mark.parametrize("sni", ["localhost", None])
def test_reload_takes_effect_on_the_next_handshake(tmp_path: Path, sni: str | None) -> None:
    first = write(tmp_path, ["localhost"])
    tls = ServerTLS(tmp_path / "cert.pem", tmp_path / "key.pem")
    front = tls.context
    assert handshake(tls, sni) == first
    second = write(tmp_path, ["localhost"])
    assert handshake(tls, sni) == first  # nothing read before reload()
    assert tls.reload() and tls.reloads == 1
    assert handshake(tls, sni) == second and tls.context is front


def test_a_failed_reload_keeps_the_old_certificate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = write(tmp_path, ["localhost"])
    tls = ServerTLS(tmp_path / "cert.pem", tmp_path / "key.pem")
    _, other_key = self_signed(["localhost"])
    (tmp_path / "key.pem").write_bytes(other_key)  # does not match the certificate
    assert not tls.reload()
    (tmp_path / "cert.pem").write_text("not a certificate")
    assert not tls.reload()
    (tmp_path / "cert.pem").unlink()
    assert not tls.reload()
    assert tls.failures == 3 and tls.reloads == 0
    assert handshake(tls, "localhost") == first
    assert caplog.text.count("certificate not reloaded, the previous one stays in use") == 3


def test_settings(tmp_path: Path) -> None:
    assert ServerTLS.from_settings(TlsSettings()) is None
    with pytest.raises(ValueError, match="set together"):
        TlsSettings(cert_file=tmp_path / "c.pem")
    missing = TlsSettings(cert_file=tmp_path / "c.pem", key_file=tmp_path / "k.pem")
    with pytest.raises(ConfigError, match="tls: cannot use"):
        ServerTLS.from_settings(missing)
    write(tmp_path, ["localhost"])
    ok = TlsSettings(cert_file=tmp_path / "cert.pem", key_file=tmp_path / "key.pem",
                     min_version="TLSv1.3")  # fmt: skip
    tls = ServerTLS.from_settings(ok)
    assert tls is not None and tls.context.minimum_version is ssl.TLSVersion.TLSv1_3
