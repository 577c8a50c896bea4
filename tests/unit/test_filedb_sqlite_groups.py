"""The embedded FileDB's group commit: steps that arrive while the file is busy go together
in one transaction, and each caller still gets exactly its own outcome (the contract suite
checks the arithmetic; here, what sharing a transaction must not change)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.blobs.keys import key_of
from pochta.errors import BlobNotFound, StorageError
from pochta.types import FileFlag, FileRecord, Space

KEYS = [key_of(f"grouped {i}".encode()) for i in range(6)]
REFUSED = key_of(b"a key the file refuses")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "filedb.sqlite3"


@pytest.fixture
def db(path: Path) -> Iterator[SQLiteFileDB]:
    filedb = SQLiteFileDB(path, synchronous="normal")
    yield filedb
    filedb.close()


@contextmanager
def file_busy(path: Path) -> Iterator[None]:
    """Another connection holds the file's write lock: the first step's BEGIN IMMEDIATE waits
    and every step submitted meanwhile queues behind it."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield
        other.execute("COMMIT")
    finally:
        other.close()


def wait_for(what: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not what():
        assert time.monotonic() < deadline, "the steps never queued"
        time.sleep(0.005)


def leading(
    pool: ThreadPoolExecutor, db: SQLiteFileDB, call: Callable[[], FileRecord]
) -> Future[FileRecord]:
    """Submit the step that leads (and waits for the busy file); return once it holds the
    writer's one slot (``_group`` is this FileDB's own batcher)."""
    future = pool.submit(call)
    wait_for(lambda: db._group._free == 0)
    return future


def queue_holds(db: SQLiteFileDB, n: int) -> Callable[[], bool]:
    return lambda: len(db._group._queue) == n


def queued(
    pool: ThreadPoolExecutor, db: SQLiteFileDB, calls: list[Callable[[], FileRecord]]
) -> list[Future[FileRecord]]:
    """Submit the steps one by one, each only once the one before is queued: they wait in
    this order behind the leader, and the next group takes them all."""
    futures = []
    for n, call in enumerate(calls, start=1):
        futures.append(pool.submit(call))
        wait_for(queue_holds(db, n))
    return futures


def test_a_refused_step_fails_alone_and_the_others_of_its_group_land(
    db: SQLiteFileDB, path: Path
) -> None:
    db.upsert(REFUSED, 1, 1)
    for key in KEYS[:3]:
        db.upsert(key, 10, 1)
    with sqlite3.connect(path, isolation_level=None) as conn:  # SQLite says no to one key
        conn.execute(
            "CREATE TRIGGER no_more BEFORE UPDATE ON live"
            f" WHEN NEW.key = X'{REFUSED}' BEGIN SELECT RAISE(ABORT, 'refused here'); END"
        )
    conn.close()
    with ThreadPoolExecutor(max_workers=12) as pool, file_busy(path):
        first = leading(pool, db, lambda: db.inc(KEYS[0], 1))  # waits for the lock
        rest = queued(
            pool,
            db,
            [
                lambda: db.inc(KEYS[1], 2),
                lambda: db.inc(REFUSED, 3),
                lambda: db.dec(KEYS[2], 10),  # moves it to space1
                lambda: db.inc(KEYS[4], 4),  # never uploaded
                lambda: db.upsert(KEYS[5], 5, 2),
            ],
        )
    assert first.result(timeout=10) == FileRecord(KEYS[0], 2, 11, FileFlag.NONE, 1)
    assert rest[0].result(timeout=10) == FileRecord(KEYS[1], 2, 12, FileFlag.NONE, 1)
    with pytest.raises(StorageError, match="refused here"):
        rest[1].result(timeout=10)
    assert rest[2].result(timeout=10).space is Space.DELETED
    with pytest.raises(BlobNotFound):
        rest[3].result(timeout=10)
    assert rest[4].result(timeout=10) == FileRecord(KEYS[5], 1, 5, FileFlag.NONE, 2)
    assert db.get(REFUSED) == FileRecord(REFUSED, 1, 1, FileFlag.NONE, 1)
    assert db.get(KEYS[1]) == FileRecord(KEYS[1], 2, 12, FileFlag.NONE, 1)
    assert db.get(KEYS[4]) is None


def test_steps_on_one_key_in_one_group_see_each_other_in_order(
    db: SQLiteFileDB, path: Path
) -> None:
    key = KEYS[0]
    with ThreadPoolExecutor(max_workers=12) as pool, file_busy(path):
        lead = leading(pool, db, lambda: db.upsert(KEYS[1], 9, 1))
        steps = queued(
            pool,
            db,
            [
                lambda: db.upsert(key, 7, 3, op=b"up"),
                lambda: db.inc(key, 5, op=b"one"),
                lambda: db.inc(key, 5, op=b"one"),  # the same op: a replay, counted once
                lambda: db.dec(key, 7),
                lambda: db.inc(key, 1, op=b"lost"),
                lambda: db.dec(key, 1),
                lambda: db.dec(key, 5),  # nothing left: moved
                lambda: db.inc(key, 1, op=b"late"),  # not live any more: nothing journaled
            ],
        )
    lead.result(timeout=10)
    got = [f.exception(timeout=10) or f.result() for f in steps]
    assert got[:6] == [
        FileRecord(key, 1, 7, FileFlag.NONE, 3),
        FileRecord(key, 2, 12, FileFlag.NONE, 3),
        FileRecord(key, 2, 12, FileFlag.NONE, 3),
        FileRecord(key, 1, 5, FileFlag.NONE, 3),
        FileRecord(key, 2, 6, FileFlag.NONE, 3),
        FileRecord(key, 1, 5, FileFlag.NONE, 3),
    ]
    assert isinstance(got[6], FileRecord) and got[6].space is Space.DELETED
    assert isinstance(got[7], BlobNotFound)
    assert db.applied([b"up", b"one", b"lost", b"late"]) == {b"up", b"one", b"lost"}


def test_many_threads_count_every_step_once(db: SQLiteFileDB) -> None:
    for key in KEYS:
        db.upsert(key, 1, 1)
    per_thread = 200

    def work(t: int) -> None:
        for i in range(per_thread):
            key = KEYS[(t + i) % len(KEYS)]
            db.inc(key, 2, op=f"{t}-{i}".encode())
            if i % 3 == 0:
                db.inc(key, 2, op=f"{t}-{i}".encode())  # a replay
            if i % 2 == 0:
                db.dec(key, 2)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts = {key: (r.counter, r.magic) for key in KEYS if (r := db.get(key)) is not None}
    assert sum(c - 1 for c, _ in counts.values()) == 12 * per_thread // 2
    assert all(magic == (1 + 2 * (counter - 1)) for counter, magic in counts.values())
