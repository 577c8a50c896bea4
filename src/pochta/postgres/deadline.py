"""A client-side deadline on a connection's answers: a server that is frozen rather than gone
(SIGSTOP, a paused VM, a stalled disk) keeps its TCP connections open, its kernel
acknowledging every packet and keepalive, so neither libpq's ``tcp_user_timeout`` nor
keepalives fire, and its own ``statement_timeout`` is not enforced while it is stopped: a
statement would wait for as long as the server is frozen. psycopg has no client-side
timeout (a cancel request would go to the frozen server too).

``Watchdog.arm`` notes a connection with its deadline; ``disarm`` (the step is over) drops it.
One thread per watchdog wakes at the earliest deadline (at least once a second) and shuts
down the socket of every connection still armed past its deadline: the blocked read
returns at once, libpq finds the connection closed, psycopg raises ``OperationalError`` and
the connection is broken for good (the pool discards it). The socket is reached through a
duplicate of the connection's descriptor taken when it was armed (``os.dup`` of the public
``conn.fileno()``), never through the number itself: libpq closes its descriptor when it
finds a connection broken, and the number may belong to another socket by the time the
deadline passes. The duplicate is closed when the step is disarmed.

What a fired deadline means for the step is what a broken connection means: the server may
still run and commit the statement when it wakes (its answer is lost).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Protocol

log = logging.getLogger("pochta.postgres")

TICK = 1.0  # seconds the watchdog sleeps at most between two looks


class HasFileno(Protocol):
    def fileno(self) -> int: ...

    def close(self) -> None: ...


class Watch:
    """One armed step: its own descriptor of the connection's socket, its deadline."""

    __slots__ = ("at", "fd", "fired")

    def __init__(self, fd: int, at: float) -> None:
        self.fd = fd
        self.at = at  # time.monotonic()
        self.fired = False


def shut_down(fd: int) -> None:
    """Both directions of the socket behind ``fd`` shut down (``fd`` stays open: its owner
    closes it)."""
    sock = socket.socket(fileno=fd)
    try:
        with contextlib.suppress(OSError):  # already closed by the peer: nothing to do
            sock.shutdown(socket.SHUT_RDWR)
    finally:
        sock.detach()


class Watchdog:
    """Deadlines for steps on connections; its thread starts with the first ``arm`` and
    ends with ``close``."""

    def __init__(self, name: str = "pochta-postgres-deadline") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._armed: set[Watch] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.fired = 0  # how many deadlines passed (for tests and logs)

    def arm(self, conn: HasFileno, seconds: float) -> Watch | None:
        """``conn``'s socket shut down if the step is not disarmed within ``seconds``;
        None (nothing armed) for ``seconds`` <= 0."""
        if seconds <= 0:
            return None
        watch = Watch(os.dup(conn.fileno()), time.monotonic() + seconds)
        with self._lock:
            self._armed.add(watch)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
        return watch

    def disarm(self, watch: Watch) -> bool:
        """The step is over; True if its deadline had passed (its connection is shut down:
        close it, never use it again)."""
        with self._lock:
            self._armed.discard(watch)
        # after the lock: a firing holds it while it uses the descriptor
        os.close(watch.fd)
        return watch.fired

    @contextlib.contextmanager
    def watching(self, conn: HasFileno, seconds: float) -> Iterator[Watch | None]:
        """``arm`` for the block, ``disarm`` at its end; a connection whose deadline passed
        is closed there (its socket is shut down: it is never used again)."""
        watch = self.arm(conn, seconds)
        try:
            yield watch
        finally:
            if watch is not None and self.disarm(watch):
                conn.close()

    def fire_due(self, now: float) -> float:
        """Shut down every connection past its deadline at ``now``; the seconds until the
        next deadline (``TICK`` at most)."""
        with self._lock:
            due = [w for w in self._armed if w.at <= now]
            for watch in due:
                self._armed.discard(watch)
                watch.fired = True
                shut_down(watch.fd)
            self.fired += len(due)
            nearest = min((w.at for w in self._armed), default=now + TICK)
        if due:
            log.warning("%s: no answer in time on %d connection(s): shut down", self.name, len(due))
        return min(TICK, max(0.0, nearest - now))

    def _run(self) -> None:
        wait = TICK
        while not self._stop.wait(wait):
            wait = self.fire_due(time.monotonic())

    def close(self) -> None:
        """Stop the thread (steps still armed are not watched any more)."""
        self._stop.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
