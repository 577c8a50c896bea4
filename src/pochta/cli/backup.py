"""``pochta backup``: backups that restore (issue 30, item 4).

Two kinds, chosen by the installation's settings:

- **postgres** (any store on ``[postgres]``): ``pg_basebackup`` of the server (plain format,
  the WAL it needs streamed into it, a ``backup_manifest`` that ``pg_verifybackup`` checks
  at restore), plus the server's own WAL archive (``archive_command`` copying each segment
  into ``--wal-dir``), plus a manifest of the disks. A restore writes a new data directory
  for PostgreSQL that replays the archive up to ``--target-time`` and is promoted there.
- **embedded** (SQLite and local disks): one consistent cut of every SQLite file of the data
  directory (SQLite's online backup API, all files copied while one connection holds the
  write lock of each, so that no step of a delivery or a deletion is half in one file), the
  data directory's other files, and every stored file of the local disks. A restore writes a
  new data directory, the pairs repointed at their new disks.

Either way the incoming queue (``<data_dir>/queue``, smtp.answer = "queued": letters answered
250 and not yet delivered) is copied, each slot's database through the backup API and the
files its rows name: a letter delivered after that copy is in the queue's copy and, when the
index's copy has it too, its queue id is found there and it is not delivered twice; one
delivered before is in the index's copy. Embedded, the queue is copied while the cut holds
the index's write lock (no delivery ends meanwhile), so every letter answered before the copy
is in the backup. With PostgreSQL it is copied before the base backup, and a restore to a
later time lacks the letters answered after the copy that were not delivered by that time
(they are in the loaders' own queues, when those survive). ``backup.json`` says how many
letters the copy holds and when it was taken; a restore reports both.

Either way the manifest (``disks.jsonl``: one line per stored file, its disk, name, key and
size; the key is the SHA-256 of the content) says what the disks held when the backup was
taken, so that ``pochta fsck --disks --manifest DIR`` tells a letter written after the backup
from one lost since.

Layout of a backup directory: ``backup.json`` (kind, times, what was run), ``disks.jsonl``;
postgres: ``base/`` (pg_basebackup's output) and ``queue/``; embedded: ``data/`` (its ``queue/``
inside) and ``disks/<pair>-<n>/``.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from pochta import errors
from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.blobs.nodes.groupsync import fsync_path, syncfs_of
from pochta.blobs.valkyrie import Kind, parse_name
from pochta.cli.common import (
    ConfigOpt,
    DataOpt,
    JsonOpt,
    emit,
    existing_data_dir,
    handles_errors,
    opened,
    out,
    settings,
)
from pochta.mailbox.queueadmin import copy_queue, listing
from pochta.mailbox.queuedb import slots

app = typer.Typer(
    help="Backups that restore: PostgreSQL base backup + WAL archive, or the embedded"
    " install's SQLite files and disks; a manifest of the disks.",
    no_args_is_help=True,
)

FORMAT = 1
INFO = "backup.json"
MANIFEST = "disks.jsonl"
SQLITE_HEADER = b"SQLite format 3\x00"
SQLITE_SIDE = ("-wal", "-shm", "-journal")
QUEUE = "queue"  # the incoming queue's directory, in the data directory and in a backup


# -- pure: times, the restorable span, recovery settings -----------------------------------------
def parse_time(text: str) -> dt.datetime:
    """An ISO 8601 time; without a zone it is UTC. InvalidInput otherwise."""
    try:
        t = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise errors.InvalidInput(
            f"--target-time {text!r} is not a time: give ISO 8601, e.g. 2026-11-28T14:05:00Z"
        ) from None
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)


def iso(t: dt.datetime | float) -> str:
    if isinstance(t, float | int):
        t = dt.datetime.fromtimestamp(t, dt.UTC)
    return t.astimezone(dt.UTC).isoformat(timespec="milliseconds")


def check_target(target: dt.datetime, finished: dt.datetime, last_wal: dt.datetime | None) -> None:
    """A target time must lie between the base backup's end and the newest archived WAL."""
    if target < finished:
        raise errors.InvalidInput(
            f"--target-time {iso(target)} is before this backup ended ({iso(finished)}): a base"
            " backup restores only to a time after its end; restore an older backup"
        )
    if last_wal is None or target > last_wal:
        where = (
            "no WAL segment is archived"
            if last_wal is None
            else (f"the newest archived WAL segment was archived at {iso(last_wal)}")
        )
        raise errors.InvalidInput(
            f"--target-time {iso(target)} is after what the archive holds ({where}); recovery"
            " could not reach it. Choose an earlier time, or let the server archive more"
            " (SELECT pg_switch_wal(), or archive_timeout)"
        )


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def recovery_settings(wal_dir: Path, target: dt.datetime | None) -> str:
    """The lines appended to the restored server's postgresql.auto.conf. Archiving is off in
    the restored server, so that a drill never writes into the archive it reads."""
    restore = f"cp {_shell_quote(str(wal_dir))}/%f %p"
    lines = [
        "# pochta backup restore",
        f"restore_command = {_quote(restore)}",
        "archive_mode = 'off'",
    ]
    if target is not None:
        lines += [
            f"recovery_target_time = {_quote(iso(target))}",
            "recovery_target_action = 'promote'",
        ]
    return "\n".join(lines) + "\n"


