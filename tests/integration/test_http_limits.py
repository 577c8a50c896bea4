"""Bounded HTTP against a live ``pochta serve``: every body has its endpoint's limit, checked on
Content-Length before the body is read and counted while a chunked body streams; JSON depth
and header size are bounded; the server's peak memory does not follow what a client sends."""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import TOKEN, Server, start_server

pytestmark = pytest.mark.integration

LIMIT = 1 << 20  # blobs.max_upload_size and smtp.max_message_size of this server
MB = 1 << 20


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("limits")
    srv = start_server(
        tmp / "data",
        tmp / "serve.log",
        settings={
            "POCHTA_BLOBS__MAX_UPLOAD_SIZE": str(LIMIT),
            "POCHTA_SMTP__MAX_MESSAGE_SIZE": str(LIMIT),
            "POCHTA_ANTISPAM__POOL_PROCESSES": "0",  # one process: its peak memory is the server's
            "POCHTA_VALKYRIE__ENABLED": "false",
        },
    )
    yield srv
    srv.stop()


def peak_kb(pid: int) -> int:
    """VmHWM: the most resident memory the process ever had, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@dataclass
class Answer:
    status: int
    head: bytes
    body: bytes
    sent: int  # bytes of body the client got onto the wire before the answer
    seconds: float


def send_streaming(
    port: int, method: str, path: str, total: int, headers: dict[str, str]
) -> Answer:
    """Send ``total`` bytes of body in 64 KB chunks (chunked encoding unless a Content-Length
    is given), stopping as soon as the server answers; the answer and what was sent."""
    chunked = "Content-Length" not in headers
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    piece = b"a" * 65_536
    frame = (b"%x\r\n" % len(piece) + piece + b"\r\n") if chunked else piece
    started = time.monotonic()
    sent, reply = 0, b""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        s.setblocking(False)
        while b"\r\n\r\n" not in reply and time.monotonic() - started < 30:
            readable, writable, _ = select.select([s], [s] if sent < total else [], [], 5)
            if readable:
                try:
                    data = s.recv(65_536)
                except ConnectionResetError:
                    break
                if not data:
                    break
                reply += data
            elif writable:
                try:
                    sent += s.send(frame)
                except (BrokenPipeError, ConnectionResetError):
                    sent = total
        s.setblocking(True)
        s.settimeout(5)
        try:
            while True:  # the refusal closes the connection after its body
                data = s.recv(65_536)
                if not data:
                    break
                reply += data
        except OSError:
            pass
    head, _, body = reply.partition(b"\r\n\r\n")
    status = int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else 0
    return Answer(status, head, body, sent, time.monotonic() - started)


def test_unauthenticated_chunked_body_to_login_is_cut_off_and_memory_stays_flat(
    server: Server,
) -> None:
    """The finding: 1.5 GB of JSON to POST /v1/session was read whole (RSS 5.2 GB). Here
    128 MB chunked: the answer is 413 after a few KB, the rest is never read, and the server's
    peak RSS grows by far less than what was offered."""
    before = peak_kb(server.proc.pid)
    answer = send_streaming(
        server.port, "POST", "/v1/session", 128 * MB, {"Content-Type": "application/json"}
    )
    after = peak_kb(server.proc.pid)
    assert answer.status == 413, answer.head
    assert b'"too_large"' in answer.body
    assert b"connection: close" in answer.head.lower()
    assert answer.sent < 32 * MB, f"the server read {answer.sent} bytes before refusing"
    assert answer.seconds < 10
    assert after - before < 16 * 1024, f"peak RSS grew by {(after - before) // 1024} MB"


def test_content_length_over_the_limit_is_refused_before_the_body(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(
            b"POST /v1/session HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1500000000\r\n\r\n{"
        )
        reply = s.recv(65_536)  # nothing more is sent: the answer cannot wait for the body
    assert reply.startswith(b"HTTP/1.1 413 "), reply


def test_each_endpoint_has_its_own_limit(server: Server) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    key = "ab" * 32
    # blob upload: blobs.max_upload_size, declared or streamed
    r = httpx.put(
        f"{server.url}/v1/blobs/{key}",
        params={"magic": 1},
        content=b"x" * (LIMIT + 1),
        headers=auth,
    )
    assert (r.status_code, r.json()["error"]) == (413, "too_large")
    answer = send_streaming(server.port, "PUT", f"/v1/blobs/{key}?magic=1", 4 * MB, auth)
    assert answer.status == 413
    assert not list((server.data / "disks").rglob("*.part"))
    assert not list((server.data / "disks").rglob(key))
    fits = os.urandom(LIMIT)
    r = httpx.put(
        f"{server.url}/v1/blobs/{hashlib.sha256(fits).hexdigest()}",
        params={"magic": 1},
        content=fits,
        headers=auth,
    )
    assert r.status_code == 201, r.text
    # scan: smtp.max_message_size
    answer = send_streaming(
        server.port, "POST", "/v1/scan", 4 * MB, {**auth, "Content-Type": "message/rfc822"}
    )
    assert answer.status == 413
    # an authenticated JSON endpoint: http.max_json_body (256 KB by default)
    json_type = {**auth, "Content-Type": "application/json"}
    answer = send_streaming(server.port, "POST", "/v1/shingles/query", 4 * MB, json_type)
    assert answer.status == 413
    assert b"262144 bytes" in answer.body


def test_json_nested_too_deep_is_refused(server: Server) -> None:
    deep = b'{"shingles": ' + b"[" * 40 + b"]" * 40 + b"}"
    r = httpx.post(
        f"{server.url}/v1/shingles/query",
        content=deep,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    assert (r.status_code, r.json()["error"]) == (400, "json_too_deep")
    # brackets inside strings are text, not nesting
    shallow = b'{"email": "' + b"[" * 100 + b'@x", "password": "p"}'
    r = httpx.post(
        f"{server.url}/v1/session", content=shallow, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 401, r.text


def test_headers_over_the_limit_are_refused(server: Server) -> None:
    r = httpx.get(f"{server.url}/healthz", headers={"X-Padding": "a" * 20_000})
    assert (r.status_code, r.json()["error"]) == (431, "headers_too_large")
    # a head that never ends is not held: the parser's own bound (httptools has none; pochta
    # counts) answers 431 and closes, for one header that never ends and for many headers
    never_ends = b"X-Padding: " + b"a" * 300_000
    many = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 20) for i in range(2000))
    for head in (never_ends, many):
        assert refusal_of(server.port, b"GET /healthz HTTP/1.1\r\nHost: a\r\n" + head) == 431
    assert httpx.get(f"{server.url}/healthz").status_code == 200


def refusal_of(port: int, head: bytes) -> int:
    """The status of the answer to a request head that never ends; the connection is closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with contextlib.suppress(OSError):  # the server may close while this still sends
            s.sendall(head)
        reply = b""
        with contextlib.suppress(ConnectionResetError):  # uvicorn's h11 closes with unread input
            while chunk := s.recv(65_536):
                reply += chunk
    assert reply.startswith(b"HTTP/1.1 "), reply
    status = int(reply.split()[1])
    if status == 431:
        assert b'"headers_too_large"' in reply
    return status


def test_the_h11_parser_is_held_to_the_same_limits(tmp_path: Path) -> None:
    """http.parser = "h11": headers over the limit get 431, a head that never ends 400
    (h11's max_incomplete_event_size), a connection without a head is closed after
    http.header_timeout."""
    srv = start_server(
        tmp_path / "data",
        tmp_path / "serve.log",
        settings={"POCHTA_HTTP__PARSER": "h11", "POCHTA_HTTP__HEADER_TIMEOUT": "1"},
    )
    try:
        r = httpx.get(f"{srv.url}/healthz", headers={"X-Padding": "a" * 20_000})
        assert (r.status_code, r.json()["error"]) == (431, "headers_too_large")
        never_ends = b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Padding: " + b"a" * 300_000
        assert refusal_of(srv.port, never_ends) == 400
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as silent:
            assert silent.recv(4096) == b""  # closed after about 1 s
        assert httpx.get(f"{srv.url}/healthz").status_code == 200
    finally:
        srv.stop()
