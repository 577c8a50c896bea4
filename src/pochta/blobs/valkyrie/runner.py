"""Valkyrie in ``pochta serve``: a background pass over each local disk, led by one process
among those that share the locks."""

from __future__ import annotations

import logging
import threading
import time

from pochta.blobs.valkyrie.scrub import Valkyrie, lock_name
from pochta.errors import LeaseLost, PochtaError
from pochta.guard.singleton import Singleton
from pochta.types import DiskSpec, Fence

log = logging.getLogger("pochta.blobs.valkyrie")  # the name it had before the split


class ValkyrieRunner:
    """Valkyrie in background threads, one per local disk, for ``pochta serve``.

        runner = ValkyrieRunner(valkyrie, fence=fence); runner.start(); ...; runner.stop()

    With locks (as ``pochta serve`` has them), each disk is a ``Singleton`` job: among every
    process that shares the locks, one leads it and runs a pass every
    ``pass_interval_seconds``; when that process dies, another takes the disk over after one
    lease length. Without locks (one process), each disk is a plain thread. New pairs are
    picked up every ``rescan_seconds``, retired ones dropped. ``stop`` saves every position
    and joins the threads.

    Disks on WebDAV nodes are scrubbed on their storage hosts (``pochta valkyrie run --disk
    <dir>``), where the bytes are local, not from here over HTTP.
    """

    def __init__(
        self,
        valkyrie: Valkyrie,
        *,
        rescan_seconds: float = 60.0,
        fence: Fence | None = None,
    ) -> None:
        self.valkyrie = valkyrie
        self.fence = fence
        self._rescan = rescan_seconds
        self._stop = threading.Event()
        self._threads: dict[DiskSpec, threading.Thread] = {}
        self.jobs: dict[DiskSpec, Singleton] = {}
        self._supervisor: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._supervisor = threading.Thread(
            target=self._supervise, name="pochta-valkyrie", daemon=True
        )
        self._supervisor.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every disk's pass (each saves its position) within ``timeout`` in all; a
        thread still running then is left to the process's exit (and logged)."""
        deadline = time.monotonic() + timeout
        self._stop.set()
        for job in list(self.jobs.values()):
            job.cancel()
        if self._supervisor is not None:
            self._supervisor.join(max(0.0, deadline - time.monotonic()))
        for job in list(self.jobs.values()):  # the supervisor may have added one meanwhile
            job.cancel()
            job.join(max(0.0, deadline - time.monotonic()))
        for thread in list(self._threads.values()):
            thread.join(max(0.0, deadline - time.monotonic()))

    def _supervise(self) -> None:
        while not self._stop.is_set():
            try:
                disks = {
                    pair.disks[index]: (pair.id, index)
                    for pair, index in self.valkyrie.disks()
                    if pair.disks[index].node == "local"
                }
                for spec, (pair_id, index) in disks.items():
                    self._ensure(spec, pair_id, index)
                for spec in [s for s in self.jobs if s not in disks]:  # a retired pair
                    self.jobs.pop(spec).stop()
            except PochtaError as exc:
                log.error("valkyrie: %s", exc.message)
            self._stop.wait(self._rescan)

    def _ensure(self, spec: DiskSpec, pair_id: int, index: int) -> None:
        name = f"pochta-valkyrie-{pair_id}.{index}"
        locks = self.valkyrie.locks
        if locks is not None:
            if spec not in self.jobs:
                job = Singleton(
                    locks,
                    lock_name(spec),
                    lambda _lease: self._pass(pair_id, index, job.stopping),
                    interval=self.valkyrie.config.pass_interval_seconds,
                    fence=self.fence,
                    thread_name=name,
                )
                self.jobs[spec] = job
                if not self._stop.is_set():
                    job.start()
            return
        if spec not in self._threads or not self._threads[spec].is_alive():
            thread = threading.Thread(
                target=self._disk_loop, args=(pair_id, index), name=name, daemon=True
            )
            self._threads[spec] = thread
            thread.start()

    def _pass(self, pair_id: int, index: int, stop: threading.Event) -> None:
        pair = self.valkyrie.store.pairdb.get(pair_id)  # fresh flags every pass
        report = self.valkyrie.run_disk(pair, index, stop=stop)
        if report.complete:
            log.info("valkyrie %s: pass done: %s", report.disk, report.counts.as_dict())

    def _disk_loop(self, pair_id: int, index: int) -> None:
        while not self._stop.is_set():
            try:
                self._pass(pair_id, index, self._stop)
            except LeaseLost:
                pass
            except PochtaError as exc:
                log.error("valkyrie pair %d disk %d: %s", pair_id, index, exc.message)
                if exc.code == "not_found":  # the pair was retired
                    return
            self._stop.wait(self.valkyrie.config.pass_interval_seconds)