def _shell_quote(path: str) -> str:
    return "'" + path.replace("'", "'\"'\"'") + "'"


def _is_wal_segment(name: str) -> bool:
    return len(name) == 24 and all(c in "0123456789ABCDEF" for c in name)


# -- the backup directory ----------------------------------------------------------------------
@dataclass(frozen=True)
class Info:
    kind: str  # "postgres" | "embedded"
    started: dt.datetime
    finished: dt.datetime
    files: int
    wal_dir: Path | None = None
    queue_letters: int | None = None  # in the incoming queue's copy (None: an older backup)
    queue_copied: dt.datetime | None = None  # when that copy was taken

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "kind": self.kind,
            "started": iso(self.started),
            "finished": iso(self.finished),
            "files": self.files,
            "wal_dir": None if self.wal_dir is None else str(self.wal_dir),
            "queue_letters": self.queue_letters,
            "queue_copied": None if self.queue_copied is None else iso(self.queue_copied),
        }


def read_info(backup: Path) -> Info:
    path = backup / INFO
    if not backup.is_dir():
        raise errors.NotFound(f"no backup at {backup}: the directory is not there")
    try:
        raw = json.loads(path.read_text())
        return Info(
            kind=str(raw["kind"]),
            started=dt.datetime.fromisoformat(raw["started"]),
            finished=dt.datetime.fromisoformat(raw["finished"]),
            files=int(raw["files"]),
            wal_dir=None if raw.get("wal_dir") is None else Path(raw["wal_dir"]),
            queue_letters=None if raw.get("queue_letters") is None else int(raw["queue_letters"]),
            queue_copied=(
                None
                if raw.get("queue_copied") is None
                else dt.datetime.fromisoformat(raw["queue_copied"])
            ),
        )
    except FileNotFoundError:
        raise errors.NotFound(f"no backup at {backup}: it has no {INFO}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise errors.InvalidInput(f"{path} is not a pochta backup's {INFO}: {exc}") from None


def read_manifest(path: Path) -> dict[str, list[str]]:
    """key -> the disks that held it, from a backup directory or its ``disks.jsonl``."""
    if path.is_dir():
        read_info(path)
        path = path / MANIFEST
    found: dict[str, list[str]] = {}
    try:
        with path.open() as f:
            for n, line in enumerate(f, 1):
                try:
                    row = json.loads(line)
                    found.setdefault(str(row["key"]), []).append(str(row["disk"]))
                except (ValueError, KeyError, TypeError):
                    raise errors.InvalidInput(f"{path}, line {n}: not a manifest line") from None
    except OSError as exc:
        raise errors.NotFound(f"no manifest at {path}: {exc.strerror}") from None
    return found


class _Durability:
    """The sync of the backup's filesystem, opened before the backup writes anything: Linux
    reports a writeback error to each syncfs descriptor that was open before it (once), and
    to one opened after only while nobody saw the error yet; another process's syncfs of
    that filesystem (a server's, when the backup shares its filesystem; any ``sync``) may
    have seen it first. None: syncfs cannot be trusted here (each file is fsynced)."""

    def __init__(self, to: Path) -> None:
        anchor = to.absolute()
        while not anchor.is_dir():  # a new directory is made on its parent's filesystem
            anchor = anchor.parent
        try:
            self.group = syncfs_of(anchor)
        except OSError as exc:
            raise errors.StorageError(f"cannot open {anchor} for its syncs: {exc}") from exc
        self.failures = 0 if self.group is None else self.group.failures


def _make_durable(backup: Path, durable: _Durability) -> None:
    """Everything written under ``backup`` on the device, before ``backup.json`` says it is
    done: one ``syncfs`` of its filesystem (through ``durable``'s descriptor, open since
    before the first write; no sync of it may have failed since) where Linux reports
    writeback errors through it, else an fsync of each file and then of each directory
    (bottom up) and of ``backup``'s parent (the backup's own name)."""
    try:
        group = durable.group
        if group is not None:
            group.wait()
            if group.failures != durable.failures:
                raise OSError(errno.EIO, "a sync of its filesystem failed while it was written")
            return
        for root, _, names in os.walk(backup, topdown=False):
            for name in names:
                path = Path(root, name)
                if not path.is_symlink():
                    fsync_path(path)
            fsync_path(Path(root))
        fsync_path(backup.resolve().parent)
    except OSError as exc:
        raise errors.StorageError(
            f"the backup in {backup} could not be made durable: {exc}"
        ) from exc


def _write_info(backup: Path, payload: dict[str, Any], durable: _Durability) -> None:
    """``backup.json``, the mark of a finished backup: written once the rest is durable
    (:func:`_make_durable`), under a temporary name, fsynced, renamed, its directory fsynced."""
    _make_durable(backup, durable)
    tmp = backup / f"{INFO}.tmp"
    try:
        with tmp.open("w") as f:
            f.write(json.dumps(payload, indent=1) + "\n")
            f.flush()
            os.fsync(f.fileno())
        tmp.rename(backup / INFO)
        fsync_path(backup)
    except OSError as exc:
        raise errors.StorageError(f"{backup / INFO} could not be written: {exc}") from exc


def _fresh_dir(path: Path, what: str) -> None:
    """``path`` must be missing or empty; it is created."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise errors.InvalidInput(f"{what} {path} is not empty: give a new directory")
    path.mkdir(parents=True, exist_ok=True)


def _write_manifest(
    pochta: Any, backup: Path, copy_local: bool, keep: Callable[[str], bool] | None = None
) -> int:
    """Walk every disk of every pair; write ``disks.jsonl``; with ``copy_local`` also copy
    each stored file of a local disk into ``disks/<pair>-<n>/``; ``keep``: only the files
    it accepts. Returns the files listed."""
    n = 0
    with (backup / MANIFEST).open("w") as f:
        for pair in pochta.blobs.pairs():
            for i, disk in enumerate(pochta.blobs.disks(pair)):
                target = backup / "disks" / f"{pair.id}-{i}"
                for entry in disk.walk():
                    name = parse_name(entry.name)
                    if name.kind is not Kind.BLOB or name.key is None:
                        continue
                    if keep is not None and not keep(name.key):
                        continue
                    row = {
                        "pair": pair.id,
                        "disk": str(disk.spec),
                        "name": entry.name,
                        "key": name.key,
                        "size": entry.size,
                    }
                    f.write(json.dumps(row) + "\n")
                    n += 1
                    if copy_local and disk.spec.node == "local":
                        dst = target / entry.name
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(Path(disk.spec.root) / entry.name, dst)
        f.flush()
        os.fsync(f.fileno())
    return n


# -- PostgreSQL ----------------------------------------------------------------------------------
def _find_pg_tool(name: str, pg_bin: Path | None) -> str | None:
    """``--pg-bin``, else PATH, else Debian's versioned directories (newest first), which
    hold the tools the PATH wrappers do not (pg_verifybackup)."""
    if pg_bin is not None:
        return str(pg_bin / name) if (pg_bin / name).is_file() else None
    found = shutil.which(name)
    if found is not None:
        return found

    def version(p: Path) -> int:
        v = p.parent.parent.name
        return int(v) if v.isdigit() else 0

    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=version)
    return str(candidates[-1]) if candidates else None


def _pg_tool(name: str, pg_bin: Path | None) -> str:
    found = _find_pg_tool(name, pg_bin)
    if found is None:
        raise errors.ConfigError(
            f"{name} is not installed (Debian: postgresql-client); or give --pg-bin DIR"
        )
    return found


def _pg_env(dsn: str) -> tuple[str, dict[str, str]]:
    """The DSN without its password, and an environment that carries it: a password never
    appears on a command line (``ps`` shows those)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    env = dict(os.environ)
    password = params.pop("password", None)
    if password is not None:
        env["PGPASSWORD"] = password
    # libpq cannot check it on a replication connection; a base backup of a standby (the
    # first host that answers) is as good as one of the primary
    params.pop("target_session_attrs", None)
    return make_conninfo(**params), env


def _run(args: list[str], env: dict[str, str] | None, what: str) -> None:
    try:
        subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or exc.stdout or "").strip()[-1500:]
        raise errors.StorageError(f"{what} failed (exit {exc.returncode}): {tail}") from None


