"""The incoming queue (``smtp.answer = "queued"``): its record, its store, its runner."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.errors import ConfigError, StorageError
from pochta.mailbox import queueadmin, queuedb, queuerunner
from pochta.mailbox.index.sqlite import SQLiteIndex
from pochta.mailbox.queue import BadRecord, Entry, backoff, decode, encode, new_id, over
from pochta.mailbox.queuedb import HELD, Due, QueueStore
from pochta.mailbox.queuerunner import QueueRunner
from pochta.server.smtp import DeliveryHandler
from pochta.types import Envelope, LetterMeta, NewStoredLetter

text = st.text(max_size=40)
entries = st.builds(
    Entry,
    id=st.just("0123456789abcdef") | st.builds(new_id),
    sender=text,
    recipients=st.lists(text, min_size=1, max_size=5).map(tuple),
    ip=st.none() | text,
    helo=st.none() | text,
    trace=st.binary(max_size=300),
    size=st.integers(0, 1 << 40),
    at=st.floats(0, 2e9),
)


@given(entries)
def test_a_record_reads_back_as_its_entry(entry: Entry) -> None:
    assert decode(encode(entry)) == entry


@given(entries, st.data())
@settings(max_examples=200)
def test_a_record_cut_short_or_damaged_is_refused(entry: Entry, data: st.DataObject) -> None:
    record = encode(entry)
    cut = data.draw(st.integers(0, len(record) - 1))
    with pytest.raises(BadRecord):
        decode(record[:cut])
    at = data.draw(st.integers(0, len(record) - 1))
    flip = data.draw(st.integers(1, 255))
    damaged = record[:at] + bytes([record[at] ^ flip]) + record[at + 1 :]
    with pytest.raises(BadRecord):
        decode(damaged)


@given(st.binary(max_size=200))
def test_any_bytes_are_an_entry_or_refused(junk: bytes) -> None:
    """Never another exception (a crash loop at start-up): BadRecord, or bytes that are a
    record of an entry."""
    try:
        got = decode(junk)
    except BadRecord:
        return
    assert decode(encode(got)) == got


def test_backoff_doubles_up_to_its_most() -> None:
    assert [backoff(n, 30, 3600) for n in (1, 2, 3, 8, 100)] == [30, 60, 120, 3600, 3600]
    assert over(10, 0, max_letters=10, max_bytes=5) and over(0, 5, max_letters=10, max_bytes=5)
    assert not over(9, 4, max_letters=10, max_bytes=5)


def entry(size: int, queue_id: str | None = None) -> Entry:
    return Entry(
        queue_id or new_id(), "s@x.test", ("a@example.org",), "192.0.2.1", "h", b"T\r\n", size, 1.0
    )


def test_the_store_keeps_letters_in_rows_and_big_ones_in_files(tmp_path: Path) -> None:
    store = QueueStore(tmp_path / "q", inline=100)
    small = entry(5)
    store.put(small, b"hello")
    spooled = tmp_path / "spooled.letter"
    spooled.write_bytes(b"x" * 500)
    big = entry(500)
    store.put(big, spooled)
    assert not spooled.exists() and (store.letters, store.bytes) == (2, 505)
    got = {d.entry.id: d for d in store.due(2.0, 10, set())}
    assert got[small.id].letter == b"hello" and got[small.id].entry == small
    assert isinstance(got[big.id].letter, Path) and got[big.id].letter.read_bytes() == b"x" * 500
    assert [d.entry.id for d in store.due(2.0, 10, {small.id})] == [big.id]
    store.retry(got[small.id], 100.0)
    assert [d.entry.id for d in store.due(2.0, 10, set())] == [big.id]
    assert store.next_due({big.id}) == 100.0
    store.done(got[big.id])
    assert (store.letters, store.bytes) == (1, 5)
    assert got[big.id].letter.exists()  # type: ignore[union-attr]
    assert big.id not in {d.entry.id for d in store.due(1e300, 10, set())}  # done: not read
    store.put(entry(1), b"z")  # its row goes with the next letter's commit, then its file
    assert not got[big.id].letter.exists()  # type: ignore[union-attr]
    (last,) = [d for d in store.due(2.0, 10, set()) if d.entry.size == 1]
    store.retry(last, HELD)  # held: never due again, and no longer counted toward the limits
    assert store.next_due(set()) == 100.0
    assert (store.letters, store.bytes) == (1, 5)
    store.flush()
    assert store.pending_removals() == 0
    store.close()
    again = QueueStore(tmp_path / "q", inline=100)  # a restart: the slot's letters are there
    assert (again.letters, again.bytes, again.own.n) == (1, 5, 0)  # the held one not counted
    (due,) = again.due(1000.0, 10, set())
    assert due.entry == small and due.attempts == 1
    assert len(list(again.entries())) == 2  # the held one is kept
    again.close()


def test_an_unreadable_entry_is_moved_aside_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = QueueStore(tmp_path / "q", inline=100)
    bad, cut, fine = entry(5), entry(500), entry(3)
    store.put(bad, b"hello")
    spooled = tmp_path / "s.letter"
    spooled.write_bytes(b"y" * 500)
    store.put(cut, spooled)
    store.put(fine, b"abc")
    store.own.file(cut.id).write_bytes(b"y" * 10)  # cut short
    with sqlite3.connect(tmp_path / "q" / "0.sqlite3") as conn:
        conn.execute("UPDATE queue SET record = x'00112233445566' WHERE id = ?", (bad.id,))
    with caplog.at_level(logging.ERROR, "pochta.queue"):
        assert [d.entry.id for d in store.due(2.0, 10, set())] == [fine.id]
    assert sum("moved aside" in r.getMessage() for r in caplog.records) == 2
    assert (tmp_path / "q" / "aside" / store.own.file(cut.id).name).exists()
    assert [d.entry.id for d in store.due(2.0, 10, set())] == [fine.id]  # not tried again
    assert store.letters == 1
    store.close()


class Crash(BaseException):
    """The process dies here (nothing after it runs, nothing catches it)."""


@pytest.mark.parametrize("crash_at", [1, 2])
def test_a_crash_while_an_entry_is_moved_aside_never_loses_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at: int
) -> None:
    """Moving an unreadable entry aside takes two steps (its file into aside/, its row into
    the aside table), in whichever order: the process dies at the first or the second, then
    starts again (its orphan files dropped) and reads the queue. The letter's bytes are kept,
    in aside/ with the row aside, whatever the step the crash came at."""
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    cut = entry(500)
    spooled = tmp_path / "s.letter"
    spooled.write_bytes(b"y" * 500)
    store.put(cut, spooled)
    name = store.own.file(cut.id).name
    store.own.file(cut.id).write_bytes(b"y" * 10)  # cut short: moved aside at the next read
    steps = 0

    def step() -> None:
        nonlocal steps
        steps += 1
        if steps == crash_at:
            raise Crash

    rename = Path.rename

    def renaming(self: Path, target: Any) -> Path:
        if self.name == name:
            step()
        return rename(self, target)

    write = store.own.db.write

    def writing(op: Any) -> Any:
        step()
        return write(op)

    monkeypatch.setattr(Path, "rename", renaming)
    monkeypatch.setattr(store.own.db, "write", writing)
    with pytest.raises(Crash):
        store.due(2.0, 10, set())
    assert steps == crash_at
    monkeypatch.undo()
    store.close()  # the process is gone (its lock let go of)
    again = QueueStore(root, inline=100)  # the start drops orphan files
    assert again.due(2.0, 10, set()) == []  # moved aside now, if it was not
    assert (root / "aside" / name).read_bytes() == b"y" * 10
    assert not (root / "files" / name).exists()
    with sqlite3.connect(root / "0.sqlite3") as conn:
        assert conn.execute("SELECT id FROM aside").fetchall() == [(cut.id,)]
        assert conn.execute("SELECT count(*) FROM queue").fetchone() == (0,)
    again.close()


def test_a_server_taking_a_slot_as_another_lets_go_of_it_is_told_as_its_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server lets go of its slot (it stops, or an adopted slot is empty) while another
    takes it: the one that took it must hold both locks, its ``flock`` and the OFD lock by
    which commands tell a live server's slot. Letting go of the ``flock`` first, the OFD
    lock after, gave the taker the ``flock`` alone (its OFD lock refused for the moment, and
    never taken again): for as long as it ran, ``pochta queue`` listed its slot as no
    server's and other servers starting waited 2 s for it."""
    root = tmp_path / "q"
    first = QueueStore(root, inline=100)
    fd = first.own._lock_fd
    taken: list[int | None] = []
    close = os.close

    def closing(n: int) -> None:
        if n == fd and not taken:  # the slot let go of: a server starts at that moment
            taken.append(queuedb._try_lock(root, 0))
        close(n)

    monkeypatch.setattr(os, "close", closing)
    first.close()
    monkeypatch.undo()
    assert taken, "the slot's lock file was not closed"
    second = taken[0] if taken[0] is not None else queuedb._try_lock(root, 0)
    assert second is not None
    try:
        assert queuedb.owned(root, 0)  # told as a live server's slot
    finally:
        os.close(second)


