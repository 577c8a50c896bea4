"""A light HTTP/1.1 client for the upload benchmarks: one keep-alive socket, one request at a
time, the request line, headers and body handed to the kernel in one ``sendmsg``.

``httpx`` spends 1.4-1.7 ms of CPU on a 4 KiB PUT on this 2-vCPU machine (upload29e's
section of BENCHMARKS.md): as much as the server it measures, on the same two cores. This
client spends a few tens of µs, so that a benchmark's ratio measures the servers, not its
client. Both pochta and the anchors (Swift) are sent the same requests through it.

What it understands of an answer: a status line, headers (at most ``MAX_HEAD`` bytes), and a
body of ``Content-Length`` bytes (at most ``MAX_BODY``); ``Transfer-Encoding: chunked``
too (the chunks' total at most ``MAX_BODY``, their trailers at most ``MAX_HEAD``).
``Connection: close`` in the answer, or a closed socket before a request, opens a new
connection. Anything else is an error, and closes the connection.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

MAX_HEAD = 64 * 1024
MAX_BODY = 1 << 20


class HttpError(RuntimeError):
    """A malformed, oversized or missing answer."""


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # names lowercased; the last of repeated names
    body: bytes


class Connection:
    """One keep-alive connection to ``host:port``; not thread-safe (one per client thread)."""

    def __init__(self, host: str, port: int, timeout: float = 120.0) -> None:
        self._where = (host, port)
        self._host = f"{host}:{port}".encode()
        self._timeout = timeout
        self._sock: socket.socket | None = None
        self._buf = b""

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self._where, timeout=self._timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock, self._buf = sock, b""
        return sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def request(
        self, method: str, target: str, headers: dict[str, str], body: bytes = b""
    ) -> Answer:
        """Send one request (``Content-Length`` is set from ``body``) and read its answer."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host.decode()}"]
        lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() != "content-length"]
        lines.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        fresh = self._sock is None
        sock = self._sock or self._connect()
        try:
            self._send(sock, head, body)
            return self._answer(sock)
        except ConnectionError:
            self.close()
            if fresh:
                raise
            # a keep-alive socket the server closed while idle: once more on a new one
        except BaseException:
            self.close()
            raise
        sock = self._connect()
        try:
            self._send(sock, head, body)
            return self._answer(sock)
        except BaseException:  # what is left of its answer must not be read as the next's
            self.close()
            raise

    @staticmethod
    def _send(sock: socket.socket, head: bytes, body: bytes) -> None:
        parts = [memoryview(head), memoryview(body)]
        while parts:
            sent = sock.sendmsg(parts)
            while parts and sent >= len(parts[0]):
                sent -= len(parts[0])
                parts.pop(0)
            if parts and sent:
                parts[0] = parts[0][sent:]

    def _fill(self, sock: socket.socket) -> None:
        data = sock.recv(65536)
        if not data:
            raise _ClosedEarly("the server closed the connection")
        self._buf += data

    def _answer(self, sock: socket.socket) -> Answer:
        while (end := self._buf.find(b"\r\n\r\n")) < 0:
            if len(self._buf) > MAX_HEAD:
                raise HttpError(f"an answer's head above {MAX_HEAD} bytes")
            self._fill(sock)
        if end > MAX_HEAD:
            raise HttpError(f"an answer's head above {MAX_HEAD} bytes")
        head, self._buf = self._buf[:end].decode("latin-1"), self._buf[end + 4 :]
        status_line, *header_lines = head.split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not _digits(parts[1]):
            raise HttpError(f"not an HTTP/1.x status line: {status_line[:100]!r}")
        headers: dict[str, str] = {}
        for line in header_lines:
            name, sep, value = line.partition(":")
            if not sep:
                raise HttpError(f"a header line without ':': {line[:100]!r}")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = self._chunked(sock)
        else:
            length = headers.get("content-length")
            if length is None or not _digits(length) or int(length) > MAX_BODY:
                raise HttpError(f"an answer's Content-Length is {length!r}")
            body = self._take(sock, int(length))
        if headers.get("connection", "").lower() == "close":
            self.close()
        return Answer(int(parts[1]), headers, body)

    def _take(self, sock: socket.socket, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill(sock)
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _line(self, sock: socket.socket) -> bytes:
        while (end := self._buf.find(b"\r\n")) < 0:
            if len(self._buf) > MAX_HEAD:
                raise HttpError("a chunk's size line is too long")
            self._fill(sock)
        out, self._buf = self._buf[:end], self._buf[end + 2 :]
        return out

    def _chunked(self, sock: socket.socket) -> bytes:
        out = bytearray()
        while True:
            size_text = self._line(sock).split(b";", 1)[0].strip()
            if not size_text or size_text.strip(b"0123456789abcdefABCDEF"):
                raise HttpError(f"a chunk's size is {size_text[:20]!r}")
            size = int(size_text, 16)
            if size == 0:
                trailers = 0
                while line := self._line(sock):  # trailers, up to the empty line
                    trailers += len(line) + 2
                    if trailers > MAX_HEAD:
                        raise HttpError(f"a chunked answer's trailers above {MAX_HEAD} bytes")
                return bytes(out)
            if len(out) + size > MAX_BODY:
                raise HttpError(f"a chunked answer above {MAX_BODY} bytes")
            out += self._take(sock, size)
            if self._take(sock, 2) != b"\r\n":
                raise HttpError("a chunk not followed by CRLF")


def _digits(text: str) -> bool:
    """Only ASCII digits (``str.isdigit`` takes "²", which ``int`` refuses)."""
    return text.isascii() and text.isdigit()


class _ClosedEarly(HttpError, ConnectionError):
    """The server closed the connection before a whole answer."""
