"""What Valkyrie does with one file: its settings (``ValkyrieConfig``) and the pure decision
``decide`` of what is known about the file (``Seen``) and of the time: no I/O."""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields

from pochta.blobs.keys import master_index
from pochta.blobs.valkyrie.names import Kind, Name
from pochta.types import FileRecord


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
class FileAction:
    action: Action
    forget_space1: bool = False  # drop the space1 record (after the action succeeded)


def decide(seen: Seen, config: ValkyrieConfig, now: float) -> FileAction:
    """What to do with one file. Pure: no I/O, time passed in."""
    name = seen.name
    age = now - seen.mtime
    live_here = seen.live is not None and seen.live.pair_id == seen.pair_id
    if name.kind is Kind.OTHER:
        return FileAction(Action.SKIP)
    if seen.service:
        return FileAction(Action.CHECK if name.kind is Kind.BLOB and live_here else Action.SKIP)
    if name.kind is Kind.TMP:
        return FileAction(Action.DELETE_TMP if age > config.tmp_max_age_seconds else Action.SKIP)
    if name.kind is Kind.QUARANTINE:
        if live_here and not seen.blob_present:
            return FileAction(Action.RESTORE)
        assert name.ts is not None
        if now >= name.ts + config.quarantine_seconds:
            return FileAction(Action.PURGE)
        return FileAction(Action.SKIP)
    # a blob
    if live_here:
        stale = seen.deleted is not None
        return FileAction(Action.VERIFY, forget_space1=stale)
    old_enough = age >= config.orphan_min_age_seconds
    if seen.live is not None:  # live on another pair
        return FileAction(Action.STRAY if old_enough else Action.SKIP)
    deleted = seen.deleted
    if deleted is not None and deleted.pair_id == seen.pair_id:
        moved_at = deleted.moved_at or 0.0
        if seen.mtime >= moved_at:
            return FileAction(Action.SKIP)  # written after the move: an upload may be finishing
        assert name.key is not None
        if master_index(name.key) == seen.disk_index:
            return FileAction(Action.QUARANTINE_DELETED)
        if now >= moved_at + config.slave_delay_seconds:
            return FileAction(Action.QUARANTINE_DELETED, forget_space1=True)
        return FileAction(Action.SKIP)
    return FileAction(Action.QUARANTINE_ORPHAN if old_enough else Action.SKIP)
