"""The mailbox's side of the blob store's journal: operation ids, and forgetting them.

Counts are exactly-once although the index and the FileDB are two databases. Every count and
every dec the mailbox makes carries an operation id (its kind, the letter, the reference and
its magic), which the FileDB journals in the same atomic step (``BlobStore.applied`` tells
which happened). An entry is no longer needed once the index holds its outcome (the letter
DELIVERED, or the reference removed): ``settled`` notes it, and the notes are forgotten in
batches of ``SETTLE_BATCH`` (one FileDB write each). A crash loses the notes, not the
entries: ``sweep`` finds those the index no longer needs and forgets them.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Iterable

from pochta.blobs.store import BlobStore
from pochta.errors import PochtaError
from pochta.types import AttachmentRef, CheckIndex, LetterState, Op

log = logging.getLogger("pochta.mailbox")

SETTLE_BATCH = 256  # journal entries forgotten per FileDB write

_OP = struct.Struct(">cQII")  # kind, letter id, reference number, magic: 17 bytes
COUNT, DEC = b"c", b"d"


def count_op(letter_id: int, ref: AttachmentRef) -> Op:
    """The operation id of counting ``ref`` for letter ``letter_id`` (upload or inc)."""
    return _OP.pack(COUNT, letter_id, ref.n, ref.magic)


def dec_op(letter_id: int, ref: AttachmentRef) -> Op:
    """The operation id of the dec that deletes ``ref`` of letter ``letter_id``. The magic
    is part of it, so an id the index reuses for a new letter never matches an old entry."""
    return _OP.pack(DEC, letter_id, ref.n, ref.magic)


def parse_op(op: Op) -> tuple[bytes, int, int] | None:
    """(kind, letter id, reference number) of one of our ids; None for another writer's."""
    if len(op) != _OP.size or op[:1] not in (COUNT, DEC):
        return None
    kind, letter_id, n, _magic = _OP.unpack(op)
    return kind, letter_id, n


class Journal:
    """Forgets the journal entries whose outcome the index holds: in batches as they
    settle, and by a sweep after a crash."""

    def __init__(self, index: CheckIndex, blobs: BlobStore) -> None:
        self.index = index
        self.blobs = blobs
        self._settled: list[Op] = []
        self._settled_lock = threading.Lock()

    def settled(self, ops: Iterable[Op]) -> None:
        """These journal entries are no longer needed: the index holds the outcome."""
        with self._settled_lock:
            self._settled.extend(ops)
            full = len(self._settled) >= SETTLE_BATCH
        if full:
            self.settle()

    def settle(self) -> None:
        """Forget the settled journal entries now (one FileDB write). On failure they stay
        journaled, which is harmless: ``recover`` sweeps them."""
        with self._settled_lock:
            ops, self._settled = self._settled, []
        if not ops:
            return
        try:
            self.blobs.forget_ops(ops)
        except PochtaError as exc:
            log.warning("forgetting %d journal entries: %s", len(ops), exc.message)

    def sweep(self) -> int:
        """Forget journal entries whose outcome the index holds: counts of letters no longer
        PENDING, decs of references removed. Entries of other writers are left alone."""
        swept, after = 0, b""
        while page := self.blobs.journal(after=after, limit=1000):
            after = page[-1]
            ours = {op: parsed for op in page if (parsed := parse_op(op)) is not None}
            states = self.index.ref_states([(lid, n) for _, lid, n in ours.values()])
            stale = [
                op
                for op, (kind, lid, n) in ours.items()
                if (state := states.get((lid, n))) is None
                or (kind == COUNT and state is not LetterState.PENDING)
            ]
            if stale:
                self.blobs.forget_ops(stale)
                swept += len(stale)
        if swept:
            log.info("forgot %d journal entries left by a crash", swept)
        return swept
