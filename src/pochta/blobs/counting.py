"""The FileDB arithmetic of seed 004, as pure functions over records.

Every backend applies exactly these transitions inside one atomic step, so the contract suite
and the property tests speak about all of them at once.

Transitions
    inc      live record: counter + 1, magic + m. No live record: BlobNotFound.
    upsert   no live record: insert counter 1, magic m, on the uploading pair.
             live record: as inc (the pair stays; the new copy is a stray for Valkyrie).
    dec      live record: counter - 1, magic - m; then
               counter == 0 and magic == 0 and not flagged -> moved to space1 at ``now``;
               counter == 0 and magic != 0, or counter < 0 -> DO_NOT_DELETE (sticky).
             space1 record (dec after delete): a reference the store did not know about;
               the record returns to space0 with counter -1, magic -m, DO_NOT_DELETE, so the
               file cannot be removed while something may still point at it.
             no record at all: BlobNotFound.
"""

from __future__ import annotations

from pochta.blobs.keys import add_magic, sub_magic
from pochta.errors import BlobNotFound
from pochta.types import FileFlag, FileRecord, Key, Magic, Space


def after_inc(record: FileRecord | None, key: Key, magic: Magic) -> FileRecord:
    if record is None or record.space is not Space.LIVE:
        raise BlobNotFound(f"no live record for {key}")
    return FileRecord(
        key=key,
        counter=record.counter + 1,
        magic=add_magic(record.magic, magic),
        flags=record.flags,
        pair_id=record.pair_id,
    )


def after_upsert(record: FileRecord | None, key: Key, magic: Magic, pair_id: int) -> FileRecord:
    if record is not None and record.space is Space.LIVE:
        return after_inc(record, key, magic)
    return FileRecord(key=key, counter=1, magic=magic, flags=FileFlag.NONE, pair_id=pair_id)


def after_dec(record: FileRecord | None, key: Key, magic: Magic, now: float) -> FileRecord:
    if record is None:
        raise BlobNotFound(f"no record for {key}")
    if record.space is Space.DELETED:
        return FileRecord(
            key=key,
            counter=-1,
            magic=sub_magic(0, magic),
            flags=FileFlag.DO_NOT_DELETE,
            pair_id=record.pair_id,
        )
    counter = record.counter - 1
    total = sub_magic(record.magic, magic)
    flags = record.flags
    if counter < 0 or (counter == 0 and total != 0):
        flags |= FileFlag.DO_NOT_DELETE
    if counter == 0 and total == 0 and not flags & FileFlag.DO_NOT_DELETE:
        return FileRecord(
            key=key,
            counter=0,
            magic=0,
            flags=flags,
            pair_id=record.pair_id,
            space=Space.DELETED,
            moved_at=now,
        )
    return FileRecord(key=key, counter=counter, magic=total, flags=flags, pair_id=record.pair_id)
