"""When a disk fails: evacuate its pair, retire it; bring a quarantined file back (SPEC §2).

evacuate   the pair goes into SERVICE (no new files); every live key on it is streamed, one
           chunk at a time, from its master disk (the sibling when that copy fails or does not
           hash to the key, even midway) to both disks of another writable pair (temporary
           name, fsync, atomic rename once the bytes hashed to the key) and the record is
           repointed with a compare-and-set on the pair id; counter and magic stay as they
           are (a copy is not a reference). A key deleted or moved meanwhile is left alone
           (the new copies are strays for Valkyrie). Resumable: what is left is what is still
           on the pair, so a second run goes on where the first stopped.
retire     forgets a pair that holds no live record.
restore    renames the newest ``<key>.deleted.<ts>`` back on each disk that has one and makes
           the record live again (DO_NOT_DELETE, counter 0 when it had gone).
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pochta.blobs.keys import blob_path, master_index, parse_key
from pochta.blobs.store import BlobStore
from pochta.blobs.valkyrie import QUARANTINE_MARK
from pochta.errors import BlobNotFound, DiskError, InvalidInput, LockError, PochtaError
from pochta.guard.lock import Locks
from pochta.types import BlobReader, BlobWriter, Disk, FileRecord, Key, Pair, PairFlag


def evacuation_lock(pair_id: int) -> str:
    return f"evacuate:{pair_id}"


@dataclass(slots=True)
class EvacuationReport:
    pair: int
    total: int = 0  # live keys on the pair when the run started
    moved: int = 0
    skipped: int = 0  # deleted or repointed by someone else meanwhile
    errors: int = 0
    bytes: int = 0
    left: int = 0  # live keys still on the pair at the end
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pair": self.pair,
            "total": self.total,
            "moved": self.moved,
            "skipped": self.skipped,
            "errors": self.errors,
            "bytes": self.bytes,
            "left": self.left,
            "problems": self.problems,
        }


class _BadSource(DiskError):
    """The source copy could not be read to its end, or its bytes do not hash to the key."""


def _stream(store: BlobStore, source: Disk, reader: BlobReader, key: Key, target: Pair) -> int:
    """Copy one opened file to both disks of ``target``, one chunk at a time: a temporary
    name on each, SHA-256 computed on the way, both copies fsynced and renamed to
    ``ab/cd/<key>`` only when the bytes hash to the key. The bytes copied.

    _BadSource when the source fails or its bytes do not hash to the key; any other error
    comes from the target. Either way the temporary files are removed. FileDB is not
    touched: a copy is not a new reference."""
    name = blob_path(key)
    tmp = f"tmp/evacuate-{secrets.token_hex(8)}.part"
    sha = hashlib.sha256()
    size = 0
    writers: list[BlobWriter] = []
    try:
        for disk in store.disks(target):
            writers.append(disk.create(tmp))
        chunks = iter(reader)
        while True:
            try:
                chunk = next(chunks, None)
            except DiskError as exc:
                raise _BadSource(f"{source.spec}/{name}: {exc.message}") from exc
            if chunk is None:
                break
            sha.update(chunk)
            size += len(chunk)
            for writer in writers:
                writer.write(chunk)
        if sha.hexdigest() != key:
            raise _BadSource(f"{source.spec}/{name} does not hash to its key")
        store.commit_copies(writers)
        for disk in store.disks(target):
            disk.publish(tmp, name)
    except BaseException:
        for writer in writers:  # a copy already renamed into place stays: a stray for Valkyrie
            writer.abort()
        raise
    return size


def _move_copy(store: BlobStore, pair: Pair, key: Key) -> tuple[Pair, int]:
    """Stream ``key`` from the master disk of ``pair`` (the sibling when that copy fails or
    turns out wrong, even midway) to another writable pair; that pair and the bytes."""
    disks = store.disks(pair)
    first = master_index(key)
    problems = []
    for disk in (disks[first], disks[1 - first]):
        try:
            reader = disk.open(blob_path(key))
        except DiskError as exc:
            problems.append(exc.message)
            continue
        try:
            target = store.place(reader.size)
            if target.id == pair.id:  # cannot happen while in SERVICE
                raise InvalidInput(f"pair {pair.id} is still writable")
            return target, _stream(store, disk, reader, key, target)
        except _BadSource as exc:
            problems.append(exc.message)
        finally:
            reader.close()
    raise DiskError(f"no good copy of {key} on pair {pair.id}: {'; '.join(problems)}")


def evacuate(
    store: BlobStore,
    pair_id: int,
    *,
    locks: Locks | None = None,
    progress: Callable[[int, int], None] | None = None,
    batch: int = 500,
) -> EvacuationReport:
    """Move every live file of a pair to other writable pairs. ``progress(done, total)``."""
    pair = store.pairdb.get(pair_id)
    if not pair.flags & PairFlag.SERVICE:
        pair = store.pairdb.set_flags(pair_id, pair.flags | PairFlag.SERVICE)
    lease = None
    if locks is not None:
        lease = locks.try_acquire(evacuation_lock(pair_id))
        if lease is None:
            raise LockError(f"pair {pair_id} is being evacuated by another process")
    report = EvacuationReport(pair_id, total=store.filedb.count_live(pair_id))
    done = 0
    try:
        after: Key | None = None
        while keys := store.filedb.live_keys(pair_id, after, batch):
            for key in keys:
                after = key
                if lease is not None:
                    lease.check()
                try:
                    target, size = _move_copy(store, pair, key)
                    if store.filedb.repoint(key, pair_id, target.id):
                        report.moved += 1
                        report.bytes += size
                    else:
                        report.skipped += 1
                except PochtaError as exc:
                    report.errors += 1
                    if len(report.problems) < 20:
                        report.problems.append(f"{key}: {exc.message}")
                done += 1
                if progress is not None:
                    progress(done, report.total)
    finally:
        if lease is not None:
            with contextlib.suppress(PochtaError):
                lease.release()
    report.left = store.filedb.count_live(pair_id)
    return report


def retire(store: BlobStore, pair_id: int) -> Pair:
    """Forget a pair with no live record left; InvalidInput otherwise."""
    pair = store.pairdb.get(pair_id)
    left = store.filedb.count_live(pair_id)
    if left:
        raise InvalidInput(
            f"pair {pair_id} still holds {left} live file(s): "
            f"run `pochta pairs evacuate {pair_id}` first"
        )
    store.pairdb.remove(pair_id)
    return pair


@dataclass(frozen=True, slots=True)
class Restored:
    record: FileRecord
    renamed: list[str]  # the disks on which a quarantined copy was renamed back
    present: list[str]  # the disks that hold the file now
    missing: list[str]  # the disks that still lack it


def restore(store: BlobStore, key: Key) -> Restored:
    """Bring a quarantined file back on its pair and make its record live again.

    The pair is the live record's, else the space1 record's, else the first pair holding a
    quarantined copy. BlobNotFound when no copy is found anywhere."""
    key = parse_key(key)
    record = store.filedb.get(key)
    pairs = store.pairdb.list()
    if record is not None:
        pairs = sorted(pairs, key=lambda p: p.id != record.pair_id)
    name = blob_path(key)
    for pair in pairs:
        renamed: list[str] = []
        present: list[str] = []
        missing: list[str] = []
        for disk in store.disks(pair):
            quarantined = _newest_quarantine(disk, key)
            has = disk.size(name) is not None
            if not has and quarantined is not None:
                disk.publish(quarantined, name)
                renamed.append(str(disk.spec))
                has = True
            (present if has else missing).append(str(disk.spec))
        if present:
            if not renamed and record is not None and record.moved_at is None:
                return Restored(record, [], present, missing)
            revived = store.filedb.revive(key, pair.id)
            return Restored(revived, renamed, present, missing)
    raise BlobNotFound(f"no copy of {key}, live or quarantined, on any pair")


def _newest_quarantine(disk: Disk, key: Key) -> str | None:
    prefix = f"{blob_path(key)}{QUARANTINE_MARK}"
    found: list[tuple[int, str]] = []
    try:
        for entry in disk.walk(blob_path(key)):
            if not entry.name.startswith(blob_path(key)):
                break
            if entry.name.startswith(prefix) and entry.name[len(prefix) :].isdigit():
                found.append((int(entry.name[len(prefix) :]), entry.name))
    except DiskError:
        return None
    return max(found)[1] if found else None
