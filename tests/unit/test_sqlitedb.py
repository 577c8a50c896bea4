"""The SQLite layer (pochta.sqlitedb): one writer with group commit, reads on their own
connections. Real SQLite files under tmp_path."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from pochta.errors import ConfigError, PochtaError, StorageError
from pochta.sqlitedb import SQLiteDatabase

SCHEMA = "CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT NOT NULL);"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SQLiteDatabase]:
    database = SQLiteDatabase(tmp_path / "t.sqlite3", SCHEMA)
    yield database
    database.close()


def insert(k: int, v: str = "x") -> Callable[[sqlite3.Connection], int]:
    def step(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT INTO t (k, v) VALUES (?, ?)", (k, v))
        return k

    return step


def keys(db: SQLiteDatabase) -> list[int]:
    return [row[0] for row in db.query("SELECT k FROM t ORDER BY k")]


class Boom(Exception):
    pass


def hold_the_writer(
    db: SQLiteDatabase, pool: ThreadPoolExecutor
) -> tuple[threading.Event, Future[int]]:
    """Start a write that keeps the writer busy until the returned event is set, so that the
    writes submitted meanwhile queue up and go together in the next group."""
    started, gate = threading.Event(), threading.Event()

    def slow(conn: sqlite3.Connection) -> int:
        started.set()
        assert gate.wait(10)
        conn.execute("INSERT INTO t (k, v) VALUES (0, 'slow')")
        return 0

    future = pool.submit(db.write, slow)
    assert started.wait(10)
    return gate, future


def test_a_write_returns_its_value_and_is_read_back(db: SQLiteDatabase) -> None:
    assert db.write(insert(1, "one")) == 1
    assert db.query("SELECT v FROM t WHERE k = ?", (1,)) == [("one",)]


def test_another_thread_reads_a_committed_write(db: SQLiteDatabase) -> None:
    assert db.query("SELECT count(*) FROM t") == [(0,)]  # this thread's reader is open
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(db.write, insert(7)).result()
        assert pool.submit(keys, db).result() == [7]
    assert keys(db) == [7]


def test_a_failing_write_reaches_its_caller_and_leaves_nothing(db: SQLiteDatabase) -> None:
    def bad(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t (k, v) VALUES (5, 'half')")
        raise Boom("no")

    with pytest.raises(Boom, match="no"):
        db.write(bad)
    assert keys(db) == []
    assert db.write(insert(6)) == 6  # the writer carries on
    assert keys(db) == [6]


def test_many_threads_writing_at_once_all_land(db: SQLiteDatabase) -> None:
    start = threading.Barrier(16)

    def client(t: int) -> list[int]:
        start.wait()
        seen = []
        for i in range(30):
            k = t * 100 + i
            assert db.write(insert(k)) == k
            seen.append(db.query("SELECT k FROM t WHERE k = ?", (k,))[0][0])  # read your write
        return seen

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(client, range(16)))
    expected = [t * 100 + i for t in range(16) for i in range(30)]
    assert sorted(k for seen in results for k in seen) == expected
    assert keys(db) == expected


def test_writes_queued_meanwhile_go_together(db: SQLiteDatabase) -> None:
    ran_on: dict[int, tuple[int, int]] = {}

    def tagged(k: int) -> Callable[[sqlite3.Connection], int]:
        caller = threading.get_ident()

        def step(conn: sqlite3.Connection) -> int:
            ran_on[k] = (caller, threading.get_ident())
            conn.execute("INSERT INTO t (k, v) VALUES (?, 'q')", (k,))
            return k

        return step

    with ThreadPoolExecutor(max_workers=11) as pool:
        gate, slow = hold_the_writer(db, pool)
        futures = [pool.submit(lambda k: db.write(tagged(k)), k) for k in range(1, 11)]
        time.sleep(0.3)  # let them queue behind the slow write
        gate.set()
        assert [f.result(timeout=10) for f in futures] == list(range(1, 11))
        assert slow.result(timeout=10) == 0
    assert keys(db) == list(range(11))
    # at least one write was run by another caller's thread: they shared a group
    assert any(caller != runner for caller, runner in ran_on.values())


def test_a_failing_write_does_not_undo_the_others_in_its_group(db: SQLiteDatabase) -> None:
    def bad(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT INTO t (k, v) VALUES (99, 'half')")
        raise Boom("only mine")

    with ThreadPoolExecutor(max_workers=8) as pool:
        gate, slow = hold_the_writer(db, pool)
        good = [pool.submit(db.write, insert(k)) for k in (1, 2, 3)]
        failing = pool.submit(db.write, bad)
        more = [pool.submit(db.write, insert(k)) for k in (4, 5, 6)]
        time.sleep(0.3)
        gate.set()
        assert [f.result(timeout=10) for f in good + more] == [1, 2, 3, 4, 5, 6]
        with pytest.raises(Boom, match="only mine"):
            failing.result(timeout=10)
        assert slow.result(timeout=10) == 0
    assert keys(db) == [0, 1, 2, 3, 4, 5, 6]


def test_a_constraint_violation_reaches_only_its_caller(db: SQLiteDatabase) -> None:
    db.write(insert(1))
    with ThreadPoolExecutor(max_workers=4) as pool:
        gate, slow = hold_the_writer(db, pool)
        dup = pool.submit(db.write, insert(1, "again"))
        ok = pool.submit(db.write, insert(2))
        time.sleep(0.2)
        gate.set()
        with pytest.raises((sqlite3.IntegrityError, StorageError)):
            dup.result(timeout=10)
        assert ok.result(timeout=10) == 2
        slow.result(timeout=10)
    assert db.query("SELECT k, v FROM t ORDER BY k") == [(0, "slow"), (1, "x"), (2, "x")]


def test_two_handles_on_one_file_see_each_other(tmp_path: Path) -> None:
    """Another process on the same file is another SQLiteDatabase: SQLite's lock serializes."""
    first = SQLiteDatabase(tmp_path / "shared.sqlite3", SCHEMA)
    second = SQLiteDatabase(tmp_path / "shared.sqlite3", SCHEMA)
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            a = pool.submit(lambda: [first.write(insert(k)) for k in range(0, 100, 2)])
            b = pool.submit(lambda: [second.write(insert(k)) for k in range(1, 100, 2)])
            a.result(timeout=30)
            b.result(timeout=30)
        assert keys(first) == keys(second) == list(range(100))
    finally:
        first.close()
        second.close()


