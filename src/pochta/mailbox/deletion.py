"""Deletion: recorded first, finished by a background step; and undoing cut-short deliveries.

``delete`` turns the letter DELETING in one write. ``process`` (the deletion job's step)
decs each of its references with the reference's own magic, removes the reference, and finally
the letter. Every dec carries its operation id (``journal.dec_op``): a crash between a dec and
the removal of its reference replays the dec on restart, and the FileDB, finding the id
journaled, does nothing. One process at a time finishes deletions (a lease): two would dec
twice.

A delivery cut short ends here too. Its letters are PENDING, some of their counts made.
``abandon`` (at once, when ``deliver`` fails) and ``undo_stale`` (PENDING letters older than
the grace: a crash, or an undo that failed too) ask the journal which counts happened, drop
the references never counted and turn the letters into deletions, so that exactly the counts
made are undone. ``recover`` does that on start, then sweeps the journal.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from pochta.blobs.store import BlobStore
from pochta.errors import BlobNotFound, LeaseLost, LockTimeout, MessageNotFound, PochtaError
from pochta.guard.lock import Lease, Locks
from pochta.mailbox.journal import Journal, count_op, dec_op
from pochta.types import Clock, DeletionIndex

log = logging.getLogger("pochta.mailbox")

DELETIONS_LOCK = "mailbox-deletions"
WAIT_STEP = 1.0  # seconds one wait for the deletions' lock lasts before looking at ``stopping``


class Deletions:
    def __init__(
        self,
        index: DeletionIndex,
        blobs: BlobStore,
        journal: Journal,
        *,
        locks: Locks | None = None,
        pending_grace: float = 600.0,
        clock: Clock = time.time,
    ) -> None:
        self.index = index
        self.blobs = blobs
        self.journal = journal
        self.locks = locks
        self.pending_grace = pending_grace
        self._clock = clock
        self._deleting = threading.Lock()

    def delete(self, user_id: int, letter_id: int) -> None:
        if not self.index.delete(user_id, letter_id):
            raise MessageNotFound(f"no message {letter_id}")

    def process(
        self, batch: int = 100, *, wait: float = 0.0, stopping: threading.Event | None = None
    ) -> int:
        """Finish recorded deletions; returns how many letters were finished (0 when another
        process holds the deletions). ``wait``: seconds to wait for that process (the deletion
        job waits one lease length: a holder killed in the middle keeps its lease that long,
        and its work would otherwise wait for the next round), given up when ``stopping``
        is set."""
        done = 0
        with contextlib.ExitStack() as stack:
            lease = None
            if self.locks is not None:  # one process at a time: two would dec twice
                # taken before ``_deleting``: a wait for another process holds up no thread
                # of this one (a failed delivery's ``abandon``)
                lease = _lock(self.locks, wait, stopping)
                if lease is None:
                    return 0
                stack.callback(_release_quietly, lease)
            stack.enter_context(self._deleting)
            while work := self.index.deletions(batch):
                for letter_id, refs in work:
                    for ref in refs:
                        if lease is not None:
                            lease.check()  # LeaseLost: stop; the next holder goes on
                        op = dec_op(letter_id, ref)
                        # BlobNotFound: the record is gone (removed by an operator, or the
                        # replay of a dec whose file has been purged since)
                        with contextlib.suppress(BlobNotFound):
                            self.blobs.dec(ref.key, ref.magic, op)
                        self.index.ref_done(letter_id, ref.n)
                        self.journal.settled([op])
                    self.index.finish_deletion(letter_id)
                    done += 1
                self.journal.settle()
        self.journal.settle()  # also what deliveries settled meanwhile
        return done

    # -- deliveries cut short ----------------------------------------------------------------
    def abandon(self, ids: list[int]) -> None:
        """A delivery failed: undo exactly the counts it made, through the deletion path, at
        once (unless another process, or this process's deletion job, holds the deletions: then
        the holder or the job's next round does them). When even that fails, the letters stay
        PENDING or DELETING for ``recover`` or the deletion job."""
        try:
            self._give_up(ids)
            self.process()
        except PochtaError as exc:
            log.warning("a failed delivery is left to be undone later: %s", exc.message)

    def recover(self, grace: float | None = None) -> int:
        """On start: ``undo_stale``, then sweep the journal of what a crash left in it."""
        changed = self.undo_stale(grace)
        self.journal.settle()
        self.journal.sweep()
        return changed

    def undo_stale(self, grace: float | None = None) -> int:
        """Undo the deliveries cut short (a crash, a failure whose undo failed too): PENDING
        letters older than ``grace`` seconds (default ``pending_grace``), exactly the counts
        they made. Another process's delivery in flight is younger, and left alone. Returns
        how many letters were undone; the deletion job finishes them."""
        before = self._clock() - (self.pending_grace if grace is None else grace)
        return self._give_up(None, before)

    def _give_up(self, ids: list[int] | None, before: float | None = None) -> int:
        pending = self.index.pending(ids, before)
        ops = {count_op(lid, ref): (lid, ref.n) for lid, refs in pending for ref in refs}
        applied = self.blobs.applied(list(ops))
        uncounted = [where for op, where in ops.items() if op not in applied]
        changed = self.index.abandon([lid for lid, _ in pending], uncounted)
        self.journal.settled(applied)  # the index now says which counts to undo
        return changed


def _release_quietly(lease: Lease) -> None:
    with contextlib.suppress(LeaseLost):
        lease.release()


def _lock(locks: Locks, wait: float, stopping: threading.Event | None) -> Lease | None:
    """The deletions' lease, waiting up to ``wait`` seconds for another holder (None: still
    held, or ``stopping`` set meanwhile)."""
    lease = locks.try_acquire(DELETIONS_LOCK)
    deadline = time.monotonic() + wait
    while lease is None and not (stopping is not None and stopping.is_set()):
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        # in steps, so that a stopping job does not wait a whole lease length
        with contextlib.suppress(LockTimeout):
            lease = locks.acquire(DELETIONS_LOCK, timeout=min(left, WAIT_STEP))
    return lease