def _archiving(dsn: str) -> str:
    """The server's archive_mode."""
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            mode = conn.execute("SHOW archive_mode").fetchone()
    except psycopg.Error as exc:
        raise errors.StorageError(f"cannot ask PostgreSQL about archiving: {exc}") from None
    return str(mode[0] if mode else "")


def newest_wal(wal_dir: Path) -> dt.datetime | None:
    """When the newest archived WAL segment was written into the archive."""
    newest = None
    for entry in os.scandir(wal_dir):
        if _is_wal_segment(entry.name):
            m = entry.stat().st_mtime
            newest = m if newest is None or m > newest else newest
    return None if newest is None else dt.datetime.fromtimestamp(newest, dt.UTC)


def _create_postgres(
    s: Any, data: Path | None, config: Path | None, to: Path, wal_dir: Path | None,
    pg_bin: Path | None,
) -> Info:  # fmt: skip
    if s.postgres.dsn is None:
        raise errors.ConfigError("postgres.dsn is not set: nothing to back up")
    if s.postgres.filedb_shards:  # a backup of dsn's server alone would miss FileDB's records
        raise errors.ConfigError(
            "postgres.filedb_shards is set: this command backs up the dsn's server only; back"
            " up every shard's primary with its own WAL archive (pg_basebackup) and restore"
            " them all to one --target-time (docs/sizing.md, Backups with shards)"
        )
    if wal_dir is None:
        raise errors.InvalidInput(
            "--wal-dir is needed: the directory the server's archive_command copies WAL into"
        )
    if not wal_dir.is_dir():
        raise errors.NotFound(f"no WAL archive at {wal_dir}: the directory is not there")
    dsn = s.postgres.dsn.get_secret_value()
    mode = _archiving(dsn)
    if mode not in ("on", "always"):
        raise errors.ConfigError(
            f"the server's archive_mode is {mode!r}: without a WAL archive a base backup"
            " restores to its own end only. Set archive_mode = on and archive_command ="
            f" 'test ! -f {wal_dir}/%f && cp %p {wal_dir}/%f' (see README, Backups)"
        )
    tool = _pg_tool("pg_basebackup", pg_bin)
    _fresh_dir(to, "--to")
    started = dt.datetime.now(dt.UTC)
    letters = copy_queue(s.data_dir.resolve() / QUEUE, to / QUEUE)  # before the index
    copied = dt.datetime.now(dt.UTC)
    conninfo, env = _pg_env(dsn)
    label = f"pochta {iso(started)}"
    args = [tool, "-d", conninfo, "-D", str(to / "base"), "-Fp", "-X", "stream"]
    _run([*args, "-c", "fast", "-l", label, "--no-password"], env, "pg_basebackup")
    finished = dt.datetime.now(dt.UTC)
    with opened(data, config) as pochta:
        files = _write_manifest(pochta, to, copy_local=False)
    return Info("postgres", started, finished, files, wal_dir.resolve(), letters, copied)


