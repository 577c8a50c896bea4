"""The recorder: an ``Activity`` that adds events up by hour in memory and writes them in
batches, and a background thread that also samples the store's size.

Memory is bounded: at most ``max_buffered`` distinct (hour, series, name) cells wait for a
flush; events past that are dropped and counted in ``dropped``. The history on disk is
bounded too: a series takes at most ``max_names`` distinct names an hour (per process start);
the events of any further name are added to the name ``OTHERS``, so totals stay right while an
attacker failing logins from a million addresses, or complaining about a million made-up
letters, grows the store by one cell an hour. A failed login records the account only when it
names an existing user (``Activity.login_failed``): what was typed is never kept.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from pochta.errors import PochtaError
from pochta.types import AuditRecord, Clock, HistoryStore, StorageSample, Tally

log = logging.getLogger("pochta.history")

MAX_NAME = 200  # characters of a tally's name (a shingle's value, an e-mail) kept
MAX_BACKOFF = 300.0  # seconds between the thread's tries while the store keeps failing
OTHERS = "*"  # the name that adds up a series' names past ``max_names`` in one hour


def shingle_name(type_: int, hash_: int, value: str) -> str:
    """A complaint tally's name: ``type:hash:value`` (the value cut to fit)."""
    return f"{type_}:{hash_:016x}:{value}"[:MAX_NAME]


def parse_shingle_name(name: str) -> tuple[int, int, str]:
    """(type, hash, value) of a ``shingle_name``; ValueError when it is not one."""
    type_, hash_, value = name.split(":", 2)
    return int(type_), int(hash_, 16), value


class Recorder:
    def __init__(
        self,
        store: HistoryStore,
        *,
        sample: Callable[[], StorageSample] | None = None,
        sample_seconds: float = 600.0,
        flush_seconds: float = 5.0,
        keep_seconds: float = 90 * 86400,
        max_buffered: int = 100_000,
        max_names: int = 1000,
        clock: Clock = time.time,
    ) -> None:
        self.store = store
        self.sampler = sample
        self.sample_seconds = sample_seconds
        self.flush_seconds = flush_seconds
        self.keep_seconds = keep_seconds
        self.max_buffered = max_buffered
        self.max_names = max_names
        self._clock = clock
        self._lock = threading.Lock()
        self._buffer: dict[tuple[int, str, str], int] = {}
        self._names: dict[tuple[int, str], set[str]] = {}  # this hour's names of each series
        self.dropped = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # -- Activity ------------------------------------------------------------------------
    def delivered(self, label: str, signs: Sequence[str], copies: int) -> None:
        self._add("verdict", [label], copies)
        self._add("sign", signs, copies)

    def feedback(self, kind: str, shingles: Sequence[tuple[int, int, str]]) -> None:
        self._add(kind, [shingle_name(t, h, v) for t, h, v in shingles], 1)

    def unscored(self, action: str) -> None:
        self._add("unscored", [action], 1)

    def login_failed(self, ip: str, account: str | None) -> None:
        self._add("login_ip", [ip[:64]], 1)
        if account is not None:
            self._add("login_account", [account[:MAX_NAME]], 1)

    def _add(self, series: str, names: Sequence[str], n: int) -> None:
        if n <= 0 or not names:
            return
        hour = int(self._clock() // 3600)
        with self._lock:
            known = self._names.get((hour, series))
            if known is None:
                for old in [k for k in self._names if k[0] < hour - 1]:
                    del self._names[old]  # a late event of the last hour still finds its set
                known = self._names[(hour, series)] = set()
            for name in names:
                if name not in known:
                    if len(known) < self.max_names:
                        known.add(name)
                    else:
                        name = OTHERS
                key = (hour, series, name)
                if key in self._buffer:
                    self._buffer[key] += n
                elif len(self._buffer) < self.max_buffered:
                    self._buffer[key] = n
                else:
                    self.dropped += n

    # -- writing -------------------------------------------------------------------------
    def flush(self) -> int:
        """Write what is buffered; how many cells. A store that fails keeps them for the
        next flush (within ``max_buffered``)."""
        with self._lock:
            cells, self._buffer = self._buffer, {}
        if not cells:
            return 0
        try:
            self.store.add_tallies([Tally(h, s, name, n) for (h, s, name), n in cells.items()])
        except Exception as exc:
            with self._lock:
                for key, n in cells.items():
                    if key in self._buffer or len(self._buffer) < self.max_buffered:
                        self._buffer[key] = self._buffer.get(key, 0) + n
                    else:
                        self.dropped += n
            if not isinstance(exc, PochtaError):
                raise  # a bug, not the store being down: the thread logs it with its traceback
            log.warning("history: %d tallies not written yet: %s", len(cells), exc.message)
            return 0
        return len(cells)

    def sample(self) -> StorageSample | None:
        """Sample the store's size now and keep it (None without a sampler)."""
        if self.sampler is None:
            return None
        taken = self.sampler()
        self.store.add_sample(taken)
        return taken

    def record_audit(self, audit: AuditRecord) -> None:
        self.store.add_audit(audit)

    # -- the thread ----------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="pochta-history", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Flush, sample when due, prune hourly; never dies: any error is logged and the next
        round waits longer (doubling up to ``MAX_BACKOFF``), then tries again."""
        next_sample: float | None = None  # asked of the store in the first good round
        next_prune = 0.0
        failures = 0
        while not self._stop.is_set():
            try:
                if next_sample is None:
                    next_sample = self._first_sample()
                self.flush()
                now = self._clock()
                if self.sampler is not None and now >= next_sample:
                    next_sample = self.sample_if_due(now)
                if now >= next_prune:
                    self.store.prune(now - self.keep_seconds)
                    next_prune = now + 3600
                failures = 0
            except PochtaError as exc:
                failures += 1
                log.warning("history: %s (try %d)", exc.message, failures)
            except Exception:
                failures += 1
                log.exception("history: unexpected error (try %d)", failures)
            delay = self.flush_seconds
            if failures:
                delay = min(delay * 2 ** min(failures, 20), max(delay, MAX_BACKOFF))
            self._wake.wait(delay)
            self._wake.clear()

    def sample_if_due(self, now: float) -> float:
        """Sample unless the store has a sample younger than ``sample_seconds`` (another
        loader sharing the store may have taken it: it stands for this one's, the store they
        sample being the same); when the next one is due."""
        due = self._first_sample()
        if now < due:
            return due
        self.sample()
        return now + self.sample_seconds

    def _first_sample(self) -> float:
        """When the next sample is due, by the newest one in the store (this process's, an
        earlier run's or another loader's): a restart does not sample again before it is,
        and loaders sharing a history take turns rather than each adding its own."""
        if self.sampler is None:
            return 0.0
        last = self.store.samples(self._clock() - self.sample_seconds, limit=1)
        return last[-1].at + self.sample_seconds if last else 0.0

    def wake(self) -> None:
        """Flush (and sample, when due) now rather than at the next tick."""
        self._wake.set()

    def close(self) -> None:
        """Stop the thread and write what is buffered."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        self.flush()
        self.store.close()
