"""The backup drill on the several-machines recipe (issue 30, item 4; tests/machines.py with
``failover`` and ``archive``): PostgreSQL under Patroni archives its WAL; letters are
delivered over SMTP through both loaders in three batches:

1. before ``pochta backup create`` (run on the admin host against the primary),
2. between the backup and the restore point T,
3. after T;

then the database is lost (both Patroni hosts' Patroni, PostgreSQL and etcd SIGKILLed, the
loaders and Valkyries stopped: an operator's drill), the backup is restored to T into a new
data directory on the db host and a plain PostgreSQL is started on it (no Patroni: the drill
proves the backup, not the failover; a real restore would bootstrap a new Patroni cluster from
it), and from the admin host ``pochta fsck --disks --manifest BACKUP`` runs against it while
a fresh loader reads every mailbox back over HTTPS. The verdict: every letter acknowledged
before T is there byte for byte, no letter after T is, and fsck reports each of their files
(``unindexed``, "not in the backup's manifest") with exit 1, nothing lost or damaged.

Every letter carries an attachment of its own, so that each leaves a file on the disks: a
letter after T with no new file would leave no trace to report (README, Backups).

Used by ``scripts/several-machines --backup-drill`` (a JSON summary).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from pochta.blobs.keys import key_of
from tests.machines import (
    ADMIN,
    DB,
    NODE1,
    PG_PORT,
    ROOT,
    Machines,
    Process,
    dsn,
    settings_env,
)
from tests.mailtools import letter, payload
from tests.pgserver import _run_as, bindir
from tests.several import ID_HEADER, Outgoing, Sender, _wire, add_users, byte_exact

BATCHES = ("before_backup", "before_t", "after_t")


def batch(name: str, first: int, n: int, mailboxes: list[str], seed: int = 30) -> list[Outgoing]:
    """``n`` letters, each to one mailbox with an attachment of its own (a new file)."""
    rng = random.Random(f"{seed}-{name}")
    out = []
    for i in range(first, first + n):
        rcpt = rng.choice(mailboxes)
        content = payload(30_000 + i, rng.randrange(2_000, 40_000))
        body = letter(
            to=rcpt,
            subject=f"backup drill {name} {i}",
            text=f"Letter {i} of the backup drill ({name}).\n",
            attachments=[(f"drill-{i}.bin", content)],
        )
        wire = _wire(ID_HEADER + f"drill-{i}".encode() + b"\r\n" + body)
        out.append(Outgoing(f"drill-{i}", wire, (rcpt,), (content,)))
    return out


def archive_now(machines: Machines, timeout: float = 120.0) -> str:
    """On the primary: close the current WAL segment and wait until it is archived."""
    [(segment,)] = machines.sql("SELECT pg_walfile_name(pg_switch_wal())")
    deadline = time.monotonic() + timeout
    while True:
        [(last,)] = machines.sql("SELECT last_archived_wal FROM pg_stat_archiver")
        if last is not None and last >= segment:
            return str(segment)
        if time.monotonic() > deadline:
            raise RuntimeError(f"WAL segment {segment} not archived within {timeout:.0f} s")
        time.sleep(0.2)


def deliver(machines: Machines, letters: list[Outgoing], threads: int) -> tuple[Any, float]:
    started = time.monotonic()
    result = Sender(machines, letters, threads).run()
    return result, time.monotonic() - started


def start_restored(machines: Machines, pgdata: Path) -> Process:
    """A plain PostgreSQL on the db host's address on the restored directory; waits until
    it has replayed the archive to the target and been promoted (it takes writes)."""
    pg = bindir()
    assert pg is not None
    user = _run_as()
    run_as = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"] if user else []
    options = {  # what Patroni kept elsewhere or named its own; the rest is the copied conf
        "listen_addresses": machines.address(DB),
        "port": str(PG_PORT),
        "unix_socket_directories": str(pgdata.parent),
        "hba_file": str(pgdata / "pg_hba.conf"),
        "ident_file": str(pgdata / "pg_ident.conf"),
        # Patroni's postgresql.conf, copied by pg_basebackup, names db2 as the synchronous
        # standby: alone, every commit would wait for it forever
        "synchronous_standby_names": "",
    }
    args = [*run_as, str(pg / "postgres"), "-D", str(pgdata)]
    args += [a for k, v in options.items() for a in ("-c", f"{k}={v}")]
    url = dsn("pochta", machines.tls(ADMIN).ca, f"{machines.address(DB)}:{PG_PORT}")

    def ready() -> bool:
        def ask() -> bool:
            try:
                with psycopg.connect(url, connect_timeout=2) as conn:
                    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                    return row is not None and row[0] is False
            except psycopg.OperationalError:
                return False

        return bool(machines.admin(ask))

    proc = Process(
        "restored postgres", machines.hosts[DB], args, pgdata.parent / "server.log", ready
    )
    proc.start(timeout=300)
    return proc


def run(
    machines: Machines, per_batch: int = 40, mailboxes: int = 8, threads: int = 4
) -> dict[str, Any]:
    """The drill; a JSON-ready summary whose ``problems`` must be empty."""
    cluster = machines.patroni
    assert cluster is not None and cluster.archive, "Machines.start(failover=True, archive=True)"
    times: dict[str, float] = {}
    started = time.monotonic()
    boxes = [f"drill{i:02d}@example.org" for i in range(mailboxes)]  # none of another run's
    add_users(machines, boxes)
    sent = {name: batch(name, k * per_batch, per_batch, boxes) for k, name in enumerate(BATCHES)}
    problems: list[str] = []
    via: dict[str, dict[str, int]] = {}

    def send(name: str) -> None:
        result, took = deliver(machines, sent[name], threads)
        times[f"deliver_{name}"] = took
        via[name] = dict(result.via)
        problems.extend(result.permanent)
        got = {letter_id for letter_id, _ in result.accepted}
        problems.extend(f"{m.id}: no 250" for m in sent[name] if m.id not in got)

    send("before_backup")
    backup = machines.dir / "backup"
    wal = cluster.wal_archive()
    t0 = time.monotonic()
    created = machines.pochta(
        "backup", "create", "--to", str(backup), "--wal-dir", str(wal), "--json", timeout=600
    )
    times["backup_create"] = time.monotonic() - t0
    info = json.loads(created.stdout)
    send("before_t")
    time.sleep(1.0)
    target = dt.datetime.now(dt.UTC)
    time.sleep(1.0)
    send("after_t")
    archive_now(machines)
    drill_started = time.monotonic()

    # -- the database lost; the services stopped for the drill
    for loader in machines.loaders.values():
        loader.stop(signal.SIGTERM, timeout=15)
    for valkyrie in machines.valkyries:  # none may quarantine the files after T meanwhile
        valkyrie.stop(signal.SIGTERM, timeout=15)
    for name in cluster.pg_hosts:
        cluster.kill(name)

    # -- the restore, into a new directory on the db host, and a plain PostgreSQL on it
    assert cluster.base is not None
    pgdata = cluster.base / "restored" / "data"
    pgdata.parent.mkdir()
    user = _run_as()
    if user is not None:
        shutil.chown(pgdata.parent, user, user)
    t0 = time.monotonic()
    restore_args = ["backup", "restore", "--from", str(backup), "--pgdata", str(pgdata)]
    restore_args += ["--target-time", target.isoformat(), "--json"]
    restore_args += ["--owner", user] if user is not None else []
    # no --config: a restore reads the backup alone (the admin host's pochta, no database)
    done = machines.hosts[ADMIN].run(
        [sys.executable, "-m", "pochta", *restore_args],
        env=settings_env(), capture_output=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"pochta backup restore: exit {done.returncode}: {done.stderr!r}")
    restored_info = json.loads(done.stdout)
    times["restore"] = time.monotonic() - t0
    t0 = time.monotonic()
    server = start_restored(machines, pgdata)
    times["replay_and_promote"] = time.monotonic() - t0
    try:
        # -- fsck from the admin host (its DSN names db first: the restored server)
        t0 = time.monotonic()
        done = machines.pochta(
            "fsck", "--disks", "--manifest", str(backup), "--json", check=False, timeout=600
        )
        times["fsck"] = time.monotonic() - t0
        try:
            report = json.loads(done.stdout)
        except ValueError:
            report = {}
            problems.append(f"fsck: no JSON (exit {done.returncode}): {done.stderr[-500:]!r}")
        # -- a fresh loader on the restored database reads every mailbox back
        t0 = time.monotonic()
        machines._start_loader(NODE1)
        times["fresh_loader"] = time.monotonic() - t0
        t0 = time.monotonic()
        everything = [m for name in BATCHES for m in sent[name]]
        stored, differ = byte_exact(machines, NODE1, everything, boxes)
        times["read_back"] = time.monotonic() - t0
        problems += differ
    finally:
        server.stop(signal.SIGINT)
    times["drill"] = time.monotonic() - drill_started

    before = [m for name in BATCHES[:2] for m in sent[name]]
    after = sent["after_t"]
    restored_ok = sum(stored[(m.id, m.rcpts[0])] == 1 for m in before)
    problems += [
        f"{m.id}: acknowledged before T, stored {stored[(m.id, m.rcpts[0])]} times"
        for m in before
        if stored[(m.id, m.rcpts[0])] != 1
    ]
    problems += [f"{m.id}: after T, yet restored" for m in after if stored[(m.id, m.rcpts[0])]]
    after_keys = {key_of(m.attachments[0]): m.id for m in after}
    unindexed = {line.split(":")[0]: line for line in report.get("unindexed", [])}
    reported = [k for k in after_keys if k in unindexed]
    problems += [f"{after_keys[k]}: after T, its file {k} not reported" for k in after_keys
                 if k not in unindexed]  # fmt: skip
    # a file no letter referenced already when the backup was taken (an upload whose letter
    # failed, under a fault of an earlier run on these machines, not yet quarantined by
    # Valkyrie) is unindexed too, and the manifest has it: counted, not the drill's
    orphans = [line for line in unindexed.values() if "; in the backup's manifest" in line]
    problems += [
        f"fsck: unindexed, not a letter after T: {line}"
        for k, line in unindexed.items()
        if k not in after_keys and line not in orphans
    ]
    problems += [
        f"fsck: {line} (written after the backup: the manifest must not have it)"
        for k, line in unindexed.items()
        if k in after_keys and "not in the backup's manifest" not in line
    ]
    for what in ("lost", "damaged", "undercounted", "unreadable", "miscounted"):
        problems += [f"fsck: {what}: {item}" for item in report.get(what, [])]
    if done.returncode != 1:  # README: fsck's problems (the unindexed files) exit 1
        problems.append(f"fsck exit {done.returncode}, not 1 (files after T reported)")
    return {
        "letters": {name: len(sent[name]) for name in BATCHES},
        "accepted_via": via,
        "target_time": target.isoformat(timespec="milliseconds"),
        "backup": {k: info[k] for k in ("started", "finished", "files")},
        "restore": {k: restored_info.get(k) for k in ("target_time", "newest_wal", "verified")},
        "acknowledged_before_t": len(before),
        "restored_byte_exact": restored_ok,
        "after_t": len(after),
        "after_t_restored": sum(bool(stored[(m.id, m.rcpts[0])]) for m in after),
        "after_t_reported_by_fsck": len(reported),
        "orphans_at_backup": len(orphans),
        "fsck": {
            "exit": done.returncode,
            "ok": report.get("ok"),
            **{k: len(v) for k, v in report.items() if isinstance(v, list)},
            **{k: v for k, v in report.items() if isinstance(v, int) and not isinstance(v, bool)},
        },
        "seconds": {k: round(v, 1) for k, v in times.items()},
        "total_seconds": round(time.monotonic() - started, 1),
        "problems": problems,
    }
