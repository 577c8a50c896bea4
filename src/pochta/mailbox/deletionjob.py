"""The background job that finishes recorded deletions: one process at a time.

Every ``pochta serve`` starts a ``DeletionJob``; among all the processes that share the
locks (the ``--processes`` of one machine, the loaders of many), one leads the job
(``pochta.guard.singleton``). When it becomes the leader it first recovers what a crash left
(``Deletions.recover``: deliveries cut short, then the journal sweep), then every ``interval``
seconds, or at once when woken in this process, undoes the deliveries cut short since and
finishes the recorded deletions. A leader that dies hands the job over one lease length
later; the next leader's recovery finishes what it left halfway (every dec carries its
operation id, so a dec replayed is counted once).
"""

from __future__ import annotations

import logging

from pochta.guard.lock import Lease, Locks
from pochta.guard.singleton import Singleton
from pochta.mailbox.deletion import Deletions
from pochta.types import Fence

log = logging.getLogger("pochta.mailbox")

JOB = "mailbox-deletions"
STOP_TIMEOUT = 10.0  # seconds a stopping server waits for the round in progress
LOCK_SLACK = 1.0  # seconds past one lease length that a round waits for the deletions' lock


class DeletionJob:
    def __init__(
        self,
        deletions: Deletions,
        locks: Locks,
        interval: float = 30.0,
        *,
        fence: Fence | None = None,
    ) -> None:
        self.deletions = deletions
        self.locks = locks
        self.interval = interval
        self.job = Singleton(
            locks,
            JOB,
            self._round,
            interval=interval,
            fence=fence,
            on_lead=self._recover,
            thread_name="pochta-deletions",
        )

    def start(self) -> None:
        self.job.start()

    def wake(self) -> None:
        self.job.wake()

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop after the round in progress; a round still running after ``timeout`` is left
        to the process's exit (its steps are journaled: the next leader finishes them)."""
        self.job.stop(timeout)

    def _recover(self, lease: Lease) -> None:
        recovered = self.deletions.recover()
        if recovered:
            log.info("%d delivery(ies) cut short by a crash will be undone", recovered)

    def _round(self, lease: Lease) -> None:
        undone = self.deletions.undo_stale()
        if undone:
            log.info("%d delivery(ies) cut short will be undone", undone)
        lease.check()
        # a leader killed in the middle of a round holds the deletions' lock for one more
        # lease length, maybe a little past its job lock, which this process took: waiting
        # for it here finishes the deletions now, not one ``interval`` later
        wait = self.locks.ttl + LOCK_SLACK
        done = self.deletions.process(wait=wait, stopping=self.job.stopping)
        if done:
            log.info("finished %d deletion(s)", done)
