"""Valkyrie: one scrubber per disk (SPEC §2, seed 004).

The decision for one file is a pure function, ``decide``, of what is known about it (its name
and age, the FileDB records of its key, which disk of which pair it is on) and of the time;
``Valkyrie`` is the I/O loop around it: it walks a disk in name order, asks ``decide``, acts,
counts, and saves its position every few files so that the next run resumes where it stopped.

    <key>.deleted.<ts>       quarantine: purged once ts + quarantine period has passed; renamed
                             back first if its key is live on this pair and the file is missing
    tmp/*.part               a temporary upload: deleted once older than ``tmp_max_age``
    <key>, live here         re-hashed; a corrupt copy is replaced from the sibling disk, a
                             missing sibling copy is recreated; a stale space1 record is dropped
    <key>, live elsewhere    a stray copy: quarantined once the owner's two copies are checked
    <key>, space1 here       quarantined: by the master disk (first bit of the key) at once, by
                             the other after ``slave_delay``, which then drops the space1 record
    <key>, no record         an orphan: quarantined (once older than ``orphan_min_age``)

Nothing is deleted without the quarantine step; every quarantine is checked again right after
the rename and undone when the key has come back to life on this pair meanwhile.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import logging
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from pochta.blobs.keys import blob_path, master_index
from pochta.blobs.store import BlobStore
from pochta.errors import DiskError, InvalidInput, LeaseLost, MissingFile, PochtaError
from pochta.guard.lock import Lease, Locks
from pochta.guard.singleton import Singleton
from pochta.sqlitedb import SQLiteDatabase
from pochta.types import Disk, DiskSpec, Fence, FileRecord, Key, Pair, PairFlag

log = logging.getLogger(__name__)

CHUNK = 1 << 20
QUARANTINE_MARK = ".deleted."
STATE_FILE = "valkyrie.sqlite3"


# -- settings ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ValkyrieConfig:
    """How Valkyrie behaves; mirrors ``ValkyrieSettings`` in config.py."""

    budget_mb_per_s: float | None = 20.0  # disk reads per scrubber; None: unthrottled
    quarantine_seconds: float = 7 * 86400.0  # how long a quarantined file is kept
    slave_delay_seconds: float = 3600.0  # the non-master disk waits this long after the move
    tmp_max_age_seconds: float = 86400.0  # temporary uploads older than this are removed
    orphan_min_age_seconds: float = 3600.0  # younger unrecorded files may be uploads in flight
    pass_interval_seconds: float = 3600.0  # pause between two passes in ``pochta serve``
    checkpoint_every: int = 200  # files between two saves of the position

    @classmethod
    def from_settings(cls, section: object | None) -> ValkyrieConfig:
        """From ``settings.valkyrie`` (any object with attributes of these names); the
        defaults for what it lacks, or for everything when it is None."""
        if section is None:
            return cls()
        values = {f.name: getattr(section, f.name) for f in fields(cls) if hasattr(section, f.name)}
        return cls(**values)


# -- names -------------------------------------------------------------------------------------
class Kind(enum.Enum):
    BLOB = "blob"
    QUARANTINE = "quarantine"
    TMP = "tmp"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Name:
    kind: Kind
    key: Key | None = None
    ts: int | None = None  # when quarantined (QUARANTINE only)


_BLOB_RE = re.compile(r"([0-9a-f]{2})/([0-9a-f]{2})/([0-9a-f]{64})(?:\.deleted\.(\d+))?")


def parse_name(name: str) -> Name:
    """What a file on a disk is, from its relative name alone."""
    if name.startswith("tmp/") and name.endswith(".part"):
        return Name(Kind.TMP)
    m = _BLOB_RE.fullmatch(name)
    if m is None or m[3][:2] != m[1] or m[3][2:4] != m[2]:
        return Name(Kind.OTHER)
    if m[4] is not None:
        return Name(Kind.QUARANTINE, m[3], int(m[4]))
    return Name(Kind.BLOB, m[3])


def quarantine_name(key: Key, now: float) -> str:
    return f"{blob_path(key)}{QUARANTINE_MARK}{int(now)}"


# -- the pure decision ---------------------------------------------------------------------------
class Action(enum.Enum):
    SKIP = "skip"
    VERIFY = "verify"  # re-hash; repair from / to the sibling
    CHECK = "check"  # re-hash only: the pair is in SERVICE, nothing is written
    PURGE = "purge"  # delete a quarantined file whose period has passed
    RESTORE = "restore"  # rename a quarantined file back: its key is live here again
    DELETE_TMP = "delete_tmp"
    QUARANTINE_DELETED = "quarantine_deleted"  # space1 on this pair
    QUARANTINE_ORPHAN = "quarantine_orphan"  # no record on this pair
    STRAY = "stray"  # live on another pair: quarantine after checking the owner's copies


@dataclass(frozen=True, slots=True)
class Seen:
    """What the loop knows about one file when it asks what to do with it."""

    name: Name
    mtime: float
    pair_id: int
    disk_index: int  # 0 or 1 within the pair
    live: FileRecord | None = None  # the key's live record
    deleted: FileRecord | None = None  # the key's space1 record
    blob_present: bool = True  # QUARANTINE: whether ``ab/cd/<key>`` is on this disk
    service: bool = False  # the pair is in SERVICE: report, never write


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    forget_space1: bool = False  # drop the space1 record (after the action succeeded)


def decide(seen: Seen, config: ValkyrieConfig, now: float) -> Decision:
    """What to do with one file. Pure: no I/O, time passed in."""
    name = seen.name
    age = now - seen.mtime
    live_here = seen.live is not None and seen.live.pair_id == seen.pair_id
    if name.kind is Kind.OTHER:
        return Decision(Action.SKIP)
    if seen.service:
        return Decision(Action.CHECK if name.kind is Kind.BLOB and live_here else Action.SKIP)
    if name.kind is Kind.TMP:
        return Decision(Action.DELETE_TMP if age > config.tmp_max_age_seconds else Action.SKIP)
    if name.kind is Kind.QUARANTINE:
        if live_here and not seen.blob_present:
            return Decision(Action.RESTORE)
        assert name.ts is not None
        if now >= name.ts + config.quarantine_seconds:
            return Decision(Action.PURGE)
        return Decision(Action.SKIP)
    # a blob
    if live_here:
        stale = seen.deleted is not None
        return Decision(Action.VERIFY, forget_space1=stale)
    old_enough = age >= config.orphan_min_age_seconds
    if seen.live is not None:  # live on another pair
        return Decision(Action.STRAY if old_enough else Action.SKIP)
    deleted = seen.deleted
    if deleted is not None and deleted.pair_id == seen.pair_id:
        moved_at = deleted.moved_at or 0.0
        if seen.mtime >= moved_at:
            return Decision(Action.SKIP)  # written after the move: an upload may be finishing
        assert name.key is not None
        if master_index(name.key) == seen.disk_index:
            return Decision(Action.QUARANTINE_DELETED)
        if now >= moved_at + config.slave_delay_seconds:
            return Decision(Action.QUARANTINE_DELETED, forget_space1=True)
        return Decision(Action.SKIP)
    return Decision(Action.QUARANTINE_ORPHAN if old_enough else Action.SKIP)


# -- the I/O budget ------------------------------------------------------------------------------
class Throttle:
    """A token bucket over bytes read: ``spend(n)`` sleeps as long as needed to keep the
    average at ``mb_per_s`` (bursts of up to one second's worth)."""

    def __init__(
        self,
        mb_per_s: float | None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = None if mb_per_s is None or mb_per_s <= 0 else mb_per_s * 1e6
        self._monotonic = monotonic
        self._sleep = sleep
        self._allowance = self.rate or 0.0
        self._last = monotonic()

    def spend(self, n: int) -> None:
        if self.rate is None:
            return
        now = self._monotonic()
        self._allowance = min(self._allowance + (now - self._last) * self.rate, self.rate)
        self._last = now
        self._allowance -= n
        if self._allowance < 0:
            wait = -self._allowance / self.rate
            self._sleep(wait)
            self._allowance = 0.0
            self._last = self._monotonic()


# -- what a pass did -------------------------------------------------------------------------------
@dataclass(slots=True)
class Counts:
    checked: int = 0  # files looked at
    verified: int = 0  # live files re-hashed
    repaired: int = 0  # copies replaced, recreated or restored from quarantine
    quarantined: int = 0  # deleted files moved into quarantine
    purged: int = 0  # quarantined files removed after their period
    orphans: int = 0  # files without a record, quarantined
    strays: int = 0  # copies on a wrong pair, quarantined
    tmp_removed: int = 0
    space1_dropped: int = 0
    errors: int = 0
    bytes: int = 0  # bytes read

    def add(self, other: Counts) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


COUNT_NAMES = [f.name for f in fields(Counts)]


@dataclass(slots=True)
class PassReport:
    disk: str
    pair: int
    index: int
    counts: Counts = field(default_factory=Counts)
    complete: bool = False  # reached the end of the disk
    busy: bool = False  # another Valkyrie holds this disk
    problems: list[str] = field(default_factory=list)  # the first few errors, one line each

    def as_dict(self) -> dict[str, Any]:
        return {
            "disk": self.disk,
            "pair": self.pair,
            "index": self.index,
            "complete": self.complete,
            "busy": self.busy,
            **self.counts.as_dict(),
            "problems": self.problems,
        }


# -- persisted position and totals ---------------------------------------------------------------
_COLS = ", ".join(f"{n} INTEGER NOT NULL DEFAULT 0" for n in COUNT_NAMES)
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS disks (
    disk TEXT PRIMARY KEY,
    position TEXT NOT NULL DEFAULT '',
    passes INTEGER NOT NULL DEFAULT 0,
    last_pass REAL,
    {_COLS}
);
"""


class StateStore(Protocol):
    """Where Valkyrie keeps each disk's position and running totals: ``ValkyrieState``
    (SQLite, embedded) or ``pochta.blobs.valkyrie_postgres.PostgresValkyrieState``."""

    def position(self, disk: str) -> str:
        """The name the last pass stopped after ("" for a pass from the start)."""

    def save(self, disk: str, position: str, delta: Counts, *, finished_at: float | None) -> None:
        """Store the position ("" after a finished pass) and add ``delta`` to the totals;
        ``finished_at``: the pass ended then (passes + 1, last_pass)."""

    def summary(self) -> dict[str, Any]:
        """Totals over every disk, and each disk's own (for ``pochta stats``)."""

    def close(self) -> None: ...


def summarize(rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """Rows of (disk, position, passes, last_pass, *COUNT_NAMES) as ``StateStore.summary``."""
    disks = []
    totals = dict.fromkeys(COUNT_NAMES, 0)
    for row in rows:
        counts = dict(zip(COUNT_NAMES, row[4:], strict=True))
        for n, v in counts.items():
            totals[n] += v
        disks.append(
            {"disk": row[0], "position": row[1], "passes": row[2], "last_pass": row[3]} | counts
        )
    return {**totals, "disks": disks}


class ValkyrieState:
    """Each disk's position and running totals, in a small SQLite file (``valkyrie.sqlite3``
    in the data directory). Writes are short; nothing is held open during a scan."""

    def __init__(self, path: Path) -> None:
        self._db = SQLiteDatabase(path, SCHEMA, synchronous="normal")

    def position(self, disk: str) -> str:
        rows = self._db.query("SELECT position FROM disks WHERE disk = ?", (disk,))
        return str(rows[0][0]) if rows else ""

    def save(self, disk: str, position: str, delta: Counts, *, finished_at: float | None) -> None:
        """Store the position (``""`` after a finished pass) and add ``delta`` to the totals."""
        values = [delta.as_dict()[n] for n in COUNT_NAMES]
        sets = ", ".join(f"{n} = {n} + ?" for n in COUNT_NAMES)

        def step(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR IGNORE INTO disks (disk) VALUES (?)", (disk,))
            conn.execute(
                f"UPDATE disks SET position = ?, {sets} WHERE disk = ?",  # noqa: S608
                (position, *values, disk),
            )
            if finished_at is not None:
                conn.execute(
                    "UPDATE disks SET passes = passes + 1, last_pass = ? WHERE disk = ?",
                    (finished_at, disk),
                )

        self._db.write(step)

    def summary(self) -> dict[str, Any]:
        """Totals over every disk, and each disk's own (for ``pochta stats``)."""
        rows = self._db.query(
            f"SELECT disk, position, passes, last_pass, {', '.join(COUNT_NAMES)}"  # noqa: S608
            " FROM disks ORDER BY disk"
        )
        return summarize(rows)

    def close(self) -> None:
        self._db.close()


# -- the loop ------------------------------------------------------------------------------------
def lock_name(spec: DiskSpec) -> str:
    return "valkyrie:" + hashlib.sha256(str(spec).encode()).hexdigest()[:24]


class _Stopped(Exception):
    pass


class Valkyrie:
    """Scrubs disks of a ``BlobStore``: ``run_disk`` one pass (or what is left of it) over one
    disk, ``run_all`` over every disk in turn."""

    def __init__(
        self,
        store: BlobStore,
        state: StateStore,
        config: ValkyrieConfig | None = None,
        *,
        locks: Locks | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.state = state
        self.config = config or ValkyrieConfig()
        self.locks = locks
        self._clock = clock
        self._monotonic = monotonic
        self._sleep = sleep

    @classmethod
    def open(
        cls,
        store: BlobStore,
        data_dir: Path,
        config: ValkyrieConfig | None = None,
        *,
        locks: Locks | None = None,
    ) -> Valkyrie:
        """A Valkyrie keeping its state in ``<data_dir>/valkyrie.sqlite3``; close it after."""
        return cls(store, ValkyrieState(data_dir / STATE_FILE), config, locks=locks)

    def close(self) -> None:
        self.state.close()

    def disks(self) -> list[tuple[Pair, int]]:
        return [(p, i) for p in self.store.pairdb.list() for i in (0, 1)]

    def find_disk(self, spec: str) -> tuple[Pair, int]:
        """A disk by its position in ``disks()`` (0-based) or by its root / URL."""
        disks = self.disks()
        if spec.isdigit() and int(spec) < len(disks):
            return disks[int(spec)]
        for pair, index in disks:
            d = pair.disks[index]
            if spec in (str(d), d.root) or (
                d.node == "local" and Path(spec).expanduser().resolve() == Path(d.root)
            ):
                return pair, index
        raise InvalidInput(f"no disk {spec!r}: give an index 0..{len(disks) - 1} or a disk's root")

    def run_all(
        self, stop: threading.Event | None = None, progress: Callable[[int], None] | None = None
    ) -> list[PassReport]:
        reports = []
        for pair, index in self.disks():
            if stop is not None and stop.is_set():
                break
            reports.append(self.run_disk(pair, index, stop=stop, progress=progress))
        return reports

    def run_disk(
        self,
        pair: Pair,
        index: int,
        *,
        stop: threading.Event | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> PassReport:
        """One pass over a disk, resumed from the saved position; stops early (position
        saved) when ``stop`` is set or the lease is lost."""
        spec = pair.disks[index]
        report = PassReport(str(spec), pair.id, index)
        lease: Lease | None = None
        if self.locks is not None:
            lease = self.locks.try_acquire(lock_name(spec))
            if lease is None:
                report.busy = True
                return report
        try:
            self._pass(pair, index, report, lease, stop, progress)
        finally:
            if lease is not None:
                with contextlib.suppress(PochtaError):
                    lease.release()
        return report

    def _pass(
        self,
        pair: Pair,
        index: int,
        report: PassReport,
        lease: Lease | None,
        stop: threading.Event | None,
        progress: Callable[[int], None] | None,
    ) -> None:
        disk = self.store.disk(pair.disks[index])
        throttle = Throttle(
            self.config.budget_mb_per_s, monotonic=self._monotonic, sleep=self._sleep
        )
        position = self.state.position(report.disk)
        delta = Counts()
        since_save = 0
        try:
            for entry in disk.walk(position):
                if (stop is not None and stop.is_set()) or (
                    lease is not None and not lease.is_held()
                ):
                    raise _Stopped
                before = delta.bytes
                try:
                    self._one(pair, index, entry.name, entry.mtime, delta, throttle)
                except (PochtaError, OSError) as exc:
                    delta.errors += 1
                    message = getattr(exc, "message", str(exc))
                    if len(report.problems) < 20:
                        report.problems.append(f"{entry.name}: {message}")
                    log.warning("valkyrie %s: %s: %s", report.disk, entry.name, message)
                delta.checked += 1
                if progress is not None:
                    progress(max(1, delta.bytes - before))
                position = entry.name
                since_save += 1
                if since_save >= self.config.checkpoint_every:
                    self.state.save(report.disk, position, delta, finished_at=None)
                    report.counts.add(delta)
                    delta, since_save = Counts(), 0
        except _Stopped:
            self.state.save(report.disk, position, delta, finished_at=None)
            report.counts.add(delta)
            return
        except DiskError as exc:  # the disk cannot be listed: its root is gone, or it fails
            delta.errors += 1
            report.problems.append(exc.message)
            log.error("valkyrie %s: %s", report.disk, exc.message)
            self.state.save(report.disk, position, delta, finished_at=None)
            report.counts.add(delta)
            return
        self.state.save(report.disk, "", delta, finished_at=self._clock())
        report.counts.add(delta)
        report.complete = True

    # -- one file -----------------------------------------------------------------------------
    def _one(
        self, pair: Pair, index: int, name: str, mtime: float, counts: Counts, throttle: Throttle
    ) -> None:
        parsed = parse_name(name)
        if parsed.kind is Kind.OTHER:
            return
        disk = self.store.disk(pair.disks[index])
        live = deleted = None
        present = True
        if parsed.key is not None:
            live = self.store.filedb.get(parsed.key)
            if live is not None and live.moved_at is not None:
                live = None  # get() gave the space1 record
            deleted = self.store.filedb.get_deleted(parsed.key)
            if parsed.kind is Kind.QUARANTINE:
                present = disk.size(blob_path(parsed.key)) is not None
        now = self._clock()
        seen = Seen(
            parsed,
            mtime,
            pair.id,
            index,
            live,
            deleted,
            present,
            service=bool(pair.flags & PairFlag.SERVICE),
        )
        decision = decide(seen, self.config, now)
        action = decision.action
        key = parsed.key
        if action is Action.SKIP:
            return
        if action is Action.DELETE_TMP:
            disk.delete(name)
            counts.tmp_removed += 1
            return
        assert key is not None
        if action is Action.PURGE:
            disk.delete(name)
            counts.purged += 1
        elif action is Action.RESTORE:
            disk.publish(name, blob_path(key))
            counts.repaired += 1
        elif action in (Action.VERIFY, Action.CHECK):
            self._verify(pair, index, key, counts, throttle, repair=action is Action.VERIFY)
        elif action is Action.STRAY:
            assert live is not None
            problems = self.store.check_copies(key)
            if problems:
                raise DiskError(
                    f"stray copy kept: the owner pair {live.pair_id} is not sound: "
                    + "; ".join(problems)
                )
            if self._quarantine(pair, disk, key, now):
                counts.strays += 1
        elif action is Action.QUARANTINE_ORPHAN and self._quarantine(pair, disk, key, now):
            counts.orphans += 1
        elif action is Action.QUARANTINE_DELETED and self._quarantine(pair, disk, key, now):
            counts.quarantined += 1
        if (
            decision.forget_space1
            and deleted is not None
            and deleted.moved_at is not None
            and self.store.filedb.forget_deleted(key, deleted.moved_at)
        ):
            counts.space1_dropped += 1

    def _quarantine(self, pair: Pair, disk: Disk, key: Key, now: float) -> bool:
        """Rename into quarantine, then look again: undone when the key is live here now."""
        name = blob_path(key)
        target = quarantine_name(key, now)
        disk.publish(name, target)
        live = self.store.filedb.get(key)
        if live is not None and live.moved_at is None and live.pair_id == pair.id:
            if disk.size(name) is None:
                disk.publish(target, name)
            return False
        return True

    def _verify(
        self, pair: Pair, index: int, key: Key, counts: Counts, throttle: Throttle, *, repair: bool
    ) -> None:
        disks = self.store.disks(pair)
        disk, sibling = disks[index], disks[1 - index]
        name = blob_path(key)
        counts.verified += 1
        good = self._hash_ok(disk, name, key, counts, throttle)
        if not good:
            if not repair:
                raise DiskError(f"{disk.spec}/{name} is corrupt or unreadable (pair in service)")
            if not self._copy(sibling, disk, key, counts, throttle):
                raise DiskError(f"{disk.spec}/{name} is corrupt and its sibling copy too")
            counts.repaired += 1
            return
        if sibling.size(name) is None:
            if not repair:
                raise DiskError(f"{sibling.spec}/{name} is missing (pair in service)")
            if not self._copy(disk, sibling, key, counts, throttle):
                raise DiskError(f"{disk.spec}/{name} changed while copied to {sibling.spec}")
            counts.repaired += 1

    def _read(self, disk: Disk, name: str, counts: Counts, throttle: Throttle) -> Iterator[bytes]:
        reader = disk.open(name)
        try:
            for chunk in reader:
                counts.bytes += len(chunk)
                throttle.spend(len(chunk))
                yield chunk
        finally:
            reader.close()

    def _hash_ok(self, disk: Disk, name: str, key: Key, counts: Counts, throttle: Throttle) -> bool:
        sha = hashlib.sha256()
        try:
            for chunk in self._read(disk, name, counts, throttle):
                sha.update(chunk)
        except MissingFile:
            return False
        except DiskError as exc:
            log.warning("valkyrie: %s", exc.message)
            return False
        return sha.hexdigest() == key

    def _copy(self, src: Disk, dst: Disk, key: Key, counts: Counts, throttle: Throttle) -> bool:
        """Copy ``key`` from ``src`` to ``dst`` (temporary name, fsync, atomic rename), only
        if the bytes hash to the key. False when they do not."""
        name = blob_path(key)
        tmp = f"tmp/valkyrie-{secrets.token_hex(8)}.part"
        writer = dst.create(tmp)
        try:
            sha = hashlib.sha256()
            for chunk in self._read(src, name, counts, throttle):
                sha.update(chunk)
                writer.write(chunk)
            if sha.hexdigest() != key:
                writer.abort()
                return False
            writer.commit()
            dst.publish(tmp, name)
        except BaseException:
            writer.abort()
            raise
        return True


# -- in ``pochta serve`` -------------------------------------------------------------------------
class ValkyrieRunner:
    """Valkyrie in background threads, one per local disk, for ``pochta serve``.

        runner = ValkyrieRunner(valkyrie, fence=fence); runner.start(); ...; runner.stop()

    With locks (as ``pochta serve`` has them), each disk is a ``Singleton`` job: among every
    process that shares the locks, one leads it and runs a pass every
    ``pass_interval_seconds``; when that process dies, another takes the disk over after one
    lease length. Without locks (one process), each disk is a plain thread. New pairs are
    picked up every ``rescan_seconds``, retired ones dropped. ``stop`` saves every position
    and joins the threads.

    Disks on WebDAV nodes are scrubbed on their storage hosts (``pochta valkyrie run --disk
    <dir>``), where the bytes are local, not from here over HTTP.
    """

    def __init__(
        self,
        valkyrie: Valkyrie,
        *,
        rescan_seconds: float = 60.0,
        fence: Fence | None = None,
    ) -> None:
        self.valkyrie = valkyrie
        self.fence = fence
        self._rescan = rescan_seconds
        self._stop = threading.Event()
        self._threads: dict[DiskSpec, threading.Thread] = {}
        self.jobs: dict[DiskSpec, Singleton] = {}
        self._supervisor: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._supervisor = threading.Thread(
            target=self._supervise, name="pochta-valkyrie", daemon=True
        )
        self._supervisor.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every disk's pass (each saves its position) within ``timeout`` in all; a
        thread still running then is left to the process's exit (and logged)."""
        deadline = time.monotonic() + timeout
        self._stop.set()
        for job in list(self.jobs.values()):
            job.cancel()
        if self._supervisor is not None:
            self._supervisor.join(max(0.0, deadline - time.monotonic()))
        for job in list(self.jobs.values()):  # the supervisor may have added one meanwhile
            job.cancel()
            job.join(max(0.0, deadline - time.monotonic()))
        for thread in list(self._threads.values()):
            thread.join(max(0.0, deadline - time.monotonic()))

    def _supervise(self) -> None:
        while not self._stop.is_set():
            try:
                disks = {
                    pair.disks[index]: (pair.id, index)
                    for pair, index in self.valkyrie.disks()
                    if pair.disks[index].node == "local"
                }
                for spec, (pair_id, index) in disks.items():
                    self._ensure(spec, pair_id, index)
                for spec in [s for s in self.jobs if s not in disks]:  # a retired pair
                    self.jobs.pop(spec).stop()
            except PochtaError as exc:
                log.error("valkyrie: %s", exc.message)
            self._stop.wait(self._rescan)

    def _ensure(self, spec: DiskSpec, pair_id: int, index: int) -> None:
        name = f"pochta-valkyrie-{pair_id}.{index}"
        locks = self.valkyrie.locks
        if locks is not None:
            if spec not in self.jobs:
                job = Singleton(
                    locks,
                    lock_name(spec),
                    lambda _lease: self._pass(pair_id, index, job.stopping),
                    interval=self.valkyrie.config.pass_interval_seconds,
                    fence=self.fence,
                    thread_name=name,
                )
                self.jobs[spec] = job
                if not self._stop.is_set():
                    job.start()
            return
        if spec not in self._threads or not self._threads[spec].is_alive():
            thread = threading.Thread(
                target=self._disk_loop, args=(pair_id, index), name=name, daemon=True
            )
            self._threads[spec] = thread
            thread.start()

    def _pass(self, pair_id: int, index: int, stop: threading.Event) -> None:
        pair = self.valkyrie.store.pairdb.get(pair_id)  # fresh flags every pass
        report = self.valkyrie.run_disk(pair, index, stop=stop)
        if report.complete:
            log.info("valkyrie %s: pass done: %s", report.disk, report.counts.as_dict())

    def _disk_loop(self, pair_id: int, index: int) -> None:
        while not self._stop.is_set():
            try:
                self._pass(pair_id, index, self._stop)
            except LeaseLost:
                pass
            except PochtaError as exc:
                log.error("valkyrie pair %d disk %d: %s", pair_id, index, exc.message)
                if exc.code == "not_found":  # the pair was retired
                    return
            self._stop.wait(self.valkyrie.config.pass_interval_seconds)
