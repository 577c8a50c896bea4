"""``pochta backup`` (issue 30, item 4): backups that restore, proven by ``pochta fsck``.

- embedded (SQLite + local disks): a backup taken while letters are being delivered
  restores into a new data directory whose letters read back byte for byte and whose fsck
  (with the disks walked) is clean;
- PostgreSQL: a base backup with the server's WAL archive, restored on a fresh server to a
  point in time between two batches of letters: the letters before it are there byte for
  byte, those after it are gone from the index and fsck reports their files on the disks
  (never silently missing);
- bad input: a missing backup, a target time outside what the backup can reach, a
  non-empty target directory: one line and a non-zero exit.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sqlite3
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pochta.app import build
from pochta.blobs.keys import blob_path, key_of
from pochta.cli import app as cli
from pochta.cli.backup import check_target, parse_time, recovery_settings
from pochta.config import load_settings
from pochta.errors import InvalidInput
from pochta.types import User
from tests.mailtools import letter, payload
from tests.pgserver import PostgresServer, bindir, migrated_template
from tests.servers import free_port, wait_until

pytestmark = pytest.mark.integration

runner = CliRunner()


def pochta_cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args))
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.stdout, result.stderr


def deliver(pochta: object, user: User, seed: int) -> tuple[int, bytes]:
    """A letter with an attachment of its own (a new file on the disks)."""
    raw = letter(subject=f"letter {seed}", attachments=[(f"{seed}.bin", payload(seed, 9_000))])
    done = pochta.mailbox.deliver(raw, [user])  # type: ignore[attr-defined]
    return done.ids[0], raw


# -- pure ------------------------------------------------------------------------------------
def test_target_times_outside_the_backup_are_refused() -> None:
    end = parse_time("2026-11-28T12:00:00Z")
    assert parse_time("2026-11-28T13:00:00+01:00") == end  # a zone is converted to UTC
    last = end + dt.timedelta(hours=1)
    check_target(end + dt.timedelta(minutes=5), end, last)  # inside: fine
    with pytest.raises(InvalidInput, match="before this backup ended"):
        check_target(end - dt.timedelta(seconds=1), end, last)
    with pytest.raises(InvalidInput, match="after what the archive holds"):
        check_target(last + dt.timedelta(seconds=1), end, last)
    with pytest.raises(InvalidInput, match="no WAL segment is archived"):
        check_target(end, end, None)
    assert parse_time("2026-11-28T12:00:00") == end  # no zone: UTC
    with pytest.raises(InvalidInput, match="not a time"):
        parse_time("yesterday")


def test_recovery_settings_quote_the_archive_and_stop_archiving() -> None:
    text = recovery_settings(Path("/b/it's"), parse_time("2026-11-28T12:00:00Z"))
    assert "restore_command = 'cp ''/b/it''\"''\"''s''/%f %p'" in text
    assert "recovery_target_time = '2026-11-28T12:00:00.000+00:00'" in text
    assert "archive_mode = 'off'" in text and "recovery_target_action = 'promote'" in text


def test_fsck_walks_the_disks_and_reads_a_manifest(tmp_path: Path) -> None:
    """A file no FileDB record names is unindexed (and fails the check) only when the disks
    are walked; a manifest tells a file lost since the backup from one written after it."""
    pochta = build(load_settings(data_dir=tmp_path / "data", antispam={"pool_processes": 0}))
    try:
        ann = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        deliver(pochta, ann, 1)
        lost_key = key_of(payload(2, 9_000))
        deliver(pochta, ann, 2)
        stray = b"an upload whose letter never came"
        stray_key = key_of(stray)
        pair = pochta.blobs.pairs()[0]
        for disk in pair.disks:
            (Path(disk.root) / blob_path(stray_key)).parent.mkdir(parents=True, exist_ok=True)
            (Path(disk.root) / blob_path(stray_key)).write_bytes(stray)
        assert pochta.mailbox.fsck().ok  # without the disks walked, the stray is not seen
        report = pochta.mailbox.fsck(disks=True)
        assert not report.ok and report.files_on_disks == 6
        assert [line.split(":")[0] for line in report.unindexed] == [stray_key]
        for disk in pair.disks:  # both copies of a referenced file gone
            (Path(disk.root) / blob_path(lost_key)).unlink()
        seen = pochta.mailbox.fsck(manifest={lost_key: ["a"], stray_key: ["a"]})
        assert "the backup's manifest has it on a: lost since" in seen.lost[0]
        assert "; in the backup's manifest" in seen.unindexed[0]
        unseen = pochta.mailbox.fsck(manifest={})
        assert "not in the backup's manifest: written after the backup" in unseen.lost[0]
        assert "not in the backup's manifest: written after the backup" in unseen.unindexed[0]
    finally:
        pochta.close()


# -- embedded --------------------------------------------------------------------------------
def test_embedded_backup_taken_during_deliveries_restores_clean(tmp_path: Path) -> None:
    data = tmp_path / "data"
    settings = load_settings(data_dir=data, antispam={"pool_processes": 0})
    pochta = build(settings)
    kept: dict[int, bytes] = {}
    try:
        ann = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        for seed in range(5):
            letter_id, raw = deliver(pochta, ann, seed)
            kept[letter_id] = raw
        stop = threading.Event()

        def busy() -> None:  # deliveries and deletions while the backup is taken
            seed = 100
            while not stop.is_set():
                letter_id, _ = deliver(pochta, ann, seed)
                if seed % 2:
                    pochta.mailbox.delete(ann.id, letter_id)
                    pochta.mailbox.process_deletions()
                seed += 1

        worker = threading.Thread(target=busy)
        worker.start()
        try:
            time.sleep(0.3)
            code, out, err = pochta_cli(
                "backup", "create", "--to", str(tmp_path / "b"), "--data", str(data), "--json"
            )
        finally:
            stop.set()
            worker.join()
        assert code == 0, err
        info = json.loads(out)
        assert info["kind"] == "embedded" and info["files"] >= 10  # 5 letters x 2 disks
    finally:
        pochta.close()

    new = tmp_path / "restored"
    code, out, err = pochta_cli(
        "backup", "restore", "--from", str(tmp_path / "b"), "--data", str(new)
    )
    assert code == 0, err
    code, out, err = pochta_cli(
        "fsck", "--disks", "--manifest", str(tmp_path / "b"), "--data", str(new), "--json"
    )
    report = json.loads(out)
    assert code == 0 and report["ok"], json.dumps(report, indent=1)
    assert report["files_on_disks"] == info["files"]
    restored = build(load_settings(data_dir=new, antispam={"pool_processes": 0}))
    try:
        ann2 = restored.mailbox.user("ann@example.org")
        assert ann2 is not None
        for letter_id, raw in kept.items():
            assert restored.mailbox.raw(ann2.id, letter_id) == raw
        pair = restored.blobs.pairs()[0]
        assert all(str(d.root).startswith(str(new.resolve())) for d in pair.disks)
    finally:
        restored.close()


def test_a_queued_letter_not_yet_delivered_is_backed_up_and_delivered_after_restore(
    tmp_path: Path,
) -> None:
    """smtp.answer = "queued": letters answered 250 and still in the incoming queue (one in
    its row, one big one in a file) are in the backup, taken while their slot is owned (its
    lock held, as by a running server); restored, the first server delivers them, once."""
    from pochta.mailbox.queue import Entry, new_id
    from pochta.mailbox.queuedb import QueueStore
    from tests.integration.conftest import eventually, start_server
    from tests.integration.test_smtp import add_users, received, strip_trace

    data = tmp_path / "data"
    add_users(data, "alice@example.org")
    backup = tmp_path / "b"
    store = QueueStore(data / "queue", inline=1000)  # the slot's owner while the backup runs
    trace = b"Received: from client.example by mx.pochta.test; Mon, 30 Nov 2026 11:00 +0000\r\n"
    small = letter(subject="small")
    big = letter(subject="big", attachments=[("a.bin", payload(7, 20_000))])
    spooled = tmp_path / "big.letter"
    spooled.write_bytes(big)
    for raw, body in ((small, small), (big, spooled)):
        entry = Entry(new_id(), "s@example.net", ("alice@example.org",), None, None, trace,
                      len(raw), time.time())  # fmt: skip
        store.put(entry, body)
    try:
        code, out, err = pochta_cli(
            "backup", "create", "--to", str(backup), "--data", str(data), "--json"
        )
        assert code == 0, err
    finally:
        store.close()
    assert json.loads(out)["queue_letters"] == 2
    assert len(list((backup / "data" / "queue" / "files").iterdir())) == 1
    # each slot at one instant (the backup API), not its file and its WAL copied apart
    assert not list((backup / "data" / "queue").glob("*.sqlite3-*"))
    new = tmp_path / "restored"
    code, out, err = pochta_cli("backup", "restore", "--from", str(backup), "--data", str(new))
    assert code == 0, err
    assert "the incoming queue's copy: 2 letter(s), taken at" in out  # the restore says so
    srv = start_server(new, tmp_path / "serve.log", settings={"POCHTA_SMTP__ANSWER": "queued"})
    try:
        got = received(srv, "alice@example.org", 2)
        assert sorted(strip_trace(g) for g in got) == sorted([small, big])
        # a delivered letter's row goes a moment after its letter is stored (with the next
        # letter queued, or by the runner's flush): waited for, not read at once
        eventually(
            lambda: json.loads(
                runner.invoke(cli, ["queue", "list", "--json", "--data", str(new)]).stdout
            ),
            lambda listed: listed == [],
            what="the queue emptied",
        )
    finally:
        srv.stop()


def test_the_embedded_queue_is_copied_while_no_delivery_can_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Embedded, the incoming queue is copied inside the cut, while the index's write lock is
    held: no delivery ends between the queue's copy and the index's, so a letter answered
    before the copy is in one of them. Copied before the cut, a letter queued between the
    two and not yet delivered at the cut was in neither."""
    from pochta.cli import backup as backup_cli

    data = tmp_path / "data"
    build(load_settings(data_dir=data, antispam={"pool_processes": 0})).close()
    real = backup_cli.copy_queue
    locked: list[bool] = []

    def probed(root: Path, target: Path, **kwargs: Any) -> int:
        conn = sqlite3.connect(data / "mailbox.sqlite3", timeout=0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")  # a delivery's commit
            conn.execute("ROLLBACK")
            locked.append(False)
        except sqlite3.OperationalError as exc:
            locked.append("locked" in str(exc))
        finally:
            conn.close()
        return real(root, target, **kwargs)

    monkeypatch.setattr(backup_cli, "copy_queue", probed)
    code, out, err = pochta_cli(
        "backup", "create", "--to", str(tmp_path / "b"), "--data", str(data), "--json"
    )
    assert code == 0, err
    assert locked == [True]
    info = json.loads(out)
    assert info["queue_letters"] == 0 and info["queue_copied"] is not None


def test_the_cut_holds_the_write_locks_for_no_fsync_of_the_queues_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cut holds every SQLite file's write lock (the index's, the guard's: a login's
    rate limit waits 5 s at most) while the incoming queue is copied; an fsync of each
    letter's file there (some ms each, up to ``queue_max_letters`` of them) held them that
    much longer. The copy is made durable after the cut, with the rest of the backup."""
    import os

    from pochta.blobs.nodes import groupsync
    from pochta.mailbox.queue import Entry, new_id
    from pochta.mailbox.queuedb import QueueStore

    data = tmp_path / "data"
    build(load_settings(data_dir=data, antispam={"pool_processes": 0})).close()
    store = QueueStore(data / "queue", inline=100)
    for i in range(3):
        spooled = tmp_path / f"{i}.letter"
        spooled.write_bytes(b"x" * 500)
        store.put(
            Entry(new_id(), "s@example.net", ("a@example.org",), None, None, b"", 500, time.time()),
            spooled,
        )
    backup = tmp_path / "b"
    under_lock: dict[str, bool] = {}  # the queue's copy's fsynced files: whether in the cut
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(str(backup / "data" / "queue")):
            conn = sqlite3.connect(data / "mailbox.sqlite3", timeout=0, isolation_level=None)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
                locked = False
            except sqlite3.OperationalError:
                locked = True
            finally:
                conn.close()
            under_lock[path] = under_lock.get(path, False) or locked
        real_fsync(fd)

    monkeypatch.setattr(groupsync, "_syncfs", None)  # an fsync of each file: seen here
    monkeypatch.setattr(os, "fsync", fsync)
    try:
        code, _, err = pochta_cli("backup", "create", "--to", str(backup), "--data", str(data))
    finally:
        monkeypatch.undo()
        store.close()
    assert code == 0, err
    letters = [str(p) for p in (backup / "data" / "queue" / "files").iterdir()]
    assert len(letters) == 3 and set(letters) <= set(under_lock)  # made durable, after
    assert not any(under_lock.values()), under_lock


@pytest.mark.parametrize("syncfs", [True, False], ids=["syncfs", "fsync-each"])
def test_an_embedded_backup_is_durable_before_it_says_it_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syncfs: bool
) -> None:
    """``backup.json`` (what ``backup show`` and ``restore`` read: the backup is done) is
    written only once everything else of the backup is on the device, and is made durable
    itself: one ``syncfs`` of the backup's filesystem, or (where it cannot report errors)
    an fsync of every file and directory. The SQLite copies, the data directory's other files
    and the disks' copies were not synced: a crash after "backup done" could leave them torn."""
    import os

    from pochta.blobs.nodes import groupsync

    data = tmp_path / "data"
    pochta = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        ann = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        deliver(pochta, ann, 1)
    finally:
        pochta.close()
    backup = tmp_path / "b"
    synced: list[str] = []  # fsynced paths, and "syncfs" for a sync of the filesystem
    real_fsync, real_syncfs = os.fsync, groupsync._syncfs

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def recorded(fd: int) -> int:
        synced.append("syncfs")
        assert real_syncfs is not None
        return real_syncfs(fd)

    if syncfs and real_syncfs is None:
        pytest.skip("needs a trustworthy syncfs (Linux >= 5.8)")
    monkeypatch.setattr(groupsync, "_syncfs", recorded if syncfs else None)
    monkeypatch.setattr(groupsync, "_groups", groupsync.weakref.WeakValueDictionary())
    monkeypatch.setattr(os, "fsync", fsync)
    code, _, err = pochta_cli("backup", "create", "--to", str(backup), "--data", str(data))
    monkeypatch.undo()
    assert code == 0, err
    info = str(backup / "backup.json")
    done = synced.index(f"{info}.tmp")  # backup.json's own fsync, before its rename
    assert synced[-1] == str(backup)  # its name in the directory, last
    written = [p for p in backup.rglob("*") if str(p) != info]
    assert any(p.parent.name == "disks" for p in written)
    if syncfs:
        assert "syncfs" in synced[:done]
    else:
        assert {str(p) for p in written} | {str(backup), str(tmp_path)} <= set(synced[:done])