def test_a_dead_processs_slot_is_adopted_and_its_orphan_files_dropped(tmp_path: Path) -> None:
    first = QueueStore(tmp_path / "q", inline=100)
    second = QueueStore(tmp_path / "q", inline=100)
    assert (first.own.n, second.own.n) == (0, 1)  # the lock of slot 0 is held
    left = entry(2)
    first.put(left, b"hi")
    orphan = first.own.file(new_id())
    orphan.write_bytes(b"never answered")
    assert second.adopt() == 0  # slot 0's process lives
    first.close()  # it dies
    assert second.adopt() == 1
    assert not orphan.exists()
    (due,) = second.due(2.0, 10, set())
    assert due.entry == left and due.slot == 0
    second.done(due)
    second.adopt()  # empty now: let go of
    third = QueueStore(tmp_path / "q", inline=100)
    assert third.own.n == 0
    third.close()
    second.close()


class Attempts:
    def __init__(self, outcomes: list[str]) -> None:
        self.outcomes = outcomes
        self.seen: list[str] = []

    async def __call__(self, due: Due) -> str:
        self.seen.append(due.entry.id)
        return self.outcomes.pop(0) if self.outcomes else "done"


def runner(store: QueueStore, was: object = None, **kw: Any) -> QueueRunner:
    return QueueRunner(
        store,
        deliveries=4,
        retry_first=kw.pop("retry", 0.05),
        retry_most=1.0,
        max_letters=int(kw.pop("max_letters", 100)),
        max_bytes=1000,
        was_delivered=was if callable(was) else (lambda queue_id: False),
        **kw,  # forget, remember_seconds
    )


