"""The checks over the mailbox and the blob store: ``fsck`` (SPEC §3) and the stats.

fsck sums, for every key, the references the index holds (their count and their magic) and
compares the sums with the FileDB record, then reads both copies of the file. A reference in
flight or cut short counts when PENDING once its count happened, and when DELETING until its
dec did: the journal says which. What it finds, by category:

- lost: a letter's attachment has no good copy (or no live record while letters need it);
- damaged: one copy missing or wrong;
- undercounted: the counter is below the references while the magic agrees: decs to zero
  would delete a file still referenced (danger);
- unreadable: skeleton and references disagree (no check fills it yet);
- miscounted: the counter is below the references but the magic differs, so the file can
  never be deleted automatically (kept, like a leak);
- leaks: counted more than referenced (or the magic differs): kept, safe;
- unindexed (only when the disks are scanned, ``disks=True``): a file on a disk with no
  FileDB record at all: after a restore to a point in time, the attachment of a letter
  delivered after that point (its letter is gone with the index rows); on a live
  installation also an upload whose letter never finished (Valkyrie quarantines those).

A backup's manifest (``manifest``: key -> the disks that held it when the backup was taken)
adds to each lost and unindexed file whether the backup saw it, so that a letter written
after the backup is told from one lost since.

Only lost, damaged, undercounted, unreadable and unindexed make ``FsckReport.ok`` false.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pochta.blobs.keys import add_magic
from pochta.blobs.store import BlobStore
from pochta.blobs.valkyrie import Kind, parse_name
from pochta.mailbox.journal import count_op, dec_op
from pochta.types import AttachmentRef, CheckIndex, LetterState, Op, Space


@dataclass
class FsckReport:
    letters: int = 0
    refs: int = 0
    blobs: int = 0
    lost: list[str] = field(default_factory=list)  # a letter's attachment has no good copy
    damaged: list[str] = field(default_factory=list)  # one copy missing or wrong
    undercounted: list[str] = field(default_factory=list)  # counter below references: danger
    unreadable: list[str] = field(default_factory=list)  # skeleton and references disagree
    leaks: list[str] = field(default_factory=list)  # counted more than referenced: kept, safe
    # counted less than referenced, but the magic disagrees: never deleted automatically
    miscounted: list[str] = field(default_factory=list)
    # on a disk without any FileDB record (only with the disks scanned)
    unindexed: list[str] = field(default_factory=list)
    files_on_disks: int = 0  # files seen on the disks (only with the disks scanned)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.damaged or self.undercounted or self.unreadable or self.unindexed
        )


class Checks:
    def __init__(self, index: CheckIndex, blobs: BlobStore) -> None:
        self.index = index
        self.blobs = blobs

    def stats(self) -> dict[str, Any]:
        s = self.index.stats()
        physical = s.skeleton_bytes + 2 * s.blob_bytes
        single = s.skeleton_bytes + s.blob_bytes
        return {
            "users": s.users,
            "letters": s.letters,
            "attachment_refs": s.refs,
            "blobs": s.blobs,
            "logical_bytes": s.logical_bytes,
            "skeleton_bytes": s.skeleton_bytes,
            "blob_bytes": s.blob_bytes,
            "physical_bytes": physical,
            "dedup_ratio": s.logical_bytes / single if single else 1.0,
            "pending_deletions": s.pending_deletions,
        }

    def fsck(
        self,
        progress: Callable[[int], None] | None = None,
        *,
        disks: bool = False,
        manifest: Mapping[str, Sequence[str]] | None = None,
    ) -> FsckReport:
        report = FsckReport()
        expected: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # count, magic, live
        wanted: dict[str, tuple[int, int]] = {}
        letters: dict[int, LetterState] = {}

        def add(state: LetterState, ref: AttachmentRef) -> None:
            e = expected[ref.key]
            e[0] += 1
            e[1] = add_magic(e[1], ref.magic)
            if state is not LetterState.DELETING:
                e[2] += 1
            wanted[ref.key] = (ref.size, ref.crc32)

        # a reference in flight or cut short counts when PENDING once its count happened,
        # when DELETING until its dec did: the journal says which
        doubtful: dict[Op, tuple[LetterState, AttachmentRef]] = {}
        for letter_id, state, ref in self.index.all_refs():
            report.refs += 1
            letters[letter_id] = state
            if state is LetterState.DELIVERED:
                add(state, ref)
            else:
                op = (count_op if state is LetterState.PENDING else dec_op)(letter_id, ref)
                doubtful[op] = (state, ref)
        journaled = self.blobs.applied(list(doubtful)) if doubtful else set()
        for op, (state, ref) in doubtful.items():
            if (op in journaled) == (state is LetterState.PENDING):
                add(state, ref)
        report.letters = self.index.stats().letters
        for key, (count, magic, live_refs) in expected.items():
            report.blobs += 1
            if progress is not None:
                progress(1)
            record = self.blobs.record(key)
            if record is None or record.space is not Space.LIVE:
                if live_refs:
                    report.lost.append(
                        f"{key}: referenced by {live_refs} letter(s), not live"
                        + _seen(manifest, key)
                    )
                continue
            if record.counter < count and record.magic == magic:
                # the sums agree, yet the counter is short: decs to zero would delete it
                report.undercounted.append(f"{key}: counter {record.counter}, {count} references")
            elif record.counter < count:
                # a count undone or a dec replayed by a crash: the magic no longer sums to the
                # references', so the file can never be deleted automatically (DO_NOT_DELETE
                # when its counter reaches 0): kept, like a leak
                report.miscounted.append(
                    f"{key}: counter {record.counter} for {count} references; magic differs,"
                    " so it is kept"
                )
            elif record.counter > count or record.magic != magic % 2**32:
                report.leaks.append(
                    f"{key}: counter {record.counter} for {count} references"
                    + (" (magic differs)" if record.counter == count else "")
                )
            size, crc32 = wanted[key]
            problems = self.blobs.check_copies(key, size, crc32)
            if len(problems) >= 2:
                report.lost.append(f"{key}: " + "; ".join(problems) + _seen(manifest, key))
            elif problems:
                report.damaged.append(f"{key}: {problems[0]}")
        if disks or manifest is not None:
            self._scan_disks(report, manifest, progress)
        return report

    def _scan_disks(
        self,
        report: FsckReport,
        manifest: Mapping[str, Sequence[str]] | None,
        progress: Callable[[int], None] | None,
    ) -> None:
        """Every stored file on every disk of every pair: those FileDB has no record of."""
        unindexed: dict[str, list[str]] = {}
        for pair in self.blobs.pairs():
            for disk in self.blobs.disks(pair):
                for entry in disk.walk():
                    name = parse_name(entry.name)
                    if name.kind is not Kind.BLOB or name.key is None:
                        continue
                    report.files_on_disks += 1
                    if progress is not None:
                        progress(1)
                    if name.key in unindexed:
                        unindexed[name.key].append(str(disk.spec))
                    elif self.blobs.record(name.key) is None:
                        unindexed[name.key] = [str(disk.spec)]
        for key, where in sorted(unindexed.items()):
            if manifest is None:
                seen = ""
            elif key in manifest:
                seen = "; in the backup's manifest"
            else:
                seen = "; not in the backup's manifest: written after the backup"
            report.unindexed.append(
                f"{key}: on {', '.join(where)}, no FileDB record"
                " (a letter after the restore point, or an upload never finished)" + seen
            )


def _seen(manifest: Mapping[str, Sequence[str]] | None, key: str) -> str:
    """What a backup's manifest says of a file the index needs and the disks lack."""
    if manifest is None:
        return ""
    if key in manifest:
        return f"; the backup's manifest has it on {', '.join(manifest[key])}: lost since"
    return "; not in the backup's manifest: written after the backup, and not on the disks"