def _failing_writeback(
    monkeypatch: pytest.MonkeyPatch, seen_elsewhere: bool
) -> tuple[dict[str, int], Any]:
    """syncfs modelled as Linux reports writeback errors (errseq): each descriptor of the
    filesystem samples the error state when it is opened and is told of an error after that
    once; one opened after another process's syncfs saw the error (``seen_elsewhere``: a
    server's on the same filesystem) never is. The returned ``fail()`` is a writeback
    error of the backup's pages."""
    import ctypes
    import errno
    import os

    from pochta.blobs.nodes import groupsync

    if groupsync._syncfs is None:
        pytest.skip("needs a trustworthy syncfs (Linux >= 5.8)")
    state = {"seq": 0, "seen": 1}
    sampled: dict[int, int] = {}
    real_open = os.open

    def opened(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, flags, *args, **kwargs)
        sampled[fd] = state["seq"] if state["seen"] else -1  # errseq_sample
        return fd

    def syncfs(fd: int) -> int:
        if sampled.get(fd, state["seq"]) != state["seq"]:
            sampled[fd] = state["seq"]
            state["seen"] = 1
            ctypes.set_errno(errno.EIO)
            return -1
        return 0

    def fail() -> None:
        state["seq"] += 1
        state["seen"] = int(seen_elsewhere)

    monkeypatch.setattr(os, "open", opened)
    monkeypatch.setattr(groupsync, "_syncfs", syncfs)
    monkeypatch.setattr(groupsync, "_groups", groupsync.weakref.WeakValueDictionary())
    return state, fail


