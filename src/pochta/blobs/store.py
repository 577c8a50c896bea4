"""``BlobStore``, the blob store's four operations: inc / upload / dec / get over FileDB, PairDB
and the disks (SPEC §2; seed 004 calls the service that runs them "the loader").

upload: pick a writable pair (weighted by free^(1/N)), create ``tmp/<random>.part`` on both
disks and probe it on both at once (the probe's bytes, which the content replaces; a pair that
fails is left for another), stream the content to both at once while hashing (SHA-256 and
CRC-32), refuse it if it does not match the key given, fsync both copies, rename them to
``ab/cd/<key>`` and fsync the directories, then upsert the record. Only then is the upload
acknowledged. A small file whose bytes are all in hand (``upload_whole``) is hashed first and,
on local disks sharing their syncs, written as its own probe.

get: read from the master disk of the pair (first bit of the key), falling back to the other;
with an expected size / CRC-32 (kept by the letter) a copy that differs is never served.
"""

from __future__ import annotations

import hashlib
import random
import secrets
import threading
import time
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TypeGuard, TypeVar

from pochta import metrics
from pochta.blobs.keys import blob_path, master_index, parse_key, parse_magic
from pochta.blobs.nodes import DiskFactory
from pochta.blobs.nodes.groupsync import GroupSync
from pochta.blobs.nodes.local import LocalWriter
from pochta.blobs.placement import choose_pair
from pochta.errors import (
    BlobNotFound,
    ContentMismatch,
    DiskError,
    IntegrityError,
    NoWritablePair,
    StorageError,
)
from pochta.types import (
    BlobReader,
    BlobWriter,
    Disk,
    DiskSpec,
    FileDB,
    FileRecord,
    Key,
    Magic,
    Op,
    Pair,
    PairDB,
    PairFlag,
    Space,
)

CHUNK = 1 << 20
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Stored:
    """What a put / upload did: the record after it, the content's size and CRC-32, and whether
    bytes were written (False when the key was already live and only counted)."""

    record: FileRecord
    magic: Magic
    size: int
    crc32: int
    uploaded: bool

    @property
    def first_copy(self) -> bool:
        """This upload's record came first: False when the key was live, and also when a
        concurrent upload of the same content recorded it first (both wrote their bytes; this
        one only counted). What the deliveries' metrics count as uploaded."""
        return self.uploaded and self.record.counter == 1


@dataclass(frozen=True, slots=True)
class Opened:
    """A readable blob: its record, the disk serving it, its whole size, and the bytes asked for."""

    record: FileRecord
    disk: DiskSpec
    size: int
    reader: BlobReader

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.reader)


def _chunks(
    read: Callable[[int], bytes], progress: Callable[[int], None] | None
) -> Iterator[bytes]:
    while chunk := read(CHUNK):
        if progress is not None:
            progress(len(chunk))
        yield chunk


def _shared(writers: list[BlobWriter]) -> TypeGuard[list[LocalWriter]]:
    """Whether every writer is a local file made durable by its filesystem's group sync."""
    return all(isinstance(w, LocalWriter) and w.shares_syncs for w in writers)


def tmp_name() -> str:
    """A new temporary name for an upload's bytes on a disk (random: two loaders storing
    one file never mix bytes)."""
    return f"tmp/{secrets.token_hex(16)}.part"