def _restore_queue(backup: Path, data_dir: Path) -> int:
    """A postgres backup's ``queue/`` into ``data_dir/queue`` (refused there when it holds
    slots: two queues are never mixed). How many slots."""
    found = slots(backup / QUEUE)
    if not found:
        return 0
    target = data_dir / QUEUE
    if slots(target):
        raise errors.InvalidInput(f"--data: {target} holds a queue already; give a new directory")
    shutil.copytree(backup / QUEUE, target, dirs_exist_ok=True)
    return len(found)


def _queue_state(info: Info, queue: Path, target: dt.datetime | None) -> dict[str, Any]:
    """What the restored queue holds (its letters counted in ``queue``, read creating
    nothing) and, with PostgreSQL, what a restore to a later time lacks."""
    letters = len(listing(queue)) if slots(queue) else 0
    state: dict[str, Any] = {
        "queue_letters": letters,
        "queue_copied": None if info.queue_copied is None else iso(info.queue_copied),
    }
    if info.kind == "postgres":
        since = "the queue's copy" if info.queue_copied is None else iso(info.queue_copied)
        until = "the end of the archive" if target is None else iso(target)
        state["queue_note"] = (
            f"letters answered 250 after {since} and not delivered by {until} are not in this"
            " restore: they are in the loaders' own queues (<data_dir>/queue) when those"
            " survived; letters delivered after the target time are gone with the index"
        )
    return state