@pytest.mark.parametrize("seen_elsewhere", [False, True], ids=["alone", "seen-by-a-server"])
def test_a_backup_whose_pages_failed_to_reach_the_device_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seen_elsewhere: bool
) -> None:
    """A writeback error of the backup's own pages while it is copied: ``backup create``
    exits non-zero with one clear line and leaves no ``backup.json`` (nothing says the
    backup is done). Also when another process's syncfs of the backup's filesystem saw the
    error first (a server's, when the backup shares its filesystem; any ``sync``): the
    backup's syncfs descriptor must be open before the backup writes anything, or Linux
    never reports the error to it."""
    from pochta.cli import backup as backup_cli

    data = tmp_path / "data"
    pochta = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        ann = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        deliver(pochta, ann, 1)
    finally:
        pochta.close()
    real = backup_cli.copy_queue

    def copied(root: Path, target: Path, **kwargs: Any) -> int:
        n = real(root, target, **kwargs)
        fail()  # the copy's pages (queued for writeback) failed to reach the device
        return n

    _, fail = _failing_writeback(monkeypatch, seen_elsewhere)
    monkeypatch.setattr(backup_cli, "copy_queue", copied)
    shm = Path("/dev/shm")  # the backup on another filesystem than the data (as it should)
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs a second filesystem (/dev/shm)")
    other = Path(tempfile.mkdtemp(dir=shm))
    backup = other / "b"
    try:
        code, out, err = pochta_cli("backup", "create", "--to", str(backup), "--data", str(data))
        monkeypatch.undo()
        left = sorted(p.name for p in backup.iterdir())
    finally:
        shutil.rmtree(other)
    assert code != 0, out
    assert "could not be made durable" in err and "Input/output error" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert "backup.json" not in left and "backup.json.tmp" not in left, left