def delivered_from_queue(index: SQLiteIndex, user: int, queue_id: str) -> None:
    """A delivery of the queue's entry ``queue_id`` committed in the index (what a crash
    before the entry's row was removed leaves)."""
    meta = LetterMeta(2, 1.0, None, "s", "x")
    index.begin_delivery(
        b"s", meta, [NewStoredLetter(user, "Inbox", ())], delivered=True, queued=queue_id
    )


async def until(condition: object, timeout: float = 30.0) -> None:  # CI: -n 2 at load ~4
    assert callable(condition)
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)


def test_a_queued_letter_already_delivered_is_removed_not_delivered_again(tmp_path: Path) -> None:
    """A crash after the delivery's commit, before its queue row was removed: the index
    knows the queue id (recorded in the delivery's own transaction), so the entry found at
    start-up is removed and the letter is not stored twice."""
    index = SQLiteIndex(tmp_path / "mailbox.sqlite3")
    user = index.add_user("a@example.org", "h")
    store = QueueStore(tmp_path / "q", inline=100)
    done, waiting = entry(2), entry(3)
    store.put(done, b"hi")
    store.put(waiting, b"abc")
    delivered_from_queue(index, user.id, done.id)
    attempts = Attempts([])

    async def main() -> None:
        r = runner(store, index.was_queued)
        r.start(attempts)
        await until(lambda: store.letters == 0)
        await r.stop()

    asyncio.run(main())
    assert attempts.seen == [waiting.id]  # the delivered one was not tried
    store.close()
    index.close()


