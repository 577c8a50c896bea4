"""A frozen PostgreSQL (every process SIGSTOPped, as a paused VM: its kernel still answers
TCP, so ``network_timeout`` never fires): a step fails within ``answer_timeout`` (and the
watchdog's next look), as a lost answer, the connection it had is dropped, and once the
server wakes the pool serves again from a new connection."""

from __future__ import annotations

import smtplib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pochta.errors import StorageError
from pochta.postgres.database import PoolSettings, Postgres, lost
from tests.integration.conftest import DELIVERED, start_server
from tests.integration.test_slow_dependency import _users_on
from tests.pgserver import NewDatabase, PostgresServer

pytestmark = pytest.mark.integration

DEADLINE = 1.5
SLACK = 1.0 + 1.0  # the watchdog looks once a second; a loaded machine


@pytest.fixture
def db(postgres_dsn: str) -> Iterator[Postgres]:
    settings = PoolSettings(
        min_size=1,
        max_size=1,
        answer_timeout=DEADLINE,
        connect_timeout=2.0,
        pool_timeout=20.0,
    )
    pool = Postgres.connect(postgres_dsn, settings)
    try:
        yield pool
    finally:
        pool.close()


def backend(db: Postgres) -> int:
    ((pid,),) = db.query("SELECT pg_backend_pid()")
    return int(pid)


def test_a_statement_on_a_frozen_server_fails_within_the_deadline(
    db: Postgres, postgres_server: PostgresServer
) -> None:
    before = backend(db)
    failed: list[BaseException] = []
    took: list[float] = []

    def step() -> None:
        t0 = time.monotonic()
        try:
            db.query("SELECT pg_sleep(0.5), 1")
        except StorageError as exc:
            failed.append(exc)
        took.append(time.monotonic() - t0)

    with postgres_server.paused():
        # frozen while the statement is on its way: sent, never answered
        worker = threading.Thread(target=step)
        worker.start()
        worker.join(DEADLINE + SLACK + 5)
        assert not worker.is_alive(), "the step still waits on the frozen server"
    assert len(failed) == 1, took
    assert DEADLINE <= took[0] < DEADLINE + SLACK
    assert f"no answer within {DEADLINE:g} s" in str(failed[0])
    assert lost(failed[0].__cause__)  # the server may still run it: the caller's to settle
    # awake again: a new connection (the frozen one was dropped, never reused)
    assert backend(db) != before
    assert db.query("SELECT 1") == [(1,)]


def test_a_transaction_on_a_frozen_server_fails_and_is_not_tried_again(
    db: Postgres, postgres_server: PostgresServer
) -> None:
    tries: list[int] = []

    def op(conn: psycopg.Connection[Any]) -> None:
        tries.append(1)
        conn.execute("SELECT 1")
        with postgres_server.paused():
            conn.execute("SELECT 2")  # fails when the socket is shut down

    t0 = time.monotonic()
    with pytest.raises(StorageError, match="no answer within"):
        db.transaction(op)
    assert time.monotonic() - t0 < DEADLINE + SLACK + 0.5
    assert tries == [1]
    assert db.query("SELECT 3") == [(3,)]


def test_a_live_server_slower_than_the_deadline_is_cut_too_unless_told(db: Postgres) -> None:
    """The deadline is the client's: a statement running longer than ``answer_timeout`` on a
    server that works is ended as well (keep it above ``statement_timeout``, which ends a
    slow statement on the server and keeps the connection), but a caller may go without
    (``deadline=False``: a migration, a stream)."""
    with pytest.raises(StorageError, match="no answer within"):
        db.query("SELECT pg_sleep(%s)", (DEADLINE + 1.5,))
    with db.connection(deadline=False) as conn:
        assert conn.execute("SELECT pg_sleep(%s), 7", (DEADLINE + 1.0,)).fetchone() == ("", 7)
    assert db.query("SELECT 1") == [(1,)]


def test_the_check_of_idle_connections_has_a_deadline_too(
    db: Postgres, postgres_server: PostgresServer
) -> None:
    """After an error the pool checks its idle connections (``Postgres.connection``); each
    check is an empty statement, bounded by ``min(answer_timeout, connect_timeout)``."""
    before = backend(db)  # one idle connection now
    with postgres_server.paused():
        t0 = time.monotonic()
        db._pool.check()  # the frozen connection found broken, dropped
        assert time.monotonic() - t0 < DEADLINE + SLACK
    assert backend(db) != before


def test_a_letter_met_by_a_frozen_database_is_answered_451_and_not_kept(
    tmp_path: Path, postgres_server: PostgresServer, new_postgres_db: NewDatabase
) -> None:
    """Through ``pochta serve``: the database frozen after RCPT, so that DATA's steps meet it.
    The letter gets a 451 (never a 250, never a 5xx) within a bounded time, and once the
    server wakes the same letter sent again is stored once."""
    dsn = new_postgres_db()
    data = tmp_path / "data"
    _users_on(data, dsn, "alice@example.org")
    settings = {
        "POCHTA_MAILBOX__BACKEND": "postgres",
        "POCHTA_BLOBS__BACKEND": "postgres",
        "POCHTA_POSTGRES__DSN": dsn,
        "POCHTA_POSTGRES__ANSWER_TIMEOUT": str(DEADLINE),
        "POCHTA_POSTGRES__CONNECT_TIMEOUT": "2",
        "POCHTA_POSTGRES__POOL_TIMEOUT": "3",
        "POCHTA_ANTISPAM__POOL_PROCESSES": "1",
        **DELIVERED,  # the 451 at the end of DATA (queued: 250, the letter retried)
    }
    srv = start_server(data, tmp_path / "serve.log", settings=settings)
    raw = (
        b"From: a@example.net\r\nTo: alice@example.org\r\nSubject: frozen\r\n"
        b"Message-ID: <frozen-1@example.net>\r\n\r\nhello\r\n"
    )
    try:
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=120) as smtp:
            smtp.ehlo()
            smtp.mail("a@example.net")
            assert smtp.rcpt("alice@example.org")[0] == 250
            with postgres_server.paused():
                t0 = time.monotonic()
                code, reply = smtp.data(raw)  # the final reply, whatever its code
                took = time.monotonic() - t0
        assert code == 451, reply
        assert took < 30, f"DATA answered after {took:.1f} s"
        with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=60) as smtp:
            smtp.sendmail("a@example.net", ["alice@example.org"], raw)  # 250, or raises
        with psycopg.connect(dsn) as conn:
            rows = conn.execute(
                "SELECT count(*) FROM pochta.letters WHERE subject = 'frozen' AND state = 1"
            ).fetchall()
        assert rows == [(1,)]
    finally:
        srv.stop()
    print(f"DATA with the database frozen: 451 after {took:.1f} s")
