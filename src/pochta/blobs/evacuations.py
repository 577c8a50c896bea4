"""Evacuations started from the admin pages: one thread per pair being evacuated, its
progress readable while it runs, stopped (resumably) when pochta stops.

    jobs = Evacuations(store, locks)          # app.py builds it; nothing runs yet
    jobs.start(pair_id)                       # refused while that pair's job runs
    jobs.status(pair_id)                      # done / total, the report once finished
    jobs.stop()                               # Pochta.close: each job stops at its next file

A stopped evacuation leaves every file either moved (its record repointed) or untouched;
running it again goes on with what is left (``pochta pairs evacuate`` does the same).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from pochta.blobs.evacuate import EvacuationReport, evacuate
from pochta.blobs.store import BlobStore
from pochta.errors import LockError, PochtaError
from pochta.guard.lock import Locks

log = logging.getLogger("pochta.blobs")


class _Stopped(Exception):
    pass


@dataclass
class EvacuationJob:
    pair: int
    done: int = 0
    total: int = 0
    running: bool = True
    report: EvacuationReport | None = None
    error: str | None = None


class Evacuations:
    def __init__(self, store: BlobStore, locks: Locks | None = None) -> None:
        self.store = store
        self.locks = locks
        self._lock = threading.Lock()
        self._jobs: dict[int, EvacuationJob] = {}
        self._threads: dict[int, threading.Thread] = {}
        self._stop = threading.Event()

    def start(self, pair_id: int) -> EvacuationJob:
        """Start evacuating a pair (it is put into SERVICE first); LockError when a job for
        it runs already, PairNotFound for an unknown pair."""
        self.store.pairdb.get(pair_id)
        with self._lock:
            if self._stop.is_set():
                raise LockError("pochta is stopping")
            job = self._jobs.get(pair_id)
            if job is not None and job.running:
                raise LockError(f"pair {pair_id} is being evacuated already")
            job = self._jobs[pair_id] = EvacuationJob(pair_id)
            thread = threading.Thread(
                target=self._run, args=(job,), name=f"pochta-evacuate-{pair_id}", daemon=True
            )
            self._threads[pair_id] = thread
        thread.start()
        return job

    def _run(self, job: EvacuationJob) -> None:
        def progress(done: int, total: int) -> None:
            job.done, job.total = done, total
            if self._stop.is_set():
                raise _Stopped

        try:
            job.report = evacuate(self.store, job.pair, locks=self.locks, progress=progress)
            job.done, job.total = job.report.total, job.report.total
        except _Stopped:
            job.error = "stopped with pochta; start it again to go on"
        except PochtaError as exc:
            job.error = exc.message
            log.warning("evacuation of pair %d: %s", job.pair, exc.message)
        finally:
            job.running = False

    def status(self, pair_id: int) -> EvacuationJob | None:
        with self._lock:
            return self._jobs.get(pair_id)

    def jobs(self) -> list[EvacuationJob]:
        with self._lock:
            return list(self._jobs.values())

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(timeout)
