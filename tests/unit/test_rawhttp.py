"""benchmarks/rawhttp.py, the upload benchmarks' light client, against a scripted server."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import rawhttp


def _read_request(conn: socket.socket, buf: bytearray) -> bytes | None:
    """One request (head and Content-Length body) from ``conn``; None at its end."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    end = buf.index(b"\r\n\r\n") + 4
    head = bytes(buf[:end])
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(buf) < end + length:
        buf += conn.recv(65536)
    request = bytes(buf[: end + length])
    del buf[: end + length]
    return request


@contextmanager
def server(answers: list[list[bytes]]) -> Iterator[tuple[int, list[bytes]]]:
    """Accepts one connection per item of ``answers``; on each, answers its requests with
    that item's answers in turn, then closes it. Yields the port and every request seen."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def serve() -> None:
        for per_connection in answers:
            conn, _ = listener.accept()
            with conn:
                buf = bytearray()
                for answer in per_connection:
                    request = _read_request(conn, buf)
                    if request is None:
                        break
                    seen.append(request)
                    conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], seen
    finally:
        listener.close()
        thread.join(5)


OK = b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello"


def test_keep_alive_one_connection_and_the_request_as_sent() -> None:
    with server([[OK, OK]]) as (port, seen):
        conn = rawhttp.Connection("127.0.0.1", port, timeout=5)
        first = conn.request("PUT", "/v1/x?magic=1", {"Authorization": "Bearer t"}, b"abc")
        second = conn.request("PUT", "/v1/y", {}, b"")
        conn.close()
    assert (first.status, first.body, first.headers["x-a"]) == (201, b"hello", "1")
    assert second.body == b"hello"
    assert seen[0].startswith(b"PUT /v1/x?magic=1 HTTP/1.1\r\n")
    assert b"\r\nAuthorization: Bearer t\r\n" in seen[0]
    assert b"\r\nContent-Length: 3\r\n" in seen[0] and seen[0].endswith(b"\r\n\r\nabc")
    assert seen[1].endswith(b"Content-Length: 0\r\n\r\n")


def test_chunked_answer() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n"
    )
    with server([[chunked, OK]]) as (port, _):
        conn = rawhttp.Connection("127.0.0.1", port, timeout=5)
        assert conn.request("GET", "/", {}).body == b"abcde"
        assert conn.request("GET", "/", {}).body == b"hello"  # the same connection after it
        conn.close()


def test_a_keep_alive_socket_closed_by_the_server_is_opened_again() -> None:
    # the first connection answers once and closes; the second request goes on a new one
    with server([[OK], [OK]]) as (port, seen):
        conn = rawhttp.Connection("127.0.0.1", port, timeout=5)
        assert conn.request("PUT", "/a", {}, b"1").status == 201
        assert conn.request("PUT", "/b", {}, b"2").status == 201
        conn.close()
    assert [r.split(b" ")[1] for r in seen] == [b"/a", b"/b"]


def test_connection_close_in_the_answer_opens_a_new_one() -> None:
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    with server([[closing], [OK]]) as (port, _):
        conn = rawhttp.Connection("127.0.0.1", port, timeout=5)
        assert conn.request("GET", "/", {}).status == 200
        assert conn.request("GET", "/", {}).status == 201
        conn.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\n" + b"X-Big: " + b"a" * rawhttp.MAX_HEAD + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (rawhttp.MAX_BODY + 1),
        b"HTTP/1.1 200 OK\r\n\r\n",  # no length
        b"SMTP 220 hello\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+3\r\nabc\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
        + b"X-T: a\r\n" * (rawhttp.MAX_HEAD // 8 + 1)
        + b"\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\nab",
        b"HTTP/1.1 \xb2\xb2\xb2 OK\r\nContent-Length: 0\r\n\r\n",
    ],
    ids=[
        "head too large",
        "body too large",
        "no length",
        "not HTTP",
        "bad chunk size",
        "signed chunk size",
        "0x chunk size",
        "trailers too large",
        "non-ASCII digit length",
        "non-ASCII digit status",
    ],
)
def test_bad_answers_are_refused(answer: bytes) -> None:
    with server([[answer]]) as (port, _):
        conn = rawhttp.Connection("127.0.0.1", port, timeout=5)
        with pytest.raises(rawhttp.HttpError):
            conn.request("GET", "/", {})
        conn.close()


def test_a_fresh_connection_closed_before_its_answer_is_an_error() -> None:
    with server([[]]) as (port, _):  # accepts, reads nothing, closes
        conn = rawhttp.Connection("127.0.0.1", port, timeout=5)
        with pytest.raises(ConnectionError):
            conn.request("GET", "/", {})


def test_a_failed_retry_closes_the_connection() -> None:
    # the retry's answer is refused with a valid answer behind it in the same packet: that
    # stale answer must not be taken for the next request's, which goes on a new connection
    bad = b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n" + OK
    other = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
    with server([[OK], [bad], [other]]) as (port, seen):
        conn = rawhttp.Connection("127.0.0.1", port, timeout=5)
        assert conn.request("PUT", "/a", {}, b"1").status == 201
        with pytest.raises(rawhttp.HttpError):
            conn.request("PUT", "/b", {}, b"2")  # the closed keep-alive, then the bad answer
        assert conn.request("PUT", "/c", {}, b"3").status == 202
        conn.close()
    assert [r.split(b" ")[1] for r in seen] == [b"/a", b"/b", b"/c"]
