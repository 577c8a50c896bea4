"""A step whose answer was lost (README "Several machines": the primary lost mid-step, a
standby promoted): ``Postgres.until_answered`` runs it again on a new connection, and a
delivery's finishing step counts what its lost first try may have committed. The server
here cuts the pool's connections (``pg_terminate_backend``, as a dying primary does);
tests/integration/test_several_machines.py loses a real primary under Patroni.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pochta.errors import StorageError
from pochta.mailbox.index.postgres import PostgresIndex
from pochta.postgres.database import PoolSettings, Postgres, describe, lost
from pochta.types import LetterMeta, NewStoredLetter

pytestmark = pytest.mark.integration


@pytest.fixture
def db(postgres_dsn: str) -> Iterator[Postgres]:
    # one connection: once a statement was answered it is the pool's only one, idle, and no
    # new one is on its way that a cut could miss
    pool = Postgres.connect(postgres_dsn, PoolSettings(min_size=1, max_size=1))
    try:
        yield pool
    finally:
        pool.close()


def cut(dsn: str) -> int:
    """Every connection of pochta's pools to this database terminated by the server: the
    next statement on each finds it gone. How many were cut."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'pochta'"
            " AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def test_a_cut_connection_is_a_lost_answer_and_the_step_runs_again(
    db: Postgres, postgres_dsn: str
) -> None:
    assert db.query("SELECT 1") == [(1,)]  # the pool's connection is open
    assert cut(postgres_dsn) >= 1
    with pytest.raises(StorageError) as plain:  # a step run once: the caller's to settle
        db.query("SELECT 1")
    assert lost(plain.value.__cause__)
    assert db.query("SELECT 1") == [(1,)]  # a new connection, and the pool's only one
    assert cut(postgres_dsn) == 1
    tries: list[int] = []

    def step(conn: psycopg.Connection[Any]) -> int:
        tries.append(1)
        row = conn.execute("SELECT 41 + 1").fetchone()
        assert row is not None
        return int(row[0])

    assert db.until_answered(step) == 42
    assert len(tries) == 2  # the cut connection's try, then a new connection's


def test_an_error_of_the_statement_is_not_tried_again(db: Postgres) -> None:
    tries: list[int] = []

    def step(conn: psycopg.Connection[Any]) -> None:
        tries.append(1)
        conn.execute("SELECT no_such_column FROM pochta.letters")

    with pytest.raises(StorageError, match="no_such_column"):
        db.until_answered(step)
    assert tries == [1]


def test_no_answer_within_the_failover_timeout_is_an_error(postgres_dsn: str) -> None:
    pool = Postgres.connect(
        postgres_dsn, PoolSettings(min_size=1, max_size=1, failover_timeout=0.5)
    )
    try:
        tries: list[int] = []

        def step(conn: psycopg.Connection[Any]) -> None:
            tries.append(1)
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")  # always lost

        with pytest.raises(StorageError):
            pool.until_answered(step)
        assert len(tries) >= 2
    finally:
        pool.close()


def deliveries(index: PostgresIndex, n: int) -> list[int]:
    user = index.add_user("a@example.org", "h")
    meta = LetterMeta(size=10, received=1.0, date=2.0, sender="s@x.test", subject="hi")
    return index.begin_delivery(b"skel", meta, [NewStoredLetter(user.id, "Inbox", ())] * n)


def test_finishing_a_delivery_whose_answer_was_lost_counts_what_was_committed(
    db: Postgres, postgres_dsn: str
) -> None:
    """The first try's UPDATE was committed for some letters (a primary lost after its
    commit: the standby has it) and its answer lost: the letters DELIVERED count as
    finished, the rest are finished now, and the caller hears all of them."""
    index = PostgresIndex(db)
    ids = deliveries(index, 3)
    db.execute("UPDATE pochta.letters SET state = 1 WHERE id = %s", (ids[0],))  # committed
    cut(postgres_dsn)
    assert index.finish_delivery(ids) == 3
    assert index.pending(ids) == []
    assert index.finish_delivery(ids) == 0  # with every answer there: nothing left


def test_a_queued_delivery_finished_after_a_lost_answer_records_its_id_with_its_letters(
    db: Postgres, postgres_dsn: str
) -> None:
    """smtp.answer = "queued": the finishing step, run again after a lost answer, makes the
    letters DELIVERED and records the queue entry's id in one transaction. A failure between
    the two (here the id's row refused by a trigger; a crash in production) leaves neither,
    never letters delivered without the id the runner looks up before trying again."""
    index = PostgresIndex(db)
    ids = deliveries(index, 2)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION pochta.refuse() RETURNS trigger LANGUAGE plpgsql AS"
            " $$BEGIN RAISE EXCEPTION 'refused'; END$$"
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON pochta.queued"
            " FOR EACH ROW EXECUTE FUNCTION pochta.refuse()"
        )
    try:
        cut(postgres_dsn)
        with pytest.raises(StorageError, match="refused"):
            index.finish_delivery(ids, queued="0123456789abcdef")
        assert not index.was_queued("0123456789abcdef")
        assert sorted(i for i, _ in index.pending(ids)) == sorted(ids)  # not finished either
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("DROP TRIGGER refuse ON pochta.queued")
            conn.execute("DROP FUNCTION pochta.refuse()")
    cut(postgres_dsn)
    assert index.finish_delivery(ids, queued="0123456789abcdef") == 2
    assert index.was_queued("0123456789abcdef") and index.pending(ids) == []