def _restore_postgres(
    info: Info, backup: Path, pgdata: Path | None, target: dt.datetime | None,
    wal_dir: Path | None, owner: str | None, pg_bin: Path | None, data: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    if pgdata is None:
        raise errors.InvalidInput("--pgdata is needed: the new PostgreSQL data directory")
    if data is None and slots(backup / QUEUE):
        raise errors.InvalidInput(
            "--data is needed: the backup holds the incoming queue's letters (answered 250,"
            " not delivered yet); give the data directory the restored pochta will run on"
        )
    if data is not None and slots(data / QUEUE):
        raise errors.InvalidInput(f"--data: {data / QUEUE} holds a queue already")
    wal = wal_dir or info.wal_dir
    if wal is None or not wal.is_dir():
        raise errors.NotFound(f"no WAL archive at {wal}: give --wal-dir")
    last_wal = newest_wal(wal)
    if target is not None:
        check_target(target, info.finished, last_wal)
    verify = _find_pg_tool("pg_verifybackup", pg_bin)
    if verify is not None:  # the files against the backup_manifest pg_basebackup wrote
        _run([verify, "--no-parse-wal", str(backup / "base")], None, "pg_verifybackup")
    _fresh_dir(pgdata, "--pgdata")
    pgdata.rmdir()
    shutil.copytree(backup / "base", pgdata, symlinks=True)
    pgdata.chmod(0o700)
    # a base backup of a standby (the first host of a DSN that names several) carries its
    # standby.signal, which outranks recovery.signal: the restored server would stay a
    # standby of a primary that is gone and never reach the target
    (pgdata / "standby.signal").unlink(missing_ok=True)
    (pgdata / "recovery.signal").touch()
    with (pgdata / "postgresql.auto.conf").open("a") as f:
        f.write(recovery_settings(wal.resolve(), target))
    if owner is not None:
        for path in [pgdata, *pgdata.rglob("*")]:
            shutil.chown(path, owner, owner)
    queue = None if data is None else _restore_queue(backup, data)
    state = _queue_state(info, backup / QUEUE, target)
    return {
        **state,
        "queue_slots": queue,
        "kind": "postgres",
        "pgdata": str(pgdata),
        "target_time": None if target is None else iso(target),
        "wal_dir": str(wal),
        "newest_wal": None if last_wal is None else iso(last_wal),
        "verified": verify is not None,
    }


# -- embedded: SQLite files and local disks ------------------------------------------------------
def _sqlite_files(data_dir: Path) -> list[Path]:
    found = []
    for path in sorted(data_dir.iterdir()):
        if path.is_file() and not path.name.endswith(SQLITE_SIDE):
            with path.open("rb") as f:
                if f.read(16) == SQLITE_HEADER:
                    found.append(path)
    return found


TOGETHER = ("filedb.sqlite3", "pairdb.sqlite3", "mailbox.sqlite3")  # a delivery spans these
ATTACH_LIMIT = 10  # SQLite's default SQLITE_MAX_ATTACHED + the main database


def snapshot_sqlite(
    files: list[Path],
    target: Path,
    busy_timeout: float = 60.0,
    during: Callable[[], object] | None = None,
) -> None:
    """One consistent cut of several SQLite files: one connection attaches them and takes the
    write lock of each (BEGIN IMMEDIATE locks every attached file); while it holds them,
    ``during`` runs (the incoming queue's copy: no delivery ends meanwhile) and each file is
    copied through its own reading connection with the online backup API.
    Writers wait (their busy timeout), readers go on; no step of a delivery or a deletion
    is in one copy and not in another. Past SQLite's limit of attached files, the files no
    step spans with another (guard, history, counters) are copied each at its own instant."""
    if not files:
        if during is not None:
            during()
        return
    ordered = sorted(files, key=lambda p: (p.name not in TOGETHER, p.name))
    locked, alone = ordered[:ATTACH_LIMIT], ordered[ATTACH_LIMIT:]
    lock = sqlite3.connect(locked[0], timeout=busy_timeout, isolation_level=None)
    try:
        for i, path in enumerate(locked[1:]):
            lock.execute("ATTACH DATABASE ? AS ?", (str(path), f"f{i}"))
        lock.execute("BEGIN IMMEDIATE")
        try:
            if during is not None:
                during()
            for path in locked:
                _copy_sqlite(path, target, busy_timeout)
        finally:
            lock.execute("ROLLBACK")
        for path in alone:
            _copy_sqlite(path, target, busy_timeout)
    except sqlite3.Error as exc:
        raise errors.StorageError(f"SQLite backup failed: {exc}") from None
    finally:
        lock.close()


def _copy_sqlite(path: Path, target: Path, busy_timeout: float) -> None:
    src = sqlite3.connect(path, timeout=busy_timeout)
    dst = sqlite3.connect(target / path.name)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def _local_roots(pochta: Any) -> list[Path]:
    return [
        Path(d.root).resolve()
        for pair in pochta.blobs.pairs()
        for d in pair.disks
        if d.node == "local"
    ]


def _other_files(data_dir: Path, skip: list[Path]) -> Iterator[Path]:
    """The data directory's files that are neither SQLite files nor inside a local disk."""
    for root, dirs, names in os.walk(data_dir):
        here = Path(root).resolve()
        dirs[:] = [d for d in dirs if (here / d) not in skip]
        for name in names:
            path = Path(root, name)
            if here == data_dir.resolve() and (path in skip or name.endswith(SQLITE_SIDE)):
                continue
            yield path


def _create_embedded(s: Any, data: Path | None, config: Path | None, to: Path) -> Info:
    existing_data_dir(s, data, config)
    data_dir = s.data_dir
    _fresh_dir(to, "--to")
    (to / "data").mkdir()
    started = dt.datetime.now(dt.UTC)
    queue = (data_dir / QUEUE).resolve()
    taken: list[tuple[int, dt.datetime]] = []  # the queue's copy: letters, when

    def copy() -> None:  # inside the cut: no delivery ends while the queue is copied; no
        # fsync there (each held every SQLite file's write lock some ms longer): the copy
        # is made durable with the rest of the backup (_write_info)
        letters = copy_queue(queue, to / "data" / QUEUE, durable=False)
        taken.append((letters, dt.datetime.now(dt.UTC)))

    with opened(data, config) as pochta:
        roots = _local_roots(pochta)
        dbs = _sqlite_files(data_dir)
        snapshot_sqlite(dbs, to / "data", during=copy)
        skip = [*roots, *dbs, queue]
        for path in _other_files(data_dir, skip):
            dst = to / "data" / path.relative_to(data_dir)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dst)
        # after the databases: every file their records name is on the disks by now; a file
        # the copied FileDB does not know (an upload after the cut) is left out, as the
        # orphan it would be in the restored installation
        copied = SQLiteFileDB(to / "data" / "filedb.sqlite3")
        try:
            files = _write_manifest(
                pochta, to, copy_local=True, keep=lambda key: copied.get(key) is not None
            )
        finally:
            copied.close()
    ((letters, at),) = taken
    return Info("embedded", started, dt.datetime.now(dt.UTC), files, None, letters, at)


