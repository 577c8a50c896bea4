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
- leaks: counted more than referenced (or the magic differs): kept, safe.

Only the first four make ``FsckReport.ok`` false.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pochta.blobs.keys import add_magic
from pochta.blobs.store import BlobStore
from pochta.mailbox.journal import count_op, dec_op
from pochta.types import AttachmentRef, LetterState, MailIndex, Op, Space


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

    @property
    def ok(self) -> bool:
        return not (self.lost or self.damaged or self.undercounted or self.unreadable)


class Checks:
    def __init__(self, index: MailIndex, blobs: BlobStore) -> None:
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

    def fsck(self, progress: Callable[[int], None] | None = None) -> FsckReport:
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
                    report.lost.append(f"{key}: referenced by {live_refs} letter(s), not live")
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
                report.lost.append(f"{key}: " + "; ".join(problems))
            elif problems:
                report.damaged.append(f"{key}: {problems[0]}")
        return report
