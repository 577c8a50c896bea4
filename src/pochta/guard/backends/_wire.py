"""The lock hot path's own way of talking to a plain Redis: one thread, one socket, RESP by hand.

redis-py opens the connection (so authentication, database selection, TLS and the protocol
handshake are its own); then this thread sends packed commands and parses the replies itself,
on a blocking socket whose timeouts are kernel socket options. A script call is then exactly
one ``send`` and one ``recv`` system call; through redis-py 8 it is a dozen (a readiness poll
when a pooled connection is checked out, a ``poll`` before every send and receive because the
socket has a timeout, ``getpid`` checks). On a loopback round trip that is most of the time.
"""

from __future__ import annotations

import socket
import ssl
import struct
import weakref
from collections.abc import Sequence
from typing import Any

from redis import exceptions as rx

ERRORS: dict[bytes, type[rx.ResponseError]] = {
    b"NOSCRIPT": rx.NoScriptError,
    b"READONLY": rx.ReadOnlyError,
    b"LOADING": rx.BusyLoadingError,  # type: ignore[dict-item]  # a ConnectionError too
    b"TRYAGAIN": rx.TryAgainError,
}


def pack(commands: Sequence[Sequence[object]]) -> bytes:
    out: list[bytes] = []
    for args in commands:
        out.append(b"*%d\r\n" % len(args))
        for arg in args:
            if type(arg) is str:
                data = arg.encode()
            elif type(arg) is bytes:
                data = arg
            else:
                data = str(arg).encode()
            out += (b"$%d\r\n" % len(data), data, b"\r\n")
    return b"".join(out)


class Wire:
    """A connected redis-py ``Connection`` whose socket this thread now drives."""

    def __init__(self, conn: Any, pid: int) -> None:
        connect = getattr(conn, "connect_check_health", None)
        if connect is not None:  # redis-py >= 6: one attempt; the guard has its own policy
            connect(check_health=True, retry_socket_connect=False)
        else:
            conn.connect()
        self.conn = conn
        self.pid = pid
        self.sock: socket.socket = conn._sock
        # the socket closes with this object (or at exit), whatever the connection's cycles
        weakref.finalize(self, self.sock.close)
        self.timeout: float | None = conn.socket_timeout
        self._buf = bytearray()
        self._pos = 0
        self._tls = isinstance(self.sock, ssl.SSLSocket)
        if not self._tls:
            self.sock.settimeout(None)
        self.set_timeout(self.timeout)

    def set_timeout(self, seconds: float | None) -> None:
        if self._tls:
            self.sock.settimeout(seconds)
            return
        whole = int(seconds or 0)
        tv = struct.pack("ll", whole, int(((seconds or 0) - whole) * 1_000_000))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)

    def exchange(self, commands: Sequence[Sequence[object]]) -> list[Any]:
        """Send ``commands`` at once and read one reply each (errors come back as exception
        objects). OSError when the connection fails or times out."""
        self.sock.sendall(pack(commands))
        return [self._reply() for _ in commands]

    def close(self) -> None:
        self.conn.disconnect()

    # -- RESP2 and RESP3 replies ------------------------------------------------------------------
    def _fill(self) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("redis closed the connection")
        self._buf += chunk

    def _line(self) -> bytes:
        while True:
            end = self._buf.find(b"\r\n", self._pos)
            if end >= 0:
                line = bytes(self._buf[self._pos : end])
                self._pos = end + 2
                return line
            self._fill()

    def _exactly(self, n: int) -> bytes:
        while len(self._buf) - self._pos < n + 2:
            self._fill()
        data = bytes(self._buf[self._pos : self._pos + n])
        self._pos += n + 2
        return data

    def _reply(self) -> Any:
        while True:
            line = self._line()
            kind, rest = line[:1], line[1:]
            if kind != b">":
                break
            for _ in range(int(rest)):  # a RESP3 push (a notification): not a reply
                self._reply()
        if kind == b":" or kind == b"(":
            return int(rest)
        if kind in (b"$", b"=", b"!"):
            n = int(rest)
            data = None if n < 0 else self._exactly(n)
            return rx.ResponseError(data.decode()) if kind == b"!" and data else data
        if kind in (b"*", b"~"):
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        if kind == b"%":
            return {self._reply(): self._reply() for _ in range(int(rest))}
        if kind == b"+":
            return rest
        if kind == b"_":
            return None
        if kind == b"#":
            return rest == b"t"
        if kind == b",":
            return float(rest)
        if kind == b"-":
            error = ERRORS.get(rest.split(b" ", 1)[0], rx.ResponseError)
            return error(rest.decode(errors="replace"))
        raise rx.InvalidResponse(f"unexpected reply from redis: {line[:40]!r}")