def _restore_embedded(backup: Path, data_dir: Path) -> dict[str, Any]:
    _fresh_dir(data_dir, "--data")
    shutil.copytree(backup / "data", data_dir, dirs_exist_ok=True)
    moved = []
    pairdb = data_dir / "pairdb.sqlite3"
    with sqlite3.connect(pairdb) as conn:
        rows = conn.execute("SELECT id, node_a, root_a, node_b, root_b FROM pairs").fetchall()
        for pair_id, node_a, root_a, node_b, root_b in rows:
            roots = []
            for i, (node, root) in enumerate(((node_a, root_a), (node_b, root_b))):
                if node != "local":
                    roots.append(root)
                    continue
                new = data_dir / "disks" / f"{pair_id}-{i}"
                new.mkdir(parents=True, exist_ok=True)
                (new / "tmp").mkdir(exist_ok=True)
                copied = backup / "disks" / f"{pair_id}-{i}"
                if copied.is_dir():
                    shutil.copytree(copied, new, dirs_exist_ok=True)
                roots.append(str(new.resolve()))
                moved.append({"pair": pair_id, "disk": i, "from": root, "to": str(new)})
            conn.execute("UPDATE pairs SET root_a = ?, root_b = ? WHERE id = ?", (*roots, pair_id))
    return {"kind": "embedded", "data_dir": str(data_dir), "disks": moved}


