"""The deadline on a connection's answers (pochta.postgres.deadline), on socket pairs: a
read blocked on a socket whose deadline passed returns, a step disarmed in time keeps its
socket, and the watchdog acts on the socket it was given even after its descriptor number
was closed and given to another socket."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from pochta.postgres.deadline import TICK, Watchdog


@pytest.fixture
def watchdog() -> Iterator[Watchdog]:
    dog = Watchdog()
    yield dog
    dog.close()


def test_a_read_waiting_past_its_deadline_returns(watchdog: Watchdog) -> None:
    ours, server = socket.socketpair()  # the server never answers: frozen
    with ours, server:
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(ours.recv(100)))
        t0 = time.monotonic()
        watch = watchdog.arm(ours, 0.3)
        assert watch is not None
        reader.start()
        reader.join(5)
        took = time.monotonic() - t0
        assert not reader.is_alive()
        assert got == [b""]  # end of file: what libpq takes for a connection closed
        assert 0.3 <= took < 2.0  # the deadline, and the watchdog's next look (within 1 s)
        assert watchdog.disarm(watch) is True
        assert watchdog.fired == 1
        with pytest.raises(BrokenPipeError):
            ours.send(b"x")  # shut down both ways


def test_a_step_disarmed_in_time_keeps_its_socket(watchdog: Watchdog) -> None:
    ours, server = socket.socketpair()
    with ours, server:
        watch = watchdog.arm(ours, 0.2)
        assert watch is not None
        assert watchdog.disarm(watch) is False
        assert watchdog.fire_due(time.monotonic() + 3600) > 0  # nothing armed any more
        ours.sendall(b"ping")
        assert server.recv(4) == b"ping"
        assert watchdog.fired == 0


def test_no_deadline_arms_nothing(watchdog: Watchdog) -> None:
    ours, server = socket.socketpair()
    with ours, server:
        assert watchdog.arm(ours, 0) is None


def test_the_earliest_deadline_fires_first(watchdog: Watchdog) -> None:
    a, a_peer = socket.socketpair()
    b, b_peer = socket.socketpair()
    with a, a_peer, b, b_peer:
        now = time.monotonic()
        wa = watchdog.arm(a, 100)
        wb = watchdog.arm(b, 200)
        assert wa is not None and wb is not None
        assert watchdog.fire_due(now + 150) == TICK  # b: 50 s on, but a look each second
        assert wa.fired and not wb.fired
        b.sendall(b"1")
        assert b_peer.recv(1) == b"1"
        assert a_peer.recv(1) == b""  # a's peer sees it closed
        assert watchdog.disarm(wa) and not watchdog.disarm(wb)


def test_a_descriptor_number_reused_meanwhile_is_not_touched(watchdog: Watchdog) -> None:
    """libpq closes its descriptor when it finds the connection broken; a socket opened after
    may get the same number before the deadline passes. The watchdog holds a descriptor of
    its own, so it shuts down the connection it was given, never the newcomer."""
    ours, server = socket.socketpair()
    number = ours.fileno()
    watch = watchdog.arm(ours, 100)
    assert watch is not None
    ours.close()  # as libpq does
    other, other_peer = socket.socketpair()
    with server, other, other_peer:
        assert number in (other.fileno(), other_peer.fileno())  # the lowest free number
        watchdog.fire_due(time.monotonic() + 101)
        assert watch.fired
        assert server.recv(1) == b""  # the connection given was shut down
        other.sendall(b"ok")
        assert other_peer.recv(2) == b"ok"  # the newcomer works
        watchdog.disarm(watch)