def test_an_abandoned_letter_is_not_finished_after_a_lost_answer(
    db: Postgres, postgres_dsn: str
) -> None:
    index = PostgresIndex(db)
    ids = deliveries(index, 2)
    assert index.abandon(ids[1:], []) == 1  # undone meanwhile (older than the grace)
    cut(postgres_dsn)
    assert index.finish_delivery(ids) == 1  # fewer: the delivery then answers 451


ANSWER = 1.5  # postgres.answer_timeout in the tests below


def slow_commit(dsn: str, seconds: float, *, fail: bool = False) -> None:
    """Every COMMIT that wrote a letter takes ``seconds`` (a deferred trigger: it runs at
    COMMIT, before the commit is made, as a synchronous standby's wait holds its answer) and
    then is made, or with ``fail`` rolled back: past ``answer_timeout`` its answer is lost
    either way."""
    end = "RAISE EXCEPTION 'refused at commit'" if fail else "NULL"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION pochta.slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$"
            f" BEGIN PERFORM pg_sleep({seconds}); {end}; RETURN NULL; END $$"
        )
        conn.execute(
            "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON pochta.letters"
            " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pochta.slow_commit()"
        )


def stored(dsn: str) -> list[tuple[int, int]]:
    with psycopg.connect(dsn) as conn:
        return [
            (int(i), int(state))
            for i, state in conn.execute("SELECT id, state FROM pochta.letters ORDER BY id")
        ]


@pytest.fixture
def slow_db(postgres_dsn: str) -> Iterator[Postgres]:
    settings = PoolSettings(min_size=1, max_size=2, answer_timeout=ANSWER, failover_timeout=30)
    pool = Postgres.connect(postgres_dsn, settings)
    try:
        yield pool
    finally:
        pool.close()


def test_a_delivery_whose_commit_was_made_but_its_answer_lost_is_acknowledged(
    slow_db: Postgres, postgres_dsn: str
) -> None:
    """A letter written DELIVERED in one step (no attachment) whose COMMIT answered after
    ``answer_timeout``: the server made it, so the delivery must not fail (the SMTP client
    would get a 451 and send it again: the letter twice). The index waits for the old server
    process to end and finds the letters by their ids."""
    index = PostgresIndex(slow_db)
    user = index.add_user("a@example.org", "h")
    meta = LetterMeta(size=10, received=1.0, date=2.0, sender="s@x.test", subject="hi")
    slow_commit(postgres_dsn, ANSWER + 2.5)
    t0 = time.monotonic()
    ids = index.begin_delivery(b"skel", meta, [NewStoredLetter(user.id, "Inbox", ())] * 2,
                               delivered=True)  # fmt: skip
    took = time.monotonic() - t0
    assert stored(postgres_dsn) == [(i, 1) for i in ids]
    assert ANSWER + 2.5 <= took < 30, took  # the answer lost, then the commit waited for


def test_a_delivery_whose_commit_failed_after_its_answer_was_lost_fails(
    slow_db: Postgres, postgres_dsn: str
) -> None:
    index = PostgresIndex(slow_db)
    user = index.add_user("a@example.org", "h")
    meta = LetterMeta(size=10, received=1.0, date=2.0, sender="s@x.test", subject="hi")
    slow_commit(postgres_dsn, ANSWER + 2.5, fail=True)
    with pytest.raises(StorageError, match="no answer within"):
        index.begin_delivery(b"skel", meta, [NewStoredLetter(user.id, "Inbox", ())],
                             delivered=True)  # fmt: skip
    assert stored(postgres_dsn) == []


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        (
            "postgresql://pochta:pw@10.0.0.1:5432,10.0.0.4:5433/mail?target_session_attrs=read-write",
            "postgres pochta@10.0.0.1:5432,10.0.0.4:5433/mail",
        ),
        ("host=a,b port=6000 user=u dbname=d password=pw", "postgres u@a:6000,b:6000/d"),
        ("postgresql://u:pw@db/d", "postgres u@db:5432/d"),
    ],
)
def test_every_server_of_a_dsn_is_named_and_no_password(dsn: str, shown: str) -> None:
    assert describe(dsn) == shown