def test_a_retry_recorded_while_the_loop_reads_when_the_next_is_due_is_not_lost(
    tmp_path: Path,
) -> None:
    """The loop reads the earliest due time in a thread; a try that ends meanwhile records its
    retry's time, which that read (made before) does not see: it must not overwrite it, or the
    letter waits for the next letter queued (CI saw one wait past 30 s)."""
    store = QueueStore(tmp_path / "q", inline=100)
    read = store.next_due

    def slow_next_due(skip: set[str]) -> float | None:
        found = read(skip)
        time.sleep(0.3)  # the try ends while this read is under way
        return found

    store.next_due = slow_next_due  # type: ignore[method-assign]
    attempts = Attempts(["retry"])

    async def main() -> None:
        r = runner(store)
        r.start(attempts)
        await asyncio.sleep(0.1)  # the loop's first read of the queue: in slow_next_due
        first = entry(2)
        await r.put(first, b"hi")  # handed over at once, fails once
        await until(lambda: store.letters == 0, timeout=5.0)
        assert attempts.seen == [first.id] * 2
        await r.stop()

    asyncio.run(main())


def test_the_runner_retries_drops_holds_and_the_limits_hold(tmp_path: Path) -> None:
    store = QueueStore(tmp_path / "q", inline=100)
    attempts = Attempts(["retry", "retry"])

    async def main() -> None:
        r = runner(store, max_letters=3)
        r.start(attempts)
        first = entry(2)
        await r.put(first, b"hi")  # handed over at once, fails twice, then done
        await until(lambda: store.letters == 0)
        assert attempts.seen == [first.id] * 3
        attempts.outcomes = ["hold", "drop"]
        held, dropped = entry(2), entry(2)
        await r.put(held, b"hi")
        await r.put(dropped, b"hi")
        await until(lambda: store.letters == 0 and len(attempts.seen) == 5)
        assert [e for e, _, _ in store.entries()] == [held.id]  # kept, not counted
        await asyncio.sleep(0.2)
        assert len(attempts.seen) == 5  # the held one is not tried again
        await r.stop()
        limited = runner(store, max_letters=1)  # not started: letters wait in the queue
        assert not limited.full()
        await limited.put(entry(2), b"hi")
        assert limited.full()  # one letter: at the limit
        assert not runner(store, max_letters=3).full()
        assert runner(store, max_letters=3).full(more=1000)  # max_bytes: 1000

    asyncio.run(main())
    store.close()


def test_a_letter_the_loop_finds_while_it_is_being_queued_is_tried_once(tmp_path: Path) -> None:
    """The loop reads the queue in a thread; a letter just committed may come back from that
    read before :meth:`QueueRunner.put` hands it over itself: it is tried once (the race cost
    4 letters of 300 delivered twice in a benchmark before it was closed)."""

    class SlowPut(QueueStore):
        def put(self, entry: Entry, letter: bytes | Path) -> None:
            super().put(entry, letter)
            time.sleep(0.5)  # committed; the runner's loop reads the queue meanwhile

    store = SlowPut(tmp_path / "q", inline=100)
    seen: list[str] = []

    async def attempt(due: Due) -> str:
        seen.append(due.entry.id)
        await asyncio.sleep(0.2)  # the first letter's try ends while the second is queued
        return "done"

    async def main() -> None:
        r = runner(store)
        r.start(attempt)
        first, second = entry(2), entry(2)
        await r.put(first, b"hi")
        await r.put(second, b"hi")
        await until(lambda: store.letters == 0)
        await asyncio.sleep(0.3)
        await r.stop()
        assert sorted(seen) == sorted([first.id, second.id])

    asyncio.run(main())
    store.close()


def test_a_slot_database_that_cannot_be_read_is_moved_aside_not_a_crash_loop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    store.put(entry(2), b"hi")
    store.close()
    (root / "0.sqlite3").write_bytes(b"this is not a database" * 300)
    with caplog.at_level(logging.ERROR, "pochta.queue"):
        again = QueueStore(root, inline=100)
    assert "moved aside" in caplog.text
    assert again.letters == 0 and list(root.glob("0.sqlite3.unreadable-*"))
    again.put(entry(2), b"ok")  # a new, working slot
    assert again.letters == 1
    again.close()


