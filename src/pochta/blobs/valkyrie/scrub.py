"""The scrub loop: ``Valkyrie`` walks a disk in name order, asks ``decide`` what to do with each
file, acts, counts, and saves its position every few files so that the next run resumes where
it stopped."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pochta.blobs.keys import blob_path
from pochta.blobs.store import BlobStore
from pochta.blobs.valkyrie.names import Kind, parse_name, quarantine_name
from pochta.blobs.valkyrie.policy import Action, Seen, ValkyrieConfig, decide
from pochta.blobs.valkyrie.report import Counts, PassReport
from pochta.blobs.valkyrie.state import StateStore
from pochta.blobs.valkyrie.state.sqlite import STATE_FILE, ValkyrieState
from pochta.blobs.valkyrie.throttle import Throttle
from pochta.errors import DiskError, InvalidInput, MissingFile, PochtaError
from pochta.guard.lock import Lease, Locks
from pochta.types import Disk, DiskSpec, Key, Pair, PairFlag

log = logging.getLogger("pochta.blobs.valkyrie")  # the name it had before the split


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