def test_closed_database_refuses_work(tmp_path: Path) -> None:
    database = SQLiteDatabase(tmp_path / "t.sqlite3", SCHEMA)
    database.write(insert(1))
    database.close()
    database.close()  # twice is fine
    with pytest.raises(StorageError):
        database.write(insert(2))
    with pytest.raises(StorageError):
        database.query("SELECT k FROM t")


def test_the_schema_is_applied_once_and_data_survives_reopening(tmp_path: Path) -> None:
    database = SQLiteDatabase(tmp_path / "t.sqlite3", SCHEMA)
    database.write(insert(1))
    database.close()
    database = SQLiteDatabase(tmp_path / "t.sqlite3", SCHEMA)
    try:
        assert keys(database) == [1]
        assert database.query("PRAGMA journal_mode") == [("wal",)]
    finally:
        database.close()


def test_an_unusable_path_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(ConfigError):
        SQLiteDatabase(tmp_path / "file" / "t.sqlite3", SCHEMA)


# -- a full disk ----------------------------------------------------------------------------
def fill(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO t (v) VALUES (?)", ("y" * 20_000,))


def test_a_full_database_is_a_storage_error_and_the_writer_survives(db: SQLiteDatabase) -> None:
    """SQLITE_FULL (here: max_page_count) rolls back the whole transaction. The caller must
    get a StorageError (a foreign error translated at the adapter), and later writes work."""
    db.write(lambda conn: conn.execute("PRAGMA max_page_count = 16"))
    errors: list[BaseException] = []
    for _ in range(20):
        try:
            db.write(fill)
        except BaseException as exc:  # collected and checked below
            errors.append(exc)
    assert errors, "the database never filled up"
    assert all(isinstance(e, StorageError) for e in errors), [repr(e) for e in errors]
    db.write(lambda conn: conn.execute("DELETE FROM t").close())
    assert db.write(insert(10_000)) == 10_000  # the writer survived


GROUP_ON_A_FULL_DISK = """
import sqlite3, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from pochta.sqlitedb import SQLiteDatabase

db = SQLiteDatabase(Path(sys.argv[1]), "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT);")
db.write(lambda conn: conn.execute("PRAGMA max_page_count = 16"))
gate = threading.Event()

def slow(conn):
    gate.wait(10)

def fill(conn):
    conn.execute("INSERT INTO t (v) VALUES (?)", ("y" * 20_000,))

def small(conn):
    conn.execute("INSERT INTO t (v) VALUES ('z')")

def outcome(fn):
    try:
        db.write(fn)
        return "ok"
    except Exception as exc:
        return type(exc).__name__

with ThreadPoolExecutor(max_workers=12) as pool:
    first = pool.submit(outcome, slow)
    time.sleep(0.1)
    futures = [pool.submit(outcome, fill if i % 2 else small) for i in range(10)]
    time.sleep(0.3)
    gate.set()
    results = [first.result()] + [f.result() for f in futures]
print(" ".join(results))
"""


def test_a_full_database_in_a_group_answers_every_caller(tmp_path: Path) -> None:
    """Writes grouped with one that hits SQLITE_FULL: every caller gets an answer (its value or
    a PochtaError), none waits forever. Run in a child process so a hang cannot stall the
    suite."""
    script = tmp_path / "group.py"
    script.write_text(textwrap.dedent(GROUP_ON_A_FULL_DISK))
    try:
        done = subprocess.run(
            [sys.executable, str(script), str(tmp_path / "full.sqlite3")],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a caller grouped with a write that hit SQLITE_FULL never got an answer")
    assert done.returncode == 0, done.stderr
    outcomes = done.stdout.split()
    assert len(outcomes) == 11
    assert set(outcomes) <= {"ok"} | {c.__name__ for c in _pochta_errors()}, outcomes
    assert "ok" in outcomes


def _pochta_errors() -> list[type[PochtaError]]:
    found: list[type[PochtaError]] = []
    todo: list[type[PochtaError]] = [PochtaError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found
