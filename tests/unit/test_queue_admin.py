"""The incoming queue from outside its servers (pochta.mailbox.queueadmin, ``pochta queue``):
list, retry, drop beside a live runner; the backup's copy; the runner's watch for /healthz."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.unit.test_queue import Attempts, entry, runner, until
from typer.testing import CliRunner

from pochta.cli import app as cli
from pochta.errors import InvalidInput, NotFound, StorageError
from pochta.mailbox import queueadmin, queuedb, queuerunner
from pochta.mailbox.queuedb import HELD, Due, QueueStore


def held_and_waiting(store: QueueStore, tmp_path: Path) -> tuple[str, str, str]:
    """Three letters in ``store``: one held (in a file), one waiting (a row), one retrying."""
    spooled = tmp_path / "big.letter"
    spooled.write_bytes(b"x" * 500)
    held, waiting, later = entry(500), entry(2), entry(3)
    store.put(held, spooled)
    store.put(waiting, b"hi")
    store.put(later, b"abc")
    for due in store.due(1e12, 10, {waiting.id}):
        store.retry(due, HELD if due.entry.id == held.id else 1e12)
    return held.id, waiting.id, later.id


def test_a_command_lists_retries_and_drops_beside_a_live_slot(tmp_path: Path) -> None:
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)  # a live server's slot: its lock is held
    held, waiting, later = held_and_waiting(store, tmp_path)
    items = {x.id: x for x in queueadmin.listing(root)}
    assert set(items) == {held, waiting, later}
    assert items[held].held and not items[waiting].held and items[held].live
    assert items[held].entry is not None and items[held].entry.recipients == ("a@example.org",)
    assert items[held].as_dict()["next_try"] is None
    with pytest.raises(InvalidInput, match="not a queue id"):
        queueadmin.find(root, "../0.sqlite3")
    with pytest.raises(NotFound, match="no letter 0123456789abcdef"):
        queueadmin.find(root, "0123456789abcdef")
    # a letter its runner may be delivering is not dropped under it
    with pytest.raises(InvalidInput, match="waits for delivery by a running server"):
        queueadmin.drop(root, waiting)
    mark = queueadmin.changed(root)
    queueadmin.drop(root, held)
    assert not store.own.file(held).exists()
    assert {x.id for x in queueadmin.listing(root)} == {waiting, later}
    assert queueadmin.changed(root) != mark  # the runners are told
    assert queueadmin.retry(root, [later], now=5.0) == [later]
    assert {d.entry.id for d in store.due(10.0, 10, set())} == {waiting, later}
    store.close()
    # no server on the slot: any letter may go
    queueadmin.drop(root, waiting)
    assert {x.id for x in queueadmin.listing(root)} == {later}


def test_a_server_starting_while_a_command_reads_or_changes_the_queue_gets_its_own_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server of slot 0 is gone, its letters wait. A server starts while ``pochta queue``
    lists, retries, drops a held letter (none takes a lock), and while it drops a waiting
    letter (the slot's lock held for the removal: the server waits for it): it takes slot 0,
    its own, every time, never slot 1 beside a slot left for adoption."""
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    held, waiting, later = held_and_waiting(store, tmp_path)
    assert [x.live for x in queueadmin.listing(root)] == [True] * 3  # told without a lock
    store.close()  # its server is gone
    assert [x.live for x in queueadmin.listing(root)] == [False] * 3
    started: list[int] = []
    refused = threading.Event()  # the starting server found a slot's lock taken
    try_lock = queuedb._try_lock

    def trying(root: Path, n: int) -> int | None:
        fd = try_lock(root, n)
        if fd is None:
            refused.set()
        return fd

    def start() -> None:
        s = QueueStore(root, inline=100)
        started.append(s.own.n)
        s.close()

    connect = queueadmin._connect
    servers: list[threading.Thread] = []

    @contextlib.contextmanager
    def connecting(path: Path, **kw: Any) -> Iterator[sqlite3.Connection]:
        with connect(path, **kw) as conn:  # the command is at work: a server starts
            refused.clear()
            servers.append(threading.Thread(target=start))
            servers[-1].start()
            if not refused.wait(0.5):  # its slot was free: it started at once
                servers[-1].join()
            yield conn  # the command goes on (and lets go of the slot when it holds it)

    monkeypatch.setattr(queuedb, "_try_lock", trying)
    monkeypatch.setattr(queueadmin, "_connect", connecting)
    assert {x.id for x in queueadmin.listing(root)} == {held, waiting, later}
    assert queueadmin.retry(root, [later]) == [later]
    queueadmin.drop(root, held)
    queueadmin.drop(root, waiting)  # a waiting letter of a free slot: its lock held meanwhile
    for server in servers:
        server.join(timeout=10)
    assert len(started) == len(servers) >= 5 and set(started) == {0}, started
    monkeypatch.undo()
    assert [x.id for x in queueadmin.listing(root)] == [later]
    assert not (root / "1.sqlite3").exists()