def test_backup_bad_input_is_one_line_and_an_exit_code(tmp_path: Path) -> None:
    code, _, err = pochta_cli(
        "backup", "restore", "--from", str(tmp_path / "nope"), "--data", str(tmp_path / "x")
    )
    assert code == 3 and "no backup at" in err
    code, _, err = pochta_cli("backup", "show", str(tmp_path))
    assert code == 3 and "backup.json" in err
    data = tmp_path / "data"
    assert pochta_cli("init", "--data", str(data))[0] == 0
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    code, _, err = pochta_cli(
        "backup", "create", "--to", str(tmp_path / "full"), "--data", str(data)
    )
    assert code == 2 and "is not empty" in err
    assert pochta_cli("backup", "create", "--to", str(tmp_path / "b"), "--data", str(data))[0] == 0
    code, _, err = pochta_cli(
        "backup", "restore", "--from", str(tmp_path / "b"), "--data", str(tmp_path / "r"),
        "--target-time", "2026-01-01T00:00:00Z",
    )  # fmt: skip
    assert code == 2 and "embedded backup restores to the moment" in err
    mixed = tmp_path / "mixed.toml"
    mixed.write_text(f'data_dir = "{data}"\n[mailbox]\nbackend = "postgres"\n')
    code, _, err = pochta_cli(
        "backup", "create", "--to", str(tmp_path / "m"), "--config", str(mixed)
    )
    assert code == 6 and "both on PostgreSQL or both embedded" in err
    code, _, err = pochta_cli("fsck", "--manifest", str(tmp_path / "nope"), "--data", str(data))
    assert code == 3 and "no manifest at" in err


