"""The background step that finishes recorded deletions (one thread, woken on demand)."""

from __future__ import annotations

import logging
import threading

from pochta.errors import PochtaError
from pochta.mailbox.deletion import Deletions

log = logging.getLogger("pochta.mailbox")


class DeletionWorker:
    """Runs ``Deletions.process`` when woken and every ``interval`` seconds (so that a
    deletion left by a crash or a failed dec is retried). ``start`` first recovers what a
    crash left (``Deletions.recover``); nothing runs before it."""

    def __init__(self, deletions: Deletions, interval: float = 30.0) -> None:
        self.deletions = deletions
        self.interval = interval
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pochta-deletions", daemon=True)

    def start(self) -> None:
        recovered = self.deletions.recover()
        if recovered:
            log.info("%d delivery(ies) cut short by a crash will be undone", recovered)
        self._thread.start()
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                undone = self.deletions.undo_stale()
                if undone:
                    log.info("%d delivery(ies) cut short will be undone", undone)
                done = self.deletions.process()
            except PochtaError as exc:
                log.warning("deletions paused: %s", exc.message)
                continue
            except Exception:
                log.exception("deletion worker failed; retrying later")
                continue
            if done:
                log.info("finished %d deletion(s)", done)