class Upload:
    """One upload in progress; use as a context manager, feed ``write``, end with ``finish``.
    Any exception before ``finish`` returns removes every temporary byte."""

    def __init__(
        self,
        store: BlobStore,
        key: Key | None,
        magic: Magic,
        pair: Pair | None,
        op: Op | None = None,
        *,
        tmp: str | None = None,
        writers: list[BlobWriter] | None = None,
    ) -> None:
        """``writers``: the temporary file ``tmp`` already created (and probed) on both disks
        of ``pair``; else they are created here."""
        self._store = store
        self._op = op
        self._key = key
        self._magic = magic
        self._pair = pair
        self._sha = hashlib.sha256()
        self._crc = 0
        self._size = 0
        self._tmp = tmp or tmp_name()
        self._writers: list[BlobWriter] = writers if writers is not None else []
        self._done = False
        if pair is not None and writers is None:
            try:
                for disk in store.disks(pair):
                    self._writers.append(disk.create(self._tmp))
            except BaseException:
                self.abort()
                raise

    @property
    def pair(self) -> Pair | None:
        """The pair receiving the bytes; None when the key was live and only gets counted."""
        return self._pair

    def write(self, chunk: bytes) -> None:
        self._sha.update(chunk)
        self._crc = zlib.crc32(chunk, self._crc)
        self._size += len(chunk)
        for writer in self._writers:
            writer.write(chunk)

    @metrics.blob_op("store")
    def finish(self) -> Stored:
        try:
            key = self._sha.hexdigest()
            if self._key is not None and key != self._key:
                raise ContentMismatch(
                    f"content hashes to {key}, not to the key given ({self._key}); nothing stored"
                )
            if self._pair is None:  # already live: the bytes were only hashed
                self._done = True
                try:
                    record = self._store.filedb.inc(key, self._magic, self._op)
                except BlobNotFound:
                    raise StorageError(
                        f"{key} was deleted while its content was being sent; send it again"
                    ) from None
                return Stored(record, self._magic, self._size, self._crc, uploaded=False)
            self._store.commit_as(self._writers, blob_path(key))
            self._done = True
        except BaseException:
            self.abort()
            raise
        record = self._store.filedb.upsert(key, self._magic, self._pair.id, self._op)
        return Stored(record, self._magic, self._size, self._crc, uploaded=True)

    def abort(self) -> None:
        if self._done:
            return
        self._done = True
        for writer in self._writers:
            writer.abort()

    def __enter__(self) -> Upload:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.abort()