def test_a_server_passes_on_an_older_servers_slot_at_once_and_waits_for_a_commands(
    tmp_path: Path,
) -> None:
    """A server of an older pochta holds its slot's ``flock`` alone (no OFD lock): a server
    starting beside it took up to 2 s on that slot (as if a command held it for a moment)
    before it took the next one, at each start and each adoption round. A command's ``flock``
    comes with an OFD read lock that tells it is a command's: that one is waited for."""
    root = tmp_path / "q"
    root.mkdir()
    older = os.open(root / "0.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(older, fcntl.LOCK_EX | fcntl.LOCK_NB)  # an older pochta's server on slot 0
    (root / "0.sqlite3").touch()
    try:
        began = time.monotonic()
        store = QueueStore(root, inline=100)
        took = time.monotonic() - began
        assert store.own.n == 1 and took < 1.5, took
        assert not queuedb.owned(root, 0)  # an older server's slot is not told (as before)
        began = time.monotonic()
        assert store.adopt() == 0  # the older server's slot: passed on at once
        assert time.monotonic() - began < 1.5
        store.close()
    finally:
        os.close(older)
    # a command holding a free slot's lock (drop of a waiting letter) is waited for
    holder = QueueStore(root, inline=100)
    waiting = entry(2)
    holder.put(waiting, b"hi")
    holder.close()
    started: list[QueueStore] = []
    with queueadmin._free_slot(root, 0) as free:
        assert free
        assert not queuedb.owned(root, 0)  # a command's lock is not a server's
        server = threading.Thread(target=lambda: started.append(QueueStore(root, inline=100)))
        server.start()
        server.join(0.3)
        assert server.is_alive()  # waiting for the command
    server.join(5)
    assert [s.own.n for s in started] == [0]
    started[0].close()
    # a command between its OFD read lock and its flock: a server getting the flock then
    # gives it back and waits, never holding the flock without its own OFD lock
    fd = os.open(root / "0.lock", os.O_RDWR)
    assert queuedb.command_lock(fd)
    server = threading.Thread(target=lambda: started.append(QueueStore(root, inline=100)))
    server.start()
    server.join(0.3)
    assert server.is_alive()
    queuedb.command_unlock(fd)
    os.close(fd)
    server.join(5)
    assert started[-1].own.n == 0 and queuedb.owned(root, 0)  # told as a server's slot
    started[-1].close()


def test_a_held_letter_retried_and_adopted_before_its_drop_is_not_dropped_under_its_delivery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``drop`` of a held letter takes no lock: between its look at the slot (no server) and
    the removal, a ``retry`` makes the letter due and a server starts, takes the slot and
    begins to deliver it. The removal finds it no longer held: refused, row and file kept."""
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    held, _, _ = held_and_waiting(store, tmp_path)
    store.close()  # its server is gone: the slot is free
    server: list[QueueStore] = []
    trying: list[Due] = []
    connect = queueadmin._connect

    @contextlib.contextmanager
    def connecting(path: Path, **kw: Any) -> Iterator[sqlite3.Connection]:
        if not kw.get("readonly") and not server:  # drop's removal is next
            monkeypatch.setattr(queueadmin, "_connect", connect)
            queueadmin.retry(root, [held], now=1.0)
            server.append(QueueStore(root, inline=100))  # takes slot 0, its own
            trying.extend(d for d in server[0].due(2.0, 10, set()) if d.entry.id == held)
        with connect(path, **kw) as conn:
            yield conn

    monkeypatch.setattr(queueadmin, "_connect", connecting)
    try:
        with pytest.raises(InvalidInput, match="changed meanwhile"):
            queueadmin.drop(root, held)
        assert [d.entry.id for d in trying] == [held]  # the server is delivering it
        assert held in {x.id for x in queueadmin.listing(root)}
        assert isinstance(trying[0].letter, Path) and trying[0].letter.exists()
    finally:
        for s in server:
            s.close()


def test_a_running_runner_takes_a_retried_held_letter_within_seconds(tmp_path: Path) -> None:
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    attempts = Attempts(["hold"])

    async def main() -> None:
        r = runner(store)
        r.start(attempts)
        first = entry(2)
        await r.put(first, b"hi")
        await until(lambda: len(attempts.seen) == 1 and store.letters == 0)
        assert [x.held for x in queueadmin.listing(root)] == [True]
        watch = r.watch()
        assert (watch.stalled, watch.oldest) == (0.0, None)  # held: not waiting
        await asyncio.to_thread(queueadmin.retry, root, None)
        await until(lambda: len(attempts.seen) == 2, timeout=10.0)
        await until(lambda: not list(store.entries()))
        assert store.letters == 0  # counted again, then out when done
        await r.stop()

    asyncio.run(main())
    store.close()


def test_the_watch_says_when_the_runner_makes_no_progress_while_letters_are_due(
    tmp_path: Path,
) -> None:
    store = QueueStore(tmp_path / "q", inline=100)
    stuck = asyncio.Event()

    async def attempt(due: object) -> str:
        await stuck.wait()
        return "done"

    async def main() -> None:
        r = runner(store)
        r.start(attempt)
        await r.put(entry(2), b"hi")
        r._progress -= 500  # as if the try had been stuck for 500 s
        watch = r.watch()
        assert watch.stalled >= 500 and watch.oldest is not None
        stuck.set()
        # the row may go in the I/O thread (the store's lock busy) and the try end on the
        # loop a moment later: until then the watch rightly still sees a try under way
        await until(lambda: store.letters == 0 and not r._tries)
        idle = r.watch()
        assert (idle.stalled, idle.oldest) == (0.0, None)
        await r.stop()
        assert r.watch().stalled > 0  # its loop ended: no progress from now on

    asyncio.run(main())
    store.close()


def test_the_backup_copy_holds_each_slot_and_the_files_its_rows_name(tmp_path: Path) -> None:
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    held, waiting, later = held_and_waiting(store, tmp_path)
    gone = entry(600)
    spooled = tmp_path / "gone.letter"
    spooled.write_bytes(b"y" * 600)
    store.put(gone, spooled)
    store.own.file(gone.id).unlink()  # done meanwhile: the file goes after the row
    assert queueadmin.copy_queue(root, tmp_path / "copy") == 3
    assert not list((tmp_path / "copy").glob("*-wal"))
    assert (tmp_path / "copy" / "files" / store.own.file(held).name).stat().st_size == 500
    store.close()
    restored = QueueStore(tmp_path / "copy", inline=100)
    assert {e for e, _, _ in restored.entries()} == {held, waiting, later}
    restored.close()


def test_the_backup_copy_is_durable_when_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file of the queue's copy (each slot's database, each letter's file) is fsynced
    after its last write, and so are ``files/``, the copy's directory and its parent (the
    copy's name), each after what it names: a crash right after the backup said it was done
    leaves no torn copy."""
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    held, _, _ = held_and_waiting(store, tmp_path)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    copy = tmp_path / "backup" / "queue"
    copy.parent.mkdir()
    assert queueadmin.copy_queue(root, copy) == 3
    store.close()
    letter = copy / "files" / store.own.file(held).name
    assert letter.stat().st_size == 500
    order = [copy / "0.sqlite3", letter, copy / "files", copy, copy.parent]
    assert {str(p) for p in order} <= set(synced)
    last = {path: n for n, path in enumerate(synced)}
    assert last[str(letter)] < last[str(copy / "files")] < last[str(copy)] < last[str(copy.parent)]
    assert last[str(copy / "0.sqlite3")] < last[str(copy)]


def _files(root: Path) -> dict[str, tuple[int, int, int]]:
    """Each file of a queue's directory: owner, size, time of its last change."""
    return {
        p.name: (p.stat().st_uid, p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.iterdir()
        if p.is_file()
    }


def test_a_listing_creates_no_file_and_changes_none(tmp_path: Path) -> None:
    """``pochta queue list`` may run as another user than the server (root while the server
    runs as pochta): a slot opened ``mode=ro`` with no server on it made its ``-wal`` and
    ``-shm``, owned by the command's user, and the server could not open them after. Listed
    with no server on the slot, beside a live one (its rows still in the WAL), and after a
    kill (the ``-wal`` and ``-shm`` left): every letter is listed, no file is created, and no
    file's owner, size or time changes but the ``-shm`` (SQLite's index, written by any
    reader)."""
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    held, waiting, later = held_and_waiting(store, tmp_path)
    killed = tmp_path / "killed"  # the files a kill leaves: the database, its WAL and index
    killed.mkdir()
    for suffix in ("", "-wal", "-shm"):
        (killed / f"0.sqlite3{suffix}").write_bytes((root / f"0.sqlite3{suffix}").read_bytes())
    assert os.path.getsize(root / "0.sqlite3-wal") > 0  # the rows are in the WAL still
    for where in (root, killed):
        before = _files(where)
        assert {x.id for x in queueadmin.listing(where)} == {held, waiting, later}
        after = _files(where)
        assert set(after) == set(before)
        assert {k: v for k, v in after.items() if not k.endswith("-shm")} == {
            k: v for k, v in before.items() if not k.endswith("-shm")
        }
        assert after["0.sqlite3-shm"][0] == before["0.sqlite3-shm"][0]
    store.close()
    assert not (root / "0.sqlite3-wal").exists()  # no server: the file alone holds the rows
    before = _files(root)
    assert {x.id for x in queueadmin.listing(root)} == {held, waiting, later}
    assert _files(root) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="changes owners: needs root")
def test_files_a_command_makes_as_root_keep_the_queues_owner(tmp_path: Path) -> None:
    """``pochta queue retry`` and ``drop`` run as root beside a server running as its own user
    (here uid 65534): the slot's lock file a drop makes (a queue restored from a backup has
    none) and ``changed`` are given the queue directory's owner, as SQLite gives the
    database's owner to the ``-wal`` and ``-shm`` it makes as root; made root's, the server
    could not open the lock file at its next start."""
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    _, waiting, later = held_and_waiting(store, tmp_path)
    store.close()
    (root / "0.lock").unlink()
    for path in [root, *root.rglob("*")]:
        os.chown(path, 65534, 65534)
    assert queueadmin.retry(root, [later]) == [later]
    queueadmin.drop(root, waiting)  # a free slot: its lock file made and held meanwhile
    made = {p.name: p.stat().st_uid for p in root.iterdir() if p.is_file()}
    assert {"0.lock", "changed"} <= set(made)
    assert set(made.values()) == {65534}, made


def test_a_listing_refuses_a_slot_whose_wal_has_no_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``-wal`` without its ``-shm`` (a server opening the slot this moment, or a leftover):
    reading it would make the ``-shm``; the listing asks again for a while, then says what
    to do, and creates nothing."""
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    store.put(entry(2), b"hi")
    copy = tmp_path / "copy"
    copy.mkdir()
    for suffix in ("", "-wal"):
        (copy / f"0.sqlite3{suffix}").write_bytes((root / f"0.sqlite3{suffix}").read_bytes())
    store.close()
    monkeypatch.setattr(queueadmin, "READ_SECONDS", 0.05)
    with pytest.raises(StorageError, match=r"without 0\.sqlite3-shm.*start the server"):
        queueadmin.listing(copy)
    assert sorted(p.name for p in copy.iterdir()) == ["0.sqlite3", "0.sqlite3-wal"]


def test_the_queue_commands_exit_non_zero_with_clear_messages(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = QueueStore(data / "queue", inline=100)
    held, waiting, _ = held_and_waiting(store, tmp_path)
    run = CliRunner().invoke
    listed = run(cli, ["queue", "list", "--held", "--json", "--data", str(data)])
    assert listed.exit_code == 0, listed.output
    assert [x["id"] for x in json.loads(listed.stdout)] == [held]
    human = run(cli, ["queue", "list", "--data", str(data)])
    assert "3 letter(s), 1 held" in human.stdout
    bad = run(cli, ["queue", "retry", "nope", "--data", str(data)])
    assert bad.exit_code == 2 and "not a queue id" in bad.output
    unknown = run(cli, ["queue", "drop", "0123456789abcdef", "--yes", "--data", str(data)])
    assert unknown.exit_code == 3 and "no letter 0123456789abcdef" in unknown.output
    unsure = run(cli, ["queue", "drop", held, "--data", str(data)])
    assert unsure.exit_code == 2 and "--yes" in unsure.output
    busy = run(cli, ["queue", "drop", waiting, "--yes", "--data", str(data)])
    assert busy.exit_code == 2 and "running server" in busy.output
    dropped = run(cli, ["queue", "drop", held, "--yes", "--json", "--data", str(data)])
    assert dropped.exit_code == 0 and json.loads(dropped.stdout)["dropped"]["id"] == held
    both = run(cli, ["queue", "retry", waiting, "--all", "--data", str(data)])
    assert both.exit_code == 2
    again = run(cli, ["queue", "retry", "--all", "--json", "--data", str(data)])
    assert again.exit_code == 0 and len(json.loads(again.stdout)["retried"]) == 2
    store.close()
    assert "Traceback" not in bad.output + unknown.output + busy.output


def test_a_slot_with_an_unreadable_record_is_listed_not_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "q"
    store = QueueStore(root, inline=100)
    store.put(entry(2), b"hi")
    store.close()
    with sqlite3.connect(root / "0.sqlite3") as conn:
        conn.execute("UPDATE queue SET record = x'00'")
    (item,) = queueadmin.listing(root)
    assert item.entry is None and item.as_dict()["sender"] is None
    assert os.path.exists(root / "0.sqlite3")
    assert queuerunner.CHANGES_SECONDS <= 5


def test_a_restored_queue_of_several_slots_is_adopted_whole(tmp_path: Path) -> None:
    """A backup copies each slot's database and files, not its lock file: a restored slot
    other than the one the first server takes must still be adopted (adoption looked for lock
    files: slot 1's letters stayed in the restored queue, never delivered)."""
    root = tmp_path / "q"
    first, second = QueueStore(root, inline=100), QueueStore(root, inline=100)
    a, b = entry(2), entry(3)
    first.put(a, b"hi")
    second.put(b, b"abc")
    assert queueadmin.copy_queue(root, tmp_path / "copy") == 2
    first.close()
    second.close()
    assert not list((tmp_path / "copy").glob("*.lock"))
    restored = QueueStore(tmp_path / "copy", inline=100)  # the one server started on it
    assert restored.own.n == 0
    assert restored.adopt() == 1
    assert {d.entry.id for d in restored.due(1e12, 10, set())} == {a.id, b.id}
    restored.close()


def test_the_watch_says_stalled_while_the_queue_cannot_be_read(tmp_path: Path) -> None:
    """A damaged queue fails every read: the loop pauses between reads (nothing looks due
    meanwhile) and the oldest letter cannot be read either. The watch raised (the health
    check kept what it said last: "ok") and, had it not, counted no stall between reads:
    /healthz stayed 200 for as long as the queue could not be read."""

    class Damaged(QueueStore):
        reads = 0

        def due(self, now: float, limit: int, skip: set[str]) -> list[Due]:
            self.reads += 1
            raise StorageError("reading 0.sqlite3: database disk image is malformed")

        def oldest(self) -> float | None:
            raise StorageError("reading 0.sqlite3: database disk image is malformed")

    store = Damaged(tmp_path / "q", inline=100)

    async def main() -> None:
        r = runner(store)
        r.start(Attempts([]))
        await until(lambda: store.reads >= 1)
        await asyncio.sleep(0.1)  # within the pause after the failed read
        r._progress -= 500  # as if the queue had been unreadable for 500 s
        watch = r.watch()
        assert watch.stalled >= 500 and watch.oldest is None
        await r.stop()

    asyncio.run(main())
    store.close()


def test_a_recount_while_letters_are_queued_and_held_counts_each_once(tmp_path: Path) -> None:
    """``pochta queue`` makes each runner count its slot again (a retried held letter counts
    again). A letter whose row was written but not yet counted by its ``put`` was counted
    twice (the recount saw the row, then ``put`` added it); one whose row was held but not
    yet counted out, not at all: the queue's limits drifted until the next command."""
    import threading

    store = QueueStore(tmp_path / "q", inline=100)
    first = entry(2)
    store.put(first, b"hi")
    written, go_on = threading.Event(), threading.Event()
    write = store.own.db.write

    def slow_write(op: object) -> None:  # the commit made; its count waits
        write(op)  # type: ignore[arg-type]
        written.set()
        assert go_on.wait(10)

    store.own.db.write = slow_write  # type: ignore[method-assign]
    putting = threading.Thread(target=store.put, args=(entry(3), b"abc"))
    putting.start()
    assert written.wait(10)
    store.recount()
    go_on.set()
    putting.join()
    assert (store.letters, store.bytes) == (2, 5)
    (due,) = [d for d in store.due(1e12, 10, set()) if d.entry.id == first.id]
    written.clear()
    go_on.clear()
    holding = threading.Thread(target=store.retry, args=(due, HELD))
    holding.start()
    assert written.wait(10)
    store.recount()
    go_on.set()
    holding.join()
    store.own.db.write = write  # type: ignore[method-assign]
    assert (store.letters, store.bytes) == (1, 3)
    store.recount()
    assert (store.letters, store.bytes) == (1, 3)
    store.close()