def test_the_files_of_a_slot_database_moved_aside_are_kept_aside_not_deleted(
    tmp_path: Path,
) -> None:
    """A big letter answered 250 is in a file; its row is in the slot's database, which is
    then found damaged at the next start and moved aside. The file's row is in that database
    (kept for an operator), not in the new one: the file is no orphan, it goes aside too."""
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    spooled = tmp_path / "big.letter"
    spooled.write_bytes(b"z" * 500)
    big = entry(500)
    store.put(big, spooled)
    name = store.own.file(big.id).name
    store.close()
    for suffix in ("-wal", "-shm"):
        (root / f"0.sqlite3{suffix}").unlink(missing_ok=True)
    (root / "0.sqlite3").write_bytes(b"this is not a database" * 300)
    again = QueueStore(root, inline=100)
    try:
        assert list(root.glob("0.sqlite3.unreadable-*"))
        assert (root / "aside" / name).read_bytes() == b"z" * 500  # the letter's bytes kept
        assert not (root / "files" / name).exists()
    finally:
        again.close()


def test_a_letter_whose_client_left_while_it_was_queued_is_delivered_all_the_same(
    tmp_path: Path,
) -> None:
    """aiosmtpd cancels the handler when the client goes away; the write in its thread goes on
    and commits the row. The runner must then read the queue: before, it learnt nothing and
    the letter waited (an idle server: until a restart)."""

    class SlowPut(QueueStore):
        def put(self, entry: Entry, letter: bytes | Path) -> None:
            time.sleep(0.5)  # the runner's first read of the queue is over by then
            super().put(entry, letter)

    store = SlowPut(tmp_path / "q", inline=100)
    attempts = Attempts([])

    async def main() -> None:
        r = runner(store)
        r.start(attempts)
        left = entry(2)
        putting = asyncio.ensure_future(r.put(left, b"hi"))
        await asyncio.sleep(0.1)
        putting.cancel()  # the client went away
        with pytest.raises(asyncio.CancelledError):
            await putting
        await until(lambda: attempts.seen == [left.id], timeout=20.0)
        await until(lambda: store.letters == 0)
        await r.stop()

    asyncio.run(main())
    store.close()


def test_a_letter_that_comes_while_the_server_stops_gets_a_temporary_failure(
    tmp_path: Path,
) -> None:
    """A connection still open after the runner stopped: a StorageError (451 at the edge),
    not the RuntimeError of a shut-down pool (aiosmtpd's "500 Error": final for a sender)."""
    store = QueueStore(tmp_path / "q", inline=100)

    async def main() -> None:
        r = runner(store)
        r.start(Attempts([]))
        await r.stop()
        with pytest.raises(StorageError):
            await r.put(entry(2), b"hi")

    asyncio.run(main())
    assert store.letters == 0
    store.close()


def test_an_unexpected_failure_to_queue_is_a_451_never_a_5xx(tmp_path: Path) -> None:
    class Broken:
        def full(self, more: int = 0) -> bool:
            return False

        async def put(self, entry: Entry, letter: bytes | Path) -> None:
            raise RuntimeError("cannot schedule new futures after shutdown")

    class Sizes:
        def check_size(self, size: int) -> None:
            return None

    handler = DeliveryHandler(Sizes(), None, "mx.test", False, queue=Broken())  # type: ignore[arg-type]
    envelope = Envelope(ip="192.0.2.1", sender="s@x.test", recipients=("a@example.org",))
    reply = asyncio.run(handler._enqueue(b"T\r\n", b"hi", new_id(), envelope, "h"))
    assert reply.startswith("451 ")