# -- PostgreSQL: a point-in-time restore on a fresh server -------------------------------------
PG_STORES = {
    "mailbox": {"backend": "postgres"},
    "blobs": {"backend": "postgres"},
    "valkyrie": {"backend": "postgres", "enabled": False},
    "antispam": {"pool_processes": 0},
}


def write_config(path: Path, data: Path, dsn: str) -> Path:
    lines = [f'data_dir = "{data}"', "[postgres]", f'dsn = "{dsn}"']
    for section, values in PG_STORES.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def owned_dir(prefix: str, user: str | None) -> Path:
    """A directory the server's user can reach (pytest's own tmp is 0700 root's)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    if user is not None:
        shutil.chown(path, user, user)
    return path


def archive_now(server: PostgresServer) -> None:
    """Close the current WAL segment and wait until the archiver has copied it."""
    with server.connect("pochta") as conn:
        row = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()
        assert row is not None
        segment = row[0]

        def archived() -> bool:
            got = conn.execute("SELECT last_archived_wal FROM pg_stat_archiver").fetchone()
            return got is not None and got[0] is not None and got[0] >= segment

        wait_until(archived, 60, "the WAL segment archived")


def archiving(server: PostgresServer) -> Path:
    """The server archives its WAL (restarted for it) into the directory returned, and has
    pochta's database, migrated."""
    wal = server.dir / "wal"
    wal.mkdir()
    if server.user is not None:
        shutil.chown(wal, server.user, server.user)
    with server.connect() as conn:
        conn.execute("ALTER SYSTEM SET archive_mode = 'on'")
        command = f"test ! -f {wal}/%f && cp %p {wal}/%f"
        conn.execute(f"ALTER SYSTEM SET archive_command = '{command}'".encode())
    server.stop()
    server.start_again()
    migrated_template(server, "pochta")
    return wal


