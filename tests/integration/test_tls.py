"""TLS with real clients against a real ``pochta serve``: smtplib and swaks doing STARTTLS on
SMTP, smtplib on LMTP, httpx over HTTPS, and a certificate changed on disk and reloaded by
SIGHUP (the next handshake shows the new one; a connection already up stays up; a bad pair of
files changes nothing)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import smtplib
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from pochta.tls import self_signed
from tests.integration.conftest import Server, eventually, start_server
from tests.integration.test_smtp import add_users, raws, strip_trace
from tests.mailtools import letter, payload

pytestmark = pytest.mark.integration

HOSTS = ["localhost", "127.0.0.1"]


def write_cert(directory: Path, hosts: list[str] = HOSTS) -> tuple[Path, Path, bytes]:
    """A fresh self-signed certificate in ``directory``/cert.pem + key.pem; its DER bytes."""
    cert, key = self_signed(hosts)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "key.pem").write_bytes(key)
    (directory / "cert.pem").write_bytes(cert)
    return directory / "cert.pem", directory / "key.pem", ssl.PEM_cert_to_DER_cert(cert.decode())


def unfolded(raw: bytes) -> bytes:
    """The letter with its header lines unfolded (pochta folds the Received line it adds)."""
    return re.sub(rb"\r?\n[ \t]+", b" ", raw)


def trusting(*certs: Path) -> ssl.SSLContext:
    """A client context that trusts exactly these (self-signed) certificates."""
    ctx = ssl.create_default_context()
    ctx.load_verify_locations(cadata="".join(c.read_text() for c in certs))
    return ctx


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout} s waiting for {what}")
        time.sleep(0.05)


def tls_server(root: Path) -> tuple[Server, Path]:
    certs = root / "certs"
    write_cert(certs)
    data = root / "data"
    add_users(data, "alice@example.org")
    imaps = free_port()
    srv = start_server(
        data,
        root / "serve.log",
        settings={
            "POCHTA_TLS__CERT_FILE": str(certs / "cert.pem"),
            "POCHTA_TLS__KEY_FILE": str(certs / "key.pem"),
            "POCHTA_TLS__LMTP": "true",
            "POCHTA_IMAP__TLS_PORT": str(imaps),
        },
    )
    srv.imaps_port = imaps
    return srv, certs


@pytest.fixture(scope="module")
def tls_mx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """One server for the tests that do not change its certificate."""
    srv, certs = tls_server(tmp_path_factory.mktemp("tls"))
    yield srv, certs
    if srv.proc.poll() is None:
        srv.stop()


def delivered(srv: Server, subject: bytes) -> bytes:
    def mine() -> list[bytes]:
        return [r for r in raws(srv, "alice@example.org") if b"Subject: " + subject in r]

    (got,) = eventually(mine, bool, what=f"the letter {subject!r}")  # queued: after its 250
    return got


def peer_cert(port: int, ca: ssl.SSLContext, lmtp: bool = False) -> bytes:
    """The certificate a new STARTTLS handshake on ``port`` shows (DER)."""
    client = smtplib.LMTP("127.0.0.1", port) if lmtp else smtplib.SMTP("127.0.0.1", port)
    with client:
        client.ehlo()
        client.starttls(context=ca)
        assert isinstance(client.sock, ssl.SSLSocket)
        der = client.sock.getpeercert(binary_form=True)
        assert der is not None
        return der


def test_smtplib_starttls_delivers_byte_exact(tls_mx: tuple[Server, Path]) -> None:
    srv, certs = tls_mx
    raw = letter(subject="over TLS", attachments=[("data.bin", payload(7, 50_000))])
    with smtplib.SMTP("127.0.0.1", srv.smtp_port) as client:
        client.ehlo()
        assert client.has_extn("starttls")
        client.starttls(context=trusting(certs / "cert.pem"))
        client.ehlo()
        assert client.sock is not None and client.sock.version() in ("TLSv1.2", "TLSv1.3")
        client.sendmail("s@example.net", ["alice@example.org"], raw)
    got = delivered(srv, b"over TLS")
    assert strip_trace(got) == raw
    assert b"with ESMTPS" in unfolded(got)  # RFC 3848: the Received header says it came over TLS


def test_every_imaps_handshake_completes(tls_mx: tuple[Server, Path]) -> None:
    """IMAPS clients send their ClientHello at once. The session used to start TLS itself
    after the connection was made, and under uvloop the ClientHello was often read first as
    plain bytes and thrown away: 129 of 200 handshakes hung until the client gave up."""
    srv, certs = tls_mx
    ctx = trusting(certs / "cert.pem")
    for _ in range(100):
        raw = socket.create_connection(("127.0.0.1", srv.imaps_port), timeout=10)
        with raw, ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.recv(200).startswith(b"* OK [CAPABILITY IMAP4rev1")


def test_a_refused_imaps_client_that_keeps_sending_is_cut_off(
    tls_mx: tuple[Server, Path],
) -> None:
    """Over IMAPS too, a literal too big before the login gets BYE [TOOBIG], and then the
    server reads no more of what the client keeps sending: closing a TLS transport would
    read and decrypt all of it until its shutdown timeout (under uvloop 4 such clients each
    had 320 MB read); now the client is cut off within a few MB and a few seconds."""
    srv, certs = tls_mx
    raw = socket.create_connection(("127.0.0.1", srv.imaps_port), timeout=10)
    with raw, trusting(certs / "cert.pem").wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        f = tls.makefile("rb")
        assert f.readline().startswith(b"* OK")
        tls.sendall(b"a LOGIN alice {200000000+}\r\n")
        sent, block, began = 0, b"x" * (1 << 20), time.monotonic()
        with contextlib.suppress(OSError):
            while sent < 200_000_000 and time.monotonic() - began < 30:
                tls.sendall(block)
                sent += len(block)
        assert sent < 50_000_000, sent  # kernel buffers and one TLS read, not 200 MB
        assert time.monotonic() - began < 15
        with contextlib.suppress(OSError):
            assert f.readline().startswith(b"* BYE [TOOBIG]")


def test_lmtp_offers_starttls_when_configured(tls_mx: tuple[Server, Path]) -> None:
    srv, certs = tls_mx
    raw = letter(subject="over LMTP and TLS")
    with smtplib.LMTP("127.0.0.1", srv.lmtp_port) as client:
        client.ehlo()
        client.starttls(context=trusting(certs / "cert.pem"))
        client.ehlo()
        client.sendmail("s@example.net", ["alice@example.org"], raw)
    got = delivered(srv, b"over LMTP and TLS")
    assert strip_trace(got) == raw and b"with LMTPS" in unfolded(got)


def test_a_client_that_does_not_trust_the_certificate_fails_the_handshake(
    tls_mx: tuple[Server, Path],
) -> None:
    srv, _ = tls_mx
    with smtplib.SMTP("127.0.0.1", srv.smtp_port) as client:
        client.ehlo()
        with pytest.raises(ssl.SSLCertVerificationError):
            client.starttls(context=ssl.create_default_context())


@pytest.mark.skipif(shutil.which("swaks") is None, reason="swaks is not installed")
def test_swaks_tls_delivers(tls_mx: tuple[Server, Path]) -> None:
    srv, certs = tls_mx
    done = subprocess.run(
        ["swaks", "--server", f"127.0.0.1:{srv.smtp_port}", "--tls", "--tls-verify",
         "--tls-ca-path", str(certs / "cert.pem"), "--tls-sni", "localhost",
         "--to", "alice@example.org", "--from", "s@example.net",
         "--header", "Subject: from swaks over TLS"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "STARTTLS" in done.stdout and "220 Ready to start TLS" in done.stdout
    assert "250 2.0.0 OK queued as" in done.stdout
    assert b"with ESMTPS" in unfolded(delivered(srv, b"from swaks over TLS"))


def test_sighup_reloads_the_certificate_without_dropping_connections(tmp_path: Path) -> None:
    srv, certs = tls_server(tmp_path)
    try:
        reload_and_check(srv, certs)
    finally:
        srv.stop()


def reload_and_check(srv: Server, certs: Path) -> None:
    old_der = ssl.PEM_cert_to_DER_cert((certs / "cert.pem").read_text())
    old_pem = certs / "old.pem"
    shutil.copy(certs / "cert.pem", old_pem)
    assert peer_cert(srv.smtp_port, trusting(old_pem)) == old_der
    # a session that is up (TLS done) before the reload
    open_session = smtplib.SMTP("127.0.0.1", srv.smtp_port)
    open_session.ehlo()
    open_session.starttls(context=trusting(old_pem))
    open_session.ehlo()

    # same paths, a new certificate and key (another subject name: a client trusting both
    # finds each by its subject)
    _, _, new_der = write_cert(certs, HOSTS[::-1])
    both = trusting(old_pem, certs / "cert.pem")
    assert peer_cert(srv.smtp_port, both) == old_der  # files changed, no reload yet
    srv.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: peer_cert(srv.smtp_port, both) == new_der, 10, "the new certificate")
    assert peer_cert(srv.lmtp_port, both, lmtp=True) == new_der
    with pytest.raises(ssl.SSLCertVerificationError):  # the old one is no longer served
        peer_cert(srv.smtp_port, trusting(old_pem))

    # the session opened before the reload goes on and delivers
    open_session.sendmail("s@example.net", ["alice@example.org"], letter(subject="kept"))
    open_session.quit()
    assert delivered(srv, b"kept")

    # a key that does not match its certificate: the reload fails, nothing changes
    key_b = (certs / "key.pem").read_bytes()
    _, other_key = self_signed(HOSTS)
    (certs / "key.pem").write_bytes(other_key)
    srv.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "certificate not reloaded" in srv.log.read_text(), 10, "the failure line")
    assert peer_cert(srv.smtp_port, both) == new_der
    assert srv.proc.poll() is None
    (certs / "key.pem").write_bytes(key_b)
    assert "tls: certificate reloaded from" in srv.log.read_text()


def test_https_with_the_same_certificate_reloaded_on_sighup(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    cert, key, first = write_cert(certs)
    port = free_port()
    env = {
        **os.environ,
        "POCHTA_SMTP__ENABLED": "false",
        "POCHTA_TLS__CERT_FILE": str(cert),
        "POCHTA_TLS__KEY_FILE": str(key),
        "POCHTA_TLS__HTTPS": "true",
    }
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pochta", "serve", "--port", str(port), "--data",
         str(tmp_path / "data")],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    try:
        old = tmp_path / "old.pem"
        shutil.copy(cert, old)
        url = f"https://localhost:{port}/healthz"

        def healthy() -> bool:
            try:
                return httpx.get(url, verify=trusting(old), timeout=2).status_code == 200
            except httpx.TransportError:
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()
                return False

        wait_for(healthy, 30, "pochta serve over HTTPS")
        with pytest.raises(httpx.TransportError):  # plain HTTP is not served there
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
        _, _, second = write_cert(certs, HOSTS[::-1])
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: https_cert(port) == second, 10, "the new certificate over HTTPS")
        assert first != second
        assert httpx.get(url, verify=trusting(cert), timeout=2).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        log.close()


def https_cert(port: int) -> bytes:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as s,
    ):
        der = s.getpeercert(binary_form=True)
        assert der is not None
        return der


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_certificate_that_cannot_be_used_stops_serve_with_one_line(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "POCHTA_TLS__CERT_FILE": str(tmp_path / "missing.pem"),
        "POCHTA_TLS__KEY_FILE": str(tmp_path / "missing.key"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pochta", "serve", "--port", str(free_port()), "--data",
         str(tmp_path / "data")],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 6
    assert "tls: cannot use" in done.stderr and "Traceback" not in done.stderr