def test_a_slot_database_that_cannot_be_opened_for_a_passing_reason_keeps_its_letters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of file handles, an I/O error: the slot is not damaged, and moving it aside would
    leave letters that got 250 where nothing delivers them. The error is raised (a start
    fails; an adoption is tried again by the runner's loop); the letters are there after."""
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    kept = entry(2)
    store.put(kept, b"hi")
    store.close()

    def cannot_open(path: Path, schema: str, **kw: object) -> None:
        try:
            sqlite3.connect(tmp_path / "no" / "such" / "dir.sqlite3")  # SQLITE_CANTOPEN
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open database {path}: {exc}") from exc

    with monkeypatch.context() as m:
        m.setattr("pochta.mailbox.queuedb.SQLiteDatabase", cannot_open)
        with pytest.raises(ConfigError):
            QueueStore(root, inline=100)
    assert not list(root.glob("*.unreadable-*"))
    again = QueueStore(root, inline=100)
    assert [d.entry for d in again.due(2.0, 10, set())] == [kept]
    again.close()


def test_a_letter_whose_failed_try_could_not_be_written_is_tried_again(tmp_path: Path) -> None:
    """The row of a try whose outcome could not be written is as it was: due. The runner
    must read it again (after a pause); before, nothing told it to, and the letter waited."""

    class FailsOnce(QueueStore):
        failed = False

        def retry(self, due: Due, at: float) -> None:
            if not self.failed:
                self.failed = True
                raise StorageError("writing 0.sqlite3: disk I/O error")
            super().retry(due, at)

    store = FailsOnce(tmp_path / "q", inline=100)
    attempts = Attempts(["retry"])

    async def main() -> None:
        r = runner(store)
        r.start(attempts)
        letter = entry(2)
        await r.put(letter, b"hi")
        await until(lambda: attempts.seen == [letter.id] * 2, timeout=20.0)
        await until(lambda: store.letters == 0)
        await r.stop()

    asyncio.run(main())
    store.close()


def test_reading_the_queue_does_not_read_the_letters_it_skips(tmp_path: Path) -> None:
    """Rows of letters done wait for the next commit to be deleted (an adopted slot's for up
    to a minute under load), and the runner reads the queue after every try: the letters of
    the rows it skips must not be read into memory at each read (50 x 100 kB here)."""
    store = QueueStore(tmp_path / "q", inline=1 << 20)
    body = b"x" * 100_000
    for _ in range(51):
        store.put(entry(len(body)), body)
    for due in store.due(2.0, 50, set()):
        store.done(due)  # done; rows not deleted yet
    tracemalloc.start()
    try:
        (left,) = store.due(2.0, 1, set())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert left.letter == body
    assert peak < 1_000_000  # one letter read, not 51
    store.close()


def test_a_queue_that_cannot_be_read_is_read_again_with_a_growing_pause_and_one_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A damaged page fails every read of the queue: before, a read and a traceback every
    second for as long as it lasted (86,400 a day); now 1 s doubled up to a minute, one
    traceback then a line each."""

    class Damaged(QueueStore):
        reads = 0

        def due(self, now: float, limit: int, skip: set[str]) -> list[Due]:
            self.reads += 1
            raise StorageError("reading 0.sqlite3: database disk image is malformed")

    store = Damaged(tmp_path / "q", inline=100)

    stalled: list[float] = []

    async def main() -> None:
        r = runner(store)
        r.start(Attempts([]))
        # the loop also wakes every 2 s within a pause (queue/changed): such a wake, at 5 s,
        # ended the failures' run (back to a 1 s pause and a traceback at 7 s, the watch idle)
        await asyncio.sleep(6.0)
        stalled.append(r.watch().stalled)
        await asyncio.sleep(1.5)
        await r.stop()

    with caplog.at_level(logging.ERROR, "pochta.queue"):
        asyncio.run(main())
    tracebacks = [rec for rec in caplog.records if rec.exc_info]
    # at 0, 1, 3 and 7 s (before: 0, 1, 2, 3, ...)
    assert len(tracebacks) == 1 and store.reads <= 4, (len(tracebacks), store.reads)
    assert stalled[0] >= 5.0  # no read has worked since the start
    store.close()


def test_a_restart_long_after_a_crash_looks_its_entries_up_before_it_forgets(
    tmp_path: Path,
) -> None:
    """A crash after a delivery's commit, before its row was removed; the server starts again
    more than queue_remember_days later (or its clock jumped). Before, the runner forgot
    the old ids first, then read the row, found nothing and delivered the letter again."""
    long_ago = time.time() - 40 * 86400
    index = SQLiteIndex(tmp_path / "mailbox.sqlite3", clock=lambda: long_ago)
    user = index.add_user("a@example.org", "h")
    store = QueueStore(tmp_path / "q", inline=100)
    done = entry(2)
    store.put(done, b"hi")
    delivered_from_queue(index, user.id, done.id)
    attempts = Attempts([])

    async def main() -> None:
        r = runner(
            store, index.was_queued, forget=index.forget_queued, remember_seconds=30 * 86400.0
        )
        r.start(attempts)
        await until(lambda: store.letters == 0)
        await r.stop()

    asyncio.run(main())
    assert attempts.seen == []  # found delivered: not stored twice
    store.close()
    index.close()


def test_a_letter_done_twice_is_counted_out_once(tmp_path: Path) -> None:
    """A read of the queue that began before a handed-over letter's try ended may try it
    again (found delivered in the index: done). The queue's count must not go down twice
    (its limits would drift: one more letter let in each time)."""
    store = QueueStore(tmp_path / "q", inline=100)
    store.put(entry(2), b"hi")
    store.put(entry(3), b"abc")
    first, _ = store.due(2.0, 10, set())
    store.done(first)
    store.done(first)
    assert (store.letters, store.bytes) == (1, 5 - first.entry.size)  # the other one
    store.close()


@pytest.mark.parametrize("kept", [256, 2])
def test_letters_queued_while_every_try_is_busy_are_tried_in_order_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: int
) -> None:
    """Letters queued while all ``deliveries`` tries are under way wait in memory and are
    handed over as tries end: in the order they were queued, each once, never looked up in
    the index nor read back from the queue (they were never tried). Past the limit of
    letters kept (``kept`` = 2), the others are read back and looked up, still each once."""
    monkeypatch.setattr(queuerunner, "WAITING_LETTERS", kept)
    store = QueueStore(tmp_path / "q", inline=100)
    looked: list[str] = []
    read: list[str] = []
    due = store.due

    def reading(now: float, limit: int, skip: set[str]) -> list[Due]:
        got = due(now, limit, skip)
        read.extend(d.entry.id for d in got)
        return got

    store.due = reading  # type: ignore[method-assign]
    seen: list[str] = []
    go = asyncio.Event()

    async def attempt(d: Due) -> str:
        seen.append(d.entry.id)
        await go.wait()
        return "done"

    def was(queue_id: str) -> bool:
        looked.append(queue_id)
        return False

    async def main() -> None:
        r = runner(store, was)  # 4 tries at once
        r.start(attempt)
        await asyncio.sleep(0.1)  # the loop's first read of the (empty) queue
        letters = [entry(2) for _ in range(10)]
        for e in letters:
            await r.put(e, b"hi")
        assert seen == [e.id for e in letters[:4]]
        go.set()
        await until(lambda: store.letters == 0)
        await r.stop()
        assert sorted(seen) == sorted(e.id for e in letters)  # each once
        if kept == 256:
            assert seen == [e.id for e in letters]
            assert looked == read == []
        else:  # 2 waited in memory; the 4 after them were read back and looked up
            assert seen[:6] == [e.id for e in letters[:6]]
            assert sorted(looked) == sorted(read) == sorted(e.id for e in letters[6:])

    asyncio.run(main())
    store.close()


def test_a_try_that_ends_while_the_slot_is_counted_again_does_not_stop_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pochta queue retry`` or ``drop`` makes the runner count its slot again, which reads
    every row of the slot under the store's lock (0.2-0.3 s for 300 letters of 1 MB kept in
    their rows, more at ``queue_max_bytes``). A try that ends meanwhile marks its letter done
    on the loop: it must not wait there for that lock (every SMTP and IMAP session of the
    process would wait with it); its letter is done all the same, counted out once."""
    monkeypatch.setattr(queuerunner, "CHANGES_SECONDS", 0.05)
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    scanning = threading.Event()
    query = store.own.db.query

    def slow(sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if sql.startswith("SELECT id, size FROM queue"):  # recount's read of every row
            scanning.set()
            time.sleep(1.0)  # a big slot
        return query(sql, params)

    store.own.db.query = slow  # type: ignore[method-assign]
    go = asyncio.Event()

    async def attempt(d: Due) -> str:
        await go.wait()
        return "done"

    async def main() -> None:
        r = runner(store)
        r.start(attempt)
        await asyncio.sleep(0.1)
        await r.put(entry(2), b"hi")  # its try waits for go
        queueadmin.tell(root)  # as a command does: the runner counts its slot again
        await until(scanning.is_set)
        go.set()  # the try ends while the recount holds the lock
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.sleep(0.05)
        assert loop.time() - start < 0.5  # the loop went on meanwhile
        await until(lambda: store.letters == 0 and not store.pending_removals())
        await r.stop()

    asyncio.run(main())
    assert store.letters == 0 and store.bytes == 0
    store.close()