def restored_server(server: PostgresServer, pgroot: Path) -> PostgresServer:
    """A fresh server on a restored data directory, once it has replayed the archive and
    is promoted."""
    bin_dir = bindir()
    assert bin_dir is not None
    restored = PostgresServer(pgroot, free_port(), bin_dir, user=server.user)
    restored.start_again()

    def promoted() -> bool:
        with restored.connect("pochta") as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            return row is not None and row[0] is False

    wait_until(promoted, 60, "the restored server promoted")
    return restored


def test_point_in_time_restore_and_fsck_reports_the_letters_after_it(tmp_path: Path) -> None:
    if bindir() is None:
        pytest.skip("PostgreSQL's initdb is not installed (Debian package postgresql)")
    server = PostgresServer.start()
    restored: PostgresServer | None = None
    pochta = None
    try:
        wal = archiving(server)
        data = tmp_path / "data"
        cfg = write_config(tmp_path / "pochta.toml", data, server.dsn("pochta"))
        pochta = build(load_settings(cfg))
        ann = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        before = dict(deliver(pochta, ann, seed) for seed in range(3))

        backup = tmp_path / "backup"
        code, out, err = pochta_cli(
            "backup", "create", "--to", str(backup), "--wal-dir", str(wal), "--config", str(cfg),
            "--json",
        )  # fmt: skip
        assert code == 0, err
        assert json.loads(out)["files"] == 6  # 3 attachments x 2 disks
        between = dict(deliver(pochta, ann, seed) for seed in range(10, 12))
        time.sleep(1.0)
        target = dt.datetime.now(dt.UTC)
        time.sleep(1.0)
        after = dict(deliver(pochta, ann, seed) for seed in range(20, 22))
        after_keys = {key_of(payload(seed, 9_000)) for seed in range(20, 22)}
        pochta.close()
        pochta = None
        archive_now(server)

        # bad input: outside the backup, a missing backup, a non-empty target
        pgroot = owned_dir("pochta-pg-restored-", server.user)
        pgdata = pgroot / "data"
        common = ["--from", str(backup), "--pgdata", str(pgdata)]
        early = (target - dt.timedelta(hours=1)).isoformat()
        code, _, err = pochta_cli("backup", "restore", *common, "--target-time", early)
        assert code == 2 and "before this backup ended" in err
        late = (target + dt.timedelta(hours=1)).isoformat()
        code, _, err = pochta_cli("backup", "restore", *common, "--target-time", late)
        assert code == 2 and "after what the archive holds" in err
        code, _, err = pochta_cli(
            "backup", "restore", "--from", str(tmp_path / "none"), "--pgdata", str(pgdata)
        )
        assert code == 3 and "no backup at" in err
        assert not pgdata.exists()

        owner = ["--owner", server.user] if server.user is not None else []
        version = backup / "base" / "PG_VERSION"
        kept_version = version.read_bytes()
        version.write_bytes(kept_version + b"\n")  # a damaged backup: pg_verifybackup says so
        code, _, err = pochta_cli("backup", "restore", *common, "--target-time", target.isoformat())
        assert code == 5 and "pg_verifybackup failed" in err and not pgdata.exists()
        version.write_bytes(kept_version)
        code, out, err = pochta_cli(
            "backup", "restore", *common, "--target-time", target.isoformat(), *owner, "--json"
        )
        assert code == 0, err
        assert json.loads(out)["verified"] is True
        # a fresh server on the restored directory: it replays the archive to the target
        restored = restored_server(server, pgroot)
        server.stop()  # the old one is gone: only the disks survive

        # a fresh loader's data directory, the surviving disks
        (tmp_path / "data2").mkdir()
        cfg2 = write_config(tmp_path / "restored.toml", tmp_path / "data2", restored.dsn("pochta"))
        code, out, err = pochta_cli(
            "fsck", "--manifest", str(backup), "--config", str(cfg2), "--json"
        )
        assert out, err
        report = json.loads(out)
        assert code == 1 and not report["ok"], report
        assert not (report["lost"] or report["damaged"] or report["undercounted"]), report
        unindexed = {line.split(":")[0]: line for line in report["unindexed"]}
        assert set(unindexed) == after_keys  # every file of a letter after the target
        assert all("not in the backup's manifest" in line for line in unindexed.values())
        assert report["files_on_disks"] == 2 * (3 + 2 + 2)

        pochta = build(load_settings(cfg2))
        user = pochta.mailbox.user("ann@example.org")
        assert user is not None
        for letter_id, raw in {**before, **between}.items():
            assert pochta.mailbox.raw(user.id, letter_id) == raw
        assert pochta.mailbox.stats()["letters"] == len(before) + len(between)
        assert not set(after) & {s.id for s in pochta.mailbox.letters(user.id, "Inbox")}
    finally:
        if pochta is not None:
            pochta.close()
        if restored is not None:
            restored.remove()
        server.remove()