class BlobStore:
    def __init__(
        self,
        filedb: FileDB,
        pairdb: PairDB,
        *,
        disk_factory: Callable[[DiskSpec], Disk] | None = None,
        placement_root: float = 2.0,
        free_refresh_seconds: float = 10.0,
        rng: random.Random | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.filedb = filedb
        self.pairdb = pairdb
        self._disk_factory = disk_factory or DiskFactory()
        self._disks: dict[DiskSpec, Disk] = {}
        self._placement_root = placement_root
        self._free_refresh = free_refresh_seconds
        self._rng = rng or random.Random(secrets.randbits(64))
        self._monotonic = monotonic
        self._refreshed_at = -float("inf")
        self._measuring = threading.Lock()  # one free-space measurement at a time
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pochta-fsync")
        # the group sync that makes the FileDB's commits durable, when it has one
        sync = getattr(filedb, "group_sync", None)
        self._record_sync = sync if isinstance(sync, GroupSync) else None
        self._copies_ride = True  # the last small upload's copies waited for _record_sync

    # -- disks and pairs ----------------------------------------------------------------
    def disk(self, spec: DiskSpec) -> Disk:
        with self._lock:
            disk = self._disks.get(spec)
            if disk is None:
                disk = self._disks[spec] = self._disk_factory(spec)
            return disk

    def mount(self, spec: DiskSpec, disk: Disk) -> None:
        """Use ``disk`` for ``spec`` from now on: a storage host reaches its own WebDAV disk
        as the local directory behind its nginx."""
        with self._lock:
            self._disks[spec] = disk

    def disks(self, pair: Pair) -> tuple[Disk, Disk]:
        return self.disk(pair.disks[0]), self.disk(pair.disks[1])

    def measure_free(self, pair: Pair) -> tuple[int, int]:
        """Free bytes of each disk now; a disk that cannot say counts as full."""
        free: list[int] = []
        for disk in self.disks(pair):
            try:
                free.append(disk.free_bytes())
            except DiskError:
                free.append(0)
        return free[0], free[1]

    def refresh_free(self, *, force: bool = False) -> list[Pair]:
        """Re-measure free space of every pair (at most every ``free_refresh_seconds``), one
        measurement at a time. A caller that finds one in flight takes the PairDB's figures,
        unless this store has measured nothing since it started or since a disk failed
        (nor is it forced): then it waits for that measurement, because the recorded figures
        may be none at all (a WebDAV pair added before its hosts reported free space is
        recorded with 0) and would refuse the file for no reason."""
        pairs = self.pairdb.list()
        if not force and self._monotonic() - self._refreshed_at < self._free_refresh:
            return pairs
        unknown = self._refreshed_at == -float("inf")
        if not self._measuring.acquire(blocking=force or unknown):
            return pairs  # another thread is measuring; the last figures will do
        try:
            pairs = self.pairdb.list()
            if not force and self._monotonic() - self._refreshed_at < self._free_refresh:
                return pairs  # measured while this caller waited
            fresh = []
            for pair in pairs:
                free = self.measure_free(pair)
                if free != pair.free:
                    self.pairdb.set_free(pair.id, free)
                fresh.append(Pair(pair.id, pair.disks, pair.flags, free))
            self._refreshed_at = self._monotonic()
            return fresh
        finally:
            self._measuring.release()

    def pairs(self) -> list[Pair]:
        """Every registered pair, as the PairDB last recorded it (free space not re-measured)."""
        return self.pairdb.list()

    def set_flags(self, pair_id: int, flags: PairFlag) -> Pair:
        """Replace a pair's flags (readonly / service / locked stop new files)."""
        return self.pairdb.set_flags(pair_id, flags)

    def add_pair(self, a: DiskSpec, b: DiskSpec) -> Pair:
        """Register two disks as a pair after checking both take writes."""
        probe_pair = Pair(0, (a, b), PairFlag.NONE, (0, 0))
        for disk in self.disks(probe_pair):
            disk.probe()
        pair = self.pairdb.add((a, b), self.measure_free(probe_pair))
        self._refreshed_at = -float("inf")
        return pair

    def _place(self, size: int) -> Pair:
        pair, _ = self._place_with(size, self._probe)
        return pair

    def _probe(self, pair: Pair) -> None:
        self.at_once([disk.probe for disk in self.disks(pair)])

    def _place_with(self, size: int, try_pair: Callable[[Pair], T]) -> tuple[Pair, T]:
        """A writable pair for ``size`` bytes on which ``try_pair`` (the probe of both disks)
        succeeded, and what it returned; a pair whose probe fails (DiskError) is left for
        another."""
        tried: set[int] = set()
        pairs = self.refresh_free()
        reasons: list[str] = []
        while True:
            pair = choose_pair(
                pairs, size=size, root=self._placement_root, rng=self._rng, exclude=tried
            )
            if pair is None:
                writable = [p for p in pairs if p.flags.writable]
                detail = (
                    "; ".join(reasons)
                    if reasons
                    else (f"{len(writable)} writable pair(s), none with {size} bytes free")
                )
                raise NoWritablePair(f"no pair can take the file: {detail}")
            try:
                return pair, try_pair(pair)
            except DiskError as exc:
                tried.add(pair.id)
                reasons.append(f"pair {pair.id}: {exc.message}")
                self._refreshed_at = -float("inf")

    def _probed_writers(
        self, tmp: str, content: bytes | None = None
    ) -> Callable[[Pair], tuple[list[BlobWriter], bool]]:
        """For ``_place_with``: the upload's temporary file created on both disks of a pair
        and probed on both at once (the probe of seed 004 is the upload's own file: for a
        WebDAV pair one PUT per node instead of a PUT and a DELETE of a file of its own).
        With ``content`` (a small file's bytes, all in hand), local disks that share their
        filesystem's syncs are probed by writing the content itself (a write that fails
        leaves the pair for another, as a failed probe does); says whether it was written."""

        def create_and_probe(pair: Pair) -> tuple[list[BlobWriter], bool]:
            writers: list[BlobWriter] = []
            written = False
            try:
                for disk in self.disks(pair):
                    writers.append(disk.create(tmp))
                if _shared(writers):  # system calls that wait for no device: in turn
                    for local in writers:
                        if content:
                            local.write(content)
                        else:
                            local.probe()
                    written = bool(content)
                else:
                    self.at_once([w.probe for w in writers])
            except BaseException:
                for writer in writers:
                    writer.abort()
                raise
            return writers, written

        return create_and_probe

    def commit_as(self, writers: list[BlobWriter], name: str, *, record: bool = False) -> None:
        """Both copies under ``name``, durable, at once (``at_once``). Local copies that
        share their filesystem's syncs are placed in turn (system calls that wait for no
        device), then wait once per filesystem: two copies on one filesystem take one sync
        together and no trip to another thread (waiting for each copy on its own may take
        two syncs in a row, when the second copy misses the sync the first one joined).
        ``record``: the caller's next step is the FileDB's count; when the FileDB rides the
        same group sync, the sync after the copies' holds for it (``GroupSync.wait``
        ``returning``; the caller then counts, or calls ``GroupSync.forgo``)."""
        if not _shared(writers):
            self._copies_ride = False if record else self._copies_ride
            self.at_once([partial(w.commit_as, name) for w in writers])
            return
        waits: dict[int, Callable[[], None]] = {}  # one writer's wait per group sync
        mine: list[Callable[[], None]] = []  # the wait the count follows: in this thread
        for writer in writers:
            group = writer.place(name)
            if group is self._record_sync and record and not mine:
                mine.append(partial(writer.wait_durable, returning=True))
                waits[id(group)] = mine[0]
            else:
                waits.setdefault(id(group), writer.wait_durable)
        if record:  # whether the next small upload announces itself to _record_sync
            self._copies_ride = bool(mine)
        self.at_once(mine + [w for w in waits.values() if w not in mine])

    def commit_copies(self, writers: list[BlobWriter]) -> None:
        """fsync both copies at once."""
        self.at_once([w.commit for w in writers])

    def at_once(self, calls: list[Callable[[], None]]) -> None:
        """Run ``calls`` (one per disk) at the same time; the first error, after all ended."""
        if not calls:
            return
        later = [self._pool.submit(call) for call in calls[1:]]
        errors: list[BaseException] = []
        try:
            calls[0]()
        except BaseException as exc:
            errors.append(exc)
        for fut in later:
            exc2 = fut.exception()
            if exc2 is not None:
                errors.append(exc2)
        if errors:
            raise errors[0]

    # -- the API of seed 004 ------------------------------------------------------------
    @metrics.blob_op("inc")
    def inc(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        return self.filedb.inc(key, magic, op)

    def begin_upload(
        self, key: Key | None, magic: Magic, size_hint: int = 0, op: Op | None = None
    ) -> Upload:
        """Start an upload. With a key that is already live, the bytes are only hashed (to
        check them) and the record is counted: no second copy is written."""
        magic = parse_magic(magic)
        if key is not None:
            key = parse_key(key)
            record = self.filedb.get(key)
            if record is not None and record.space is Space.LIVE:
                return Upload(self, key, magic, None, op)
        tmp = tmp_name()
        pair, (writers, _) = self._place_with(size_hint, self._probed_writers(tmp))
        return Upload(self, key, magic, pair, op, tmp=tmp, writers=writers)

    def upload(
        self,
        key: Key | None,
        magic: Magic,
        chunks: Iterable[bytes],
        size_hint: int = 0,
        op: Op | None = None,
    ) -> Stored:
        """Upload (or count, when the key is live) one file; ``op`` makes the count
        exactly-once (see ``FileDB``). A list of chunks of at most ``CHUNK`` bytes in all
        (a small attachment, a small HTTP body) takes ``upload_whole``."""
        if isinstance(chunks, list | tuple) and sum(map(len, chunks)) <= CHUNK:
            return self.upload_whole(key, magic, b"".join(chunks), op)
        with self.begin_upload(key, magic, size_hint, op) as up:
            for chunk in chunks:
                up.write(chunk)
            return up.finish()

    @metrics.blob_op("store")
    def upload_whole(
        self, key: Key | None, magic: Magic, content: bytes, op: Op | None = None
    ) -> Stored:
        """``upload`` of a file whose bytes are all in hand (small: at most ``CHUNK``), with
        fewer steps: hashed before any disk is touched (content that does not match its key
        writes nothing), written to both disks of the pair as its probe (local disks
        sharing syncs; ``_probed_writers``), one write per disk, no ``Upload``. A sync of the
        FileDB's group that is about to start holds for it (briefly: ``GroupSync.announce``)."""
        if self._record_sync is None:
            return self._upload_whole(key, magic, content, op)
        if self._copies_ride:
            self._record_sync.announce()
        try:
            return self._upload_whole(key, magic, content, op)
        finally:  # also the return owed by copies that rode it (``commit_as``)
            self._record_sync.forgo()

    def _upload_whole(self, key: Key | None, magic: Magic, content: bytes, op: Op | None) -> Stored:
        magic = parse_magic(magic)
        sha = hashlib.sha256(content).hexdigest()
        crc, size = zlib.crc32(content), len(content)
        if key is not None:
            key = parse_key(key)
            if sha != key:
                raise ContentMismatch(
                    f"content hashes to {sha}, not to the key given ({key}); nothing stored"
                )
            record = self.filedb.get(key)
            if record is not None and record.space is Space.LIVE:  # only counted
                try:
                    record = self.filedb.inc(key, magic, op)
                except BlobNotFound:
                    raise StorageError(
                        f"{key} was deleted while its content was being sent; send it again"
                    ) from None
                return Stored(record, magic, size, crc, uploaded=False)
        pair, (writers, written) = self._place_with(size, self._probed_writers(tmp_name(), content))
        try:
            if not written:
                for writer in writers:
                    writer.write(content)
            self.commit_as(writers, blob_path(sha), record=True)
        except BaseException:
            for writer in writers:
                writer.abort()
            raise
        record = self.filedb.upsert(sha, magic, pair.id, op)
        return Stored(record, magic, size, crc, uploaded=True)

    def put(
        self, path: Path, magic: Magic, progress: Callable[[int], None] | None = None
    ) -> Stored:
        """Store a local file: inc when its key is live, upload when not. ``progress`` is
        told the bytes of each chunk read (the file is read twice when it is uploaded)."""
        magic = parse_magic(magic)
        sha, crc, size = hashlib.sha256(), 0, 0
        with path.open("rb") as f:
            for chunk in _chunks(f.read, progress):
                sha.update(chunk)
                crc = zlib.crc32(chunk, crc)
                size += len(chunk)
        key = sha.hexdigest()
        try:
            return Stored(self.inc(key, magic), magic, size, crc, uploaded=False)
        except BlobNotFound:
            pass
        with path.open("rb") as f:
            return self.upload(key, magic, _chunks(f.read, progress), size_hint=size)

    @metrics.blob_op("dec")
    def dec(self, key: Key, magic: Magic, op: Op | None = None) -> FileRecord:
        return self.filedb.dec(key, magic, op)

    def stat(self, key: Key) -> FileRecord:
        record = self.record(parse_key(key))
        if record is None:
            raise BlobNotFound(f"no record for {key}")
        return record

    def record(self, key: Key) -> FileRecord | None:
        """The live record, else the deleted (space1) one, else None."""
        return self.filedb.get(key)

    # -- the journal of operation ids (exactly-once counts; see ``FileDB``) ---------------
    def applied(self, ops: Collection[Op]) -> set[Op]:
        """Which of ``ops`` are journaled (the count or dec they name happened)."""
        return self.filedb.applied(ops)

    def forget_ops(self, ops: Collection[Op]) -> None:
        """Drop journal entries (unknown ones are ignored)."""
        self.filedb.forget_ops(ops)

    def journal(self, after: Op = b"", limit: int = 1000) -> list[Op]:
        """Journaled ops greater than ``after``, in ascending byte order, at most ``limit``."""
        return self.filedb.journal(after=after, limit=limit)

    @metrics.blob_op("open")
    def open(
        self,
        key: Key,
        *,
        start: int = 0,
        end: int | None = None,
        expect_size: int | None = None,
        expect_crc32: int | None = None,
    ) -> Opened:
        """Open a blob for reading, master disk first. With ``expect_size`` / ``expect_crc32``
        a copy that differs is skipped; when no copy matches, IntegrityError."""
        record = self.stat(key)
        pair = self.pairdb.get(record.pair_id)
        disks = self.disks(pair)
        first = master_index(record.key)
        name = blob_path(record.key)
        problems: list[str] = []
        mismatch = False
        for disk in (disks[first], disks[1 - first]):
            try:
                if expect_crc32 is not None:
                    self._verify(disk, name, expect_size, expect_crc32)
                reader = disk.open(name, start, end)
            except (DiskError, IntegrityError) as exc:
                mismatch = mismatch or isinstance(exc, IntegrityError)
                problems.append(exc.message)
                continue
            if expect_size is not None and reader.size != expect_size:
                reader.close()
                mismatch = True
                problems.append(f"{disk.spec}: size {reader.size}, expected {expect_size}")
                continue
            return Opened(record, disk.spec, reader.size, reader)
        if mismatch:
            raise IntegrityError(
                f"no copy of {key} matches what was expected: {'; '.join(problems)}"
            )
        raise StorageError(f"no readable copy of {key}: {'; '.join(problems)}")

    def reopen(self, opened: Opened, start: int, end: int | None) -> Opened:
        """The same copy again, bytes [start, end) only (for Range requests)."""
        reader = self.disk(opened.disk).open(blob_path(opened.record.key), start, end)
        return Opened(opened.record, opened.disk, reader.size, reader)

    @staticmethod
    def _verify(disk: Disk, name: str, size: int | None, crc32: int) -> None:
        reader = disk.open(name)
        if size is not None and reader.size != size:
            reader.close()
            raise IntegrityError(f"{disk.spec}: size {reader.size}, expected {size}")
        crc = 0
        for chunk in reader:
            crc = zlib.crc32(chunk, crc)
        if crc != crc32:
            raise IntegrityError(f"{disk.spec}: crc32 {crc:08x}, expected {crc32:08x}")

    @metrics.blob_op("read")
    def read(self, key: Key, size: int, crc32: int) -> bytes:
        """A whole blob that a letter expects to have ``size`` bytes and ``crc32``: the master
        copy read once and checked, the other copy when it differs or fails."""
        record = self.stat(key)
        disks = self.disks(self.pairdb.get(record.pair_id))
        first = master_index(record.key)
        name = blob_path(record.key)
        problems: list[str] = []
        for disk in (disks[first], disks[1 - first]):
            try:
                reader = disk.open(name)
                try:
                    data = b"".join(reader)
                finally:
                    reader.close()
            except DiskError as exc:
                problems.append(exc.message)
                continue
            if len(data) == size and zlib.crc32(data) == crc32:
                return data
            problems.append(f"{disk.spec}: {len(data)} bytes, crc32 {zlib.crc32(data):08x}")
        raise IntegrityError(
            f"no copy of {key} has {size} bytes and crc32 {crc32:08x}: {'; '.join(problems)}"
        )

    def check_copies(
        self, key: Key, size: int | None = None, crc32: int | None = None
    ) -> list[str]:
        """Read both copies of a live blob and check SHA-256 (and size / CRC-32 when given);
        the problems found, one line each ([] when both copies are good)."""
        record = self.stat(key)
        problems = []
        for disk in self.disks(self.pairdb.get(record.pair_id)):
            name = blob_path(record.key)
            sha, crc, length = hashlib.sha256(), 0, 0
            try:
                reader = disk.open(name)
                try:
                    for chunk in reader:
                        sha.update(chunk)
                        crc = zlib.crc32(chunk, crc)
                        length += len(chunk)
                finally:
                    reader.close()
            except DiskError as exc:
                problems.append(exc.message)
                continue
            if sha.hexdigest() != record.key:
                problems.append(f"{disk.spec}/{name}: content does not hash to its key")
            elif size is not None and length != size:
                problems.append(f"{disk.spec}/{name}: {length} bytes, a letter expects {size}")
            elif crc32 is not None and crc != crc32:
                problems.append(f"{disk.spec}/{name}: crc32 {crc:08x}, expected {crc32:08x}")
        return problems

    def place(self, size: int) -> Pair:
        """A writable pair for ``size`` bytes whose two disks passed a probe."""
        return self._place(size)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if isinstance(self._disk_factory, DiskFactory):
            self._disk_factory.close()  # the nodes' connection pools
        self.filedb.close()
        self.pairdb.close()
