"""The known-clients contract (which clients logged into which account): in memory, embedded
(SQLite) and Redis (one server and a Cluster) pass the same suite on their own clocks.

A new backend joins by adding a branch to ``open_known``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pochta.errors import InvalidInput
from pochta.guard.known import KnownClients
from pochta.guard.known.memory import MemoryKnownClients
from pochta.guard.known.redis import RedisKnownClients
from pochta.guard.known.sqlite import SqliteKnownClients
from pochta.types import KnownClientsBackend
from tests.servers import RedisCluster, RedisServer

KNOWN_KINDS = [
    "memory",
    "sqlite",
    pytest.param("redis", marks=pytest.mark.integration),
    pytest.param("cluster", marks=pytest.mark.integration),
]
SECRET = b"contract-test-secret-0123456789"
ALICE, BOB = "alice@example.com", "bob@example.com"
BINDING = "0123456789abcdef0123456789abcdef"

NewBackend = Callable[[], KnownClientsBackend]


def open_known(kind: str, request: pytest.FixtureRequest, where: Path) -> NewBackend:
    if kind == "memory":
        shared = MemoryKnownClients()
        return lambda: shared
    if kind == "sqlite":
        return lambda: SqliteKnownClients(where / "known.sqlite3")
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        request.getfixturevalue("redis_client")  # flushed
        return lambda: RedisKnownClients(server.client())
    if kind == "cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        request.getfixturevalue("redis_cluster_client")  # flushed
        return lambda: RedisKnownClients(cluster.client())
    raise ValueError(kind)


@pytest.fixture(params=KNOWN_KINDS)
def new_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[NewBackend]:
    make = open_known(request.param, request, tmp_path)
    opened: list[KnownClientsBackend] = []

    def tracked() -> KnownClientsBackend:
        backend = make()
        opened.append(backend)
        return backend

    yield tracked
    for backend in opened:
        backend.close()


def test_marks_are_found_until_they_expire(new_backend: NewBackend) -> None:
    a, b, c, x = (f"{{t}}{name}" for name in "abcx")  # one hash tag: one Cluster slot
    backend = new_backend()
    assert backend.known([a, b]) == [False, False] and backend.known([]) == []
    asked = time.monotonic()
    backend.remember([a, b], 1.0)
    written = time.monotonic()  # the marks expire 1.0 s after a moment between these two
    backend.remember([c], 60.0)
    alive = backend.known([a, x, b, c]), new_backend().known([c, a])  # another client too
    if time.monotonic() - asked >= 1.0:
        pytest.skip("the machine took over 1 s for three store calls: no read of a live mark")
    assert alive == ([True, False, True, True], [True, True])
    time.sleep(max(0.0, written + 1.2 - time.monotonic()))
    assert backend.known([a, b, c]) == [False, False, True]
    backend.remember([a], 60.0)  # renewed
    backend.forget([c, x])
    assert backend.known([a, c]) == [True, False]


def test_known_clients_are_addresses_and_networks_of_one_account(new_backend: NewBackend) -> None:
    known = KnownClients(new_backend(), SECRET, remember_for=60.0)
    assert known.known(ALICE, BINDING, "192.0.2.10") is None
    known.remember(ALICE, BINDING, "192.0.2.10")
    assert known.known(ALICE, BINDING, "192.0.2.10") == "address"
    assert known.known(ALICE.upper().lower(), BINDING, "::ffff:192.0.2.10") == "address"
    assert known.known(ALICE, BINDING, "192.0.2.99") == "network"
    assert known.known(ALICE, BINDING, "192.0.3.10") is None
    assert known.known(BOB, BINDING, "192.0.2.10") is None  # another account
    assert known.known(ALICE, "f" * 32, "192.0.2.10") is None  # another password
    assert KnownClients(new_backend(), b"another-secret-0123456789", remember_for=60.0).known(
        ALICE, BINDING, "192.0.2.10"
    ) is None
    known.forget(ALICE, BINDING, "192.0.2.10")
    assert known.known(ALICE, BINDING, "192.0.2.10") is None


def test_no_address_or_email_is_stored(tmp_path: Path) -> None:
    backend = SqliteKnownClients(tmp_path / "known.sqlite3")
    try:
        KnownClients(backend, SECRET, remember_for=60.0).remember(ALICE, BINDING, "192.0.2.10")
    finally:
        backend.close()
    stored = b"".join(f.read_bytes() for f in tmp_path.iterdir())  # the file and its WAL
    assert b"192.0.2" not in stored and b"alice" not in stored and BINDING.encode() not in stored


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(InvalidInput):
        KnownClients(MemoryKnownClients(), b"short", remember_for=60.0)