def test_a_server_that_does_not_archive_is_refused(postgres_dsn: str, tmp_path: Path) -> None:
    """Without archive_mode a base backup restores to its own end only: refused, exit 6;
    without --wal-dir, exit 2; nothing is written to --to either way."""
    data = tmp_path / "data"
    data.mkdir()
    cfg = write_config(tmp_path / "pochta.toml", data, postgres_dsn)
    to = tmp_path / "b"
    code, _, err = pochta_cli("backup", "create", "--to", str(to), "--config", str(cfg))
    assert code == 2 and "--wal-dir is needed" in err
    (tmp_path / "wal").mkdir()
    code, _, err = pochta_cli(
        "backup", "create", "--to", str(to), "--wal-dir", str(tmp_path / "wal"),
        "--config", str(cfg),
    )  # fmt: skip
    assert code == 6 and "archive_mode is 'off'" in err and "archive_command" in err
    assert "pochta-test-secret" not in err  # the DSN's password is never shown
    assert not to.exists()


def test_a_postgres_backup_keeps_the_queue_and_its_restore_delivers_it_once(
    tmp_path: Path,
) -> None:
    """smtp.answer = "queued" on PostgreSQL: the letters answered 250 and still in the
    incoming queue (one in its row, one big one in a file) are in the backup, taken while
    their slot is owned (as by a running server), beside one whose delivery the index had
    committed before its row was removed (a crash between the two). ``restore --data`` puts
    the queue in a new data directory; a server started there on the restored PostgreSQL
    delivers the two, once each, and not the third again."""
    if bindir() is None:
        pytest.skip("PostgreSQL's initdb is not installed (Debian package postgresql)")
    from pochta.mailbox.queue import Entry, new_id
    from pochta.mailbox.queuedb import QueueStore
    from tests.integration.conftest import eventually, start_server
    from tests.integration.test_smtp import PASSWORD, received, strip_trace

    server = PostgresServer.start()
    restored: PostgresServer | None = None
    pochta = None
    srv = None
    try:
        wal = archiving(server)
        data = tmp_path / "data"
        cfg = write_config(tmp_path / "pochta.toml", data, server.dsn("pochta"))
        pochta = build(load_settings(cfg))
        ann = pochta.mailbox.add_user("ann@example.org", PASSWORD)
        store = QueueStore(data / "queue", inline=1000)
        trace = b"Received: from c.example by mx.pochta.test; Mon, 30 Nov 2026 11:00 +0000\r\n"
        small = letter(subject="small")
        big = letter(subject="big", attachments=[("a.bin", payload(7, 20_000))])
        done = letter(subject="done before the backup")
        spooled = tmp_path / "big.letter"
        spooled.write_bytes(big)
        ids = {}
        for raw, body in ((small, small), (big, spooled), (done, done)):
            entry = Entry(new_id(), "s@example.net", ("ann@example.org",), None, None, trace,
                          len(raw), time.time())  # fmt: skip
            store.put(entry, body)
            ids[raw] = entry.id
        pochta.mailbox.deliver_prepared(pochta.mailbox.prepare(done), [ann], queued=ids[done])
        assert pochta.mailbox.was_queued(ids[done])
        backup = tmp_path / "backup"
        try:
            code, out, err = pochta_cli(
                "backup", "create", "--to", str(backup), "--wal-dir", str(wal),
                "--config", str(cfg), "--json",
            )  # fmt: skip
            assert code == 0, err
        finally:
            store.close()
            pochta.close()
            pochta = None
        assert len(list((backup / "queue" / "files").iterdir())) == 1
        assert not list((backup / "queue").glob("*.sqlite3-*"))  # each slot at one instant
        archive_now(server)

        pgroot = owned_dir("pochta-pg-restored-", server.user)
        pgdata = pgroot / "data"
        owner = ["--owner", server.user] if server.user is not None else []
        common = ["backup", "restore", "--from", str(backup), "--pgdata", str(pgdata), *owner]
        code, _, err = pochta_cli(*common)
        assert code == 2 and "--data is needed" in err and not pgdata.exists()
        new = tmp_path / "restored"
        code, out, err = pochta_cli(*common, "--data", str(new), "--json")
        assert code == 0, err
        said = json.loads(out)
        assert said["queue_slots"] == 1 and said["queue_letters"] == 3
        assert (
            said["queue_copied"] == json.loads((backup / "backup.json").read_text())["queue_copied"]
        )
        assert "not delivered by the end of the archive" in said["queue_note"]
        restored = restored_server(server, pgroot)
        server.stop()  # the old one is gone: the disks and the queue's copy survive

        cfg2 = write_config(tmp_path / "restored.toml", new, restored.dsn("pochta"))
        env = {"POCHTA_CONFIG": str(cfg2), "POCHTA_SMTP__ANSWER": "queued"}
        srv = start_server(new, tmp_path / "serve.log", settings=env)
        got = received(srv, "ann@example.org", 3)
        assert sorted(strip_trace(g) for g in got if b"done before" not in g) == sorted(
            [small, big]
        )
        eventually(
            lambda: json.loads(
                runner.invoke(cli, ["queue", "list", "--json", "--config", str(cfg2)]).stdout
            ),
            lambda listed: listed == [],
            what="the queue emptied",
        )
        time.sleep(0.5)
        got = received(srv, "ann@example.org", 3)
        assert len(got) == 3, [g[-200:] for g in got]  # the one delivered before: not again
        log = (tmp_path / "serve.log").read_text()
        assert f"queue entry {ids[done]} was delivered before a restart" in log
    finally:
        if srv is not None:
            srv.stop()
        if pochta is not None:
            pochta.close()
        if restored is not None:
            restored.remove()
        server.remove()