def kind_of(s: Any) -> str:
    """postgres when the index and the blob store are there, embedded when both are SQLite;
    a mix is refused (neither kind of backup would hold both)."""
    backends = {"mailbox.backend": s.mailbox.backend, "blobs.backend": s.blobs.backend}
    if set(backends.values()) == {"postgres"}:
        return "postgres"
    if "postgres" not in backends.values():
        return "embedded"
    shown = ", ".join(f"{k} = {v}" for k, v in backends.items())
    raise errors.ConfigError(
        f"{shown}: pochta backup covers an installation whose index and blob store are both"
        " on PostgreSQL or both embedded"
    )


# -- the commands --------------------------------------------------------------------------------
ToOpt = Annotated[Path, typer.Option("--to", help="a new (or empty) directory for the backup")]
WalOpt = Annotated[
    Path | None,
    typer.Option("--wal-dir", help="PostgreSQL: the directory archive_command copies WAL into"),
]
PgBinOpt = Annotated[
    Path | None,
    typer.Option("--pg-bin", help="where pg_basebackup / pg_verifybackup are (default: PATH)"),
]


@app.command()
@handles_errors
def create(
    to: ToOpt,
    wal_dir: WalOpt = None,
    pg_bin: PgBinOpt = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Take a consistent backup without stopping pochta: with PostgreSQL, pg_basebackup and
    the manifest of the disks (the WAL archive in --wal-dir carries it forward in time);
    embedded, every SQLite file at one instant, the data directory and the local disks."""
    s = settings(data, config)
    kind = kind_of(s)
    durable = _Durability(to)  # before anything is written (see _Durability)
    if kind == "postgres":
        info = _create_postgres(s, data, config, to, wal_dir, pg_bin)
    else:
        info = _create_embedded(s, data, config, to)
    payload = {**info.as_dict(), "backup": str(to)}
    _write_info(to, payload, durable)
    emit(
        json_output,
        payload,
        lambda: out.print(
            f"{info.kind} backup in {to}: {info.files:,} stored files in its manifest;"
            f" restorable from {iso(info.finished)}"
            + (" to the newest archived WAL" if info.kind == "postgres" else " (that moment)")
        ),
    )


@app.command()
@handles_errors
def show(
    backup: Annotated[Path, typer.Argument(help="a backup directory")],
    json_output: JsonOpt = False,
) -> None:
    """A backup's kind, its times, and (PostgreSQL) the span a restore can reach."""
    info = read_info(backup)
    payload = info.as_dict()
    if info.kind == "postgres" and info.wal_dir is not None and info.wal_dir.is_dir():
        last = newest_wal(info.wal_dir)
        payload["restorable_until"] = None if last is None else iso(last)
    emit(
        json_output,
        payload,
        lambda: out.print("\n".join(f"{k:<17} {v}" for k, v in payload.items())),
    )


@app.command()
@handles_errors
def restore(
    source: Annotated[Path, typer.Option("--from", help="the backup directory")],
    target_time: Annotated[
        str | None,
        typer.Option(
            "--target-time",
            help="PostgreSQL: recover to this time (ISO 8601; no zone = UTC); default: all"
            " the archived WAL",
        ),
    ] = None,
    pgdata: Annotated[
        Path | None,
        typer.Option("--pgdata", help="PostgreSQL: the new (empty) server data directory"),
    ] = None,
    wal_dir: WalOpt = None,
    owner: Annotated[
        str | None,
        typer.Option("--owner", help="PostgreSQL: chown the new data directory to this user"),
    ] = None,
    pg_bin: PgBinOpt = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="embedded: the new (empty) data directory to restore into; PostgreSQL: where"
            " the backup's incoming queue goes (needed when it holds letters)",
        ),
    ] = None,
    json_output: JsonOpt = False,
) -> None:
    """Restore a backup into new directories. PostgreSQL: a server data directory that, once
    started, replays the archived WAL to --target-time and is promoted there; then point
    pochta at it and run `pochta fsck --disks --manifest BACKUP`. Embedded: a new data
    directory with the disks inside it."""
    info = read_info(source)
    target = None if target_time is None else parse_time(target_time)
    if info.kind == "postgres":
        result = _restore_postgres(info, source, pgdata, target, wal_dir, owner, pg_bin, data)
        steps = (
            f"start PostgreSQL on {result['pgdata']} (pg_ctl -D ... start, as its owner): it"
            " replays the archive"
            + (f" to {result['target_time']}" if target else "")
            + " and is promoted; then `pochta db status` and"
            f" `pochta fsck --disks --manifest {source}` against it"
        )
    else:
        if target is not None:
            raise errors.InvalidInput(
                f"--target-time: an embedded backup restores to the moment it was taken"
                f" ({iso(info.finished)}) only"
            )
        if data is None:
            raise errors.InvalidInput("--data is needed: the new data directory")
        result = _restore_embedded(source, data)
        result.update(_queue_state(info, data / QUEUE, None))
        steps = f"run `pochta fsck --disks --manifest {source} --data {data}`"
    queued = f"the incoming queue's copy: {result['queue_letters']} letter(s)"
    if result["queue_copied"] is not None:
        queued += f", taken at {result['queue_copied']}"
    if result["queue_letters"]:
        queued += ", delivered by the first server started on that data directory"
    if "queue_note" in result:
        queued += f"; {result['queue_note']}"
    emit(
        json_output,
        {**result, "next": steps},
        lambda: out.print(f"restored; {queued}.\nnext: {steps}"),
    )
