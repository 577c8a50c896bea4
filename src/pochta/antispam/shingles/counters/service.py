"""``Counters``: the shingler's write and read paths (seed 002) in front of any CounterStore.

Writes: ``update`` adds one letter's increments (about 40) to in-memory buffers, one per
shard, and returns: acknowledged, not yet stored. A background flusher (``start``; the
constructor starts no thread) takes every shard whose buffer is older than ``flush_interval``
or larger than ``shard_cells``, in random order, swaps it for an empty one and writes the lot
as one batch per shard (one Lua call, one transaction). A failed batch goes back into its
buffer and is retried with back-off.

Memory is bounded: when ``max_cells`` increments are waiting (the store is slow or down),
``update`` blocks until the flusher makes room, and after ``wait_timeout`` seconds raises
StorageError: back-pressure reaches the caller instead of growing the heap.

Reads: ``query`` sums, for each shingle, the stored buckets (from a small read cache of recent
store values when fresh, else from the store), the buffered increments and the batches in
flight. A query racing a flush may count that flush's increments twice, never fewer; the cache
never keeps such a value.

A unique's read asks the store for the buckets of each of its pairs still buffered or in
flight (was that pair's bucket zero there?): one sender writing to many recipients has as
many pairs buffered, and every letter's read asked for all of them again (with 100
recipients, ~0.5 ms more a letter). The store's counters only grow within the current
10-minute bucket (expiry drops only buckets a day old and more), so a pair's bucket of the
current 10 minutes, once the store has it (a flush of it written, or a read that found it),
is remembered (:class:`_Stored`) and not asked for again until the bucket changes: the
same value, one read per new pair and bucket instead of one per letter.

Durability: ``close`` (and ``flush``) write everything buffered; no acknowledged increment is
lost on a clean shutdown. A crash loses what was buffered: at most ``flush_interval`` seconds
of increments (plus, while the store is unreachable, everything waiting for it, up to
``max_cells``). A batch whose reply was lost (the connection dropped after the store applied
it) is written again: at least once, so such a batch can count twice.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pochta import metrics
from pochta.antispam.shingles.counters import Batch, Cell, CounterStore, Ref
from pochta.antispam.shingles.counters.buckets import (
    MAX_VALUE,
    SHARDS,
    Buckets,
    Counts,
    Flat,
    Window,
    day_of_slot,
    flat_sums,
    kind_code,
    slot_of,
    span,
    window_sums,
)
from pochta.antispam.shingles.counters.buffer import ReadCache, ShardBuffer
from pochta.errors import InvalidInput, StorageError
from pochta.types import Clock

log = logging.getLogger("pochta.antispam")

_MASK = SHARDS - 1
QUERY_TRIES = 2  # a read that a flush overlapped is done again, once (Counters.query)
STORED_PAIRS = 100_000
"""Pairs :class:`_Stored` remembers at most (~10 MB), then forgets them all and learns again."""
assert SHARDS & _MASK == 0  # a power of two: the shard is the hash's low bits


@dataclass(frozen=True, slots=True)
class CounterStats:
    buffered: int  # increments (cells) waiting in the buffers
    in_flight: int  # cells being written
    cached: int  # shingles in the read cache
    updates: int  # increments accepted since start
    written: int  # cells written to the store since start
    batches: int  # batches written
    failures: int  # batches that failed (and were put back)
    last_error: str | None


class Counters:
    """The counters service. ``buffered=False`` writes each update straight to the store
    (the baseline of the benchmark, and a mode for tests)."""

    def __init__(
        self,
        store: CounterStore,
        *,
        clock: Clock = time.time,
        buffered: bool = True,
        flush_interval: float = 1.0,
        shard_cells: int = 4096,
        max_cells: int = 2_000_000,
        wait_timeout: float = 5.0,
        cache_size: int = 100_000,
        cache_ttl: float = 2.0,
        expire_interval: float = 600.0,
        max_batch_cells: int = 200_000,
    ) -> None:
        self.store = store
        self.clock = clock
        self.buffered = buffered
        self.flush_interval = flush_interval
        self.shard_cells = shard_cells
        self.max_cells = max_cells
        self.wait_timeout = wait_timeout
        self.expire_interval = expire_interval
        self.max_batch_cells = max_batch_cells
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._round = threading.Lock()  # one flush round at a time
        self._shards = [ShardBuffer() for _ in range(SHARDS)]
        self._in_flight: dict[int, ShardBuffer] = {}
        self._epoch = [0] * SHARDS  # completed writes per shard
        self._cells = 0  # buffered + in flight
        self._cache = ReadCache(cache_size, cache_ttl)
        self._stored = _Stored(STORED_PAIRS)  # pairs the store has these 10 minutes
        self._updates = 0
        self._written = 0
        self._batches = 0
        self._failures = 0
        self._last_error: str | None = None
        self._retry_at = 0.0
        self._backoff = 0.0
        self._closed = False
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._next_expire = time.monotonic()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the background flusher (once; unbuffered counters have none). Until it runs,
        buffered increments are written only by ``flush`` and ``close``."""
        with self._lock:
            if self._closed:
                raise StorageError("shingle counters are closed")
            if not self.buffered or self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._run, name="pochta-shingle-flusher", daemon=True
            )
            self._thread.start()

    # -- writes ---------------------------------------------------------------------------
    def update(
        self,
        refs: Sequence[Ref],
        kind: str,
        n: int = 1,
        *,
        at: float | None = None,
        wait: float | None = None,
    ) -> None:
        """Add ``n`` to counter ``kind`` of every shingle in ``refs`` (one letter's update),
        in the buckets of ``at`` (default: now). When the buffer is full, wait up to ``wait``
        seconds (default ``wait_timeout``; 0: not at all) for room, then StorageError."""
        code = kind_code(kind)
        if not 1 <= n <= MAX_VALUE:
            raise InvalidInput(f"count must be between 1 and {MAX_VALUE}, not {n}")
        slot = slot_of(self.clock() if at is None else at)
        if not self.buffered:
            self._write_through(refs, code, slot, n)
            return
        with self._lock:
            if self._closed:
                raise StorageError("shingle counters are closed")
            if self._cells >= self.max_cells:
                self._wake.set()
                deadline = time.monotonic() + (self.wait_timeout if wait is None else wait)
                while self._cells >= self.max_cells:
                    left = deadline - time.monotonic()
                    if left <= 0 or self._closed:
                        metrics.shingle_backpressure("dropped")
                        raise StorageError(
                            "shingle counters: the write buffer is full and the store is not"
                            f" taking writes ({self._last_error or 'slow'})"
                        )
                    self._room.wait(left)
                metrics.shingle_backpressure("waited")
            added, full = self._add(refs, code, slot, n)
            self._cells += added
            self._updates += len(refs)
        if full:
            self._wake.set()

    def _add(self, refs: Sequence[Ref], code: str, slot: int, n: int) -> tuple[int, bool]:
        """The hot path (called with the lock held): ``ShardBuffer.add`` inlined for plain
        shingles, the common case."""
        shards = self._shards
        limit = self.shard_cells
        key = (code, slot)
        added = 0
        full = False
        for ref in refs:
            u = ref.unique
            if u is not None:
                buf = shards[u.hash & _MASK]
                added += buf.add(ref.type, ref.hash, code, slot, n, (u.type, u.hash))
            else:
                h = ref.hash
                buf = shards[h & _MASK]
                cells = buf.cells
                k = (ref.type, h, code, slot)
                old = cells.get(k)
                if old is None:
                    if not cells:
                        buf.since = time.monotonic()
                        buf.buckets.add(key)
                    elif key not in buf.buckets:
                        buf.buckets.add(key)
                    cells[k] = n
                    added += 1
                else:
                    value = old + n
                    cells[k] = value if value <= MAX_VALUE else MAX_VALUE
            if len(buf.cells) >= limit:
                full = True
        return added, full

    def _write_through(self, refs: Sequence[Ref], code: str, slot: int, n: int) -> None:
        by_shard: dict[int, list[Cell]] = {}
        for ref in refs:
            u = ref.unique
            by_shard.setdefault(ref.shard, []).append(
                (ref.type, ref.hash, code, slot, n, None if u is None else u.id)
            )
        batches = list(by_shard.items())
        results = self.store.apply(batches)
        with self._lock:
            self._updates += len(refs)
            for (shard, cells), error in zip(batches, results, strict=True):
                if error is None:
                    self._epoch[shard] += 1
                    self._cache.written(cells)  # (no pairs are buffered: nothing to remember)
                    self._written += len(cells)
                    self._batches += 1
        for error in results:
            if error is not None:
                raise error

    def flush(self) -> None:
        """Write every buffered increment now; StorageError if some could not be (they stay
        buffered and the flusher retries them)."""
        if not self.buffered:
            return
        errors = self._flush_round(force=True)
        if errors:
            raise StorageError(
                f"shingle counters: {len(errors)} batch(es) not written: {errors[0]}"
            )

    def _ripe(self, force: bool) -> list[int]:
        now = time.monotonic()
        pressure = self._cells >= self.max_cells // 2
        out = [
            s
            for s, buf in enumerate(self._shards)
            if buf.size
            and (
                force
                or pressure
                or buf.size >= self.shard_cells
                or now - buf.since >= self.flush_interval
            )
        ]
        random.shuffle(out)
        return out

    def _flush_round(self, force: bool = False) -> list[str]:
        """Swap the ripe shards' buffers out and write them; returns the errors."""
        errors: list[str] = []
        with self._round:
            with self._lock:
                chosen = self._ripe(force)
            while chosen:
                taken: list[tuple[int, ShardBuffer]] = []
                cells = 0
                with self._lock:
                    while chosen and (not taken or cells < self.max_batch_cells):
                        s = chosen.pop()
                        buf = self._shards[s]
                        if not buf.size:
                            continue
                        self._shards[s] = ShardBuffer()
                        self._in_flight[s] = buf
                        taken.append((s, buf))
                        cells += buf.size
                if not taken:
                    break
                batches: list[Batch] = [(s, buf.drain()) for s, buf in taken]
                started = time.perf_counter()
                try:
                    results: list[Exception | None] = self.store.apply(batches)
                except Exception as exc:  # a store bug must not lose the batch
                    log.exception("shingle counter store failed")
                    results = [exc] * len(batches)
                failed = sum(len(c) for (_, c), e in zip(batches, results, strict=True) if e)
                metrics.shingle_flush(time.perf_counter() - started, cells - failed, failed)
                errors.extend(self._settle(taken, batches, results))
        return errors

    def _settle(
        self,
        taken: list[tuple[int, ShardBuffer]],
        batches: list[Batch],
        results: list[Exception | None],
    ) -> list[str]:
        errors: list[str] = []
        current = slot_of(self.clock())
        with self._lock:
            for (shard, buf), (_, cells), error in zip(taken, batches, results, strict=True):
                del self._in_flight[shard]
                self._cells -= buf.size
                if error is None:
                    self._epoch[shard] += 1
                    self._cache.written(cells)
                    self._stored.written(cells, current)
                    self._written += len(cells)
                    self._batches += 1
                else:
                    self._cells += self._shards[shard].add_cells(cells)
                    self._stored.forget()  # a store that fails may have lost what it had
                    self._failures += 1
                    self._last_error = str(error)
                    errors.append(str(error))
            self._room.notify_all()
        if errors:
            self._backoff = min(2.0, max(0.1, self._backoff * 2))
            self._retry_at = time.monotonic() + self._backoff
            log.warning(
                "shingle counters: %d batch(es) not written, retrying in %.1fs: %s",
                len(errors),
                self._backoff,
                errors[0],
            )
        else:
            self._backoff = 0.0
        return errors

    def _run(self) -> None:
        tick = max(0.01, min(0.25, self.flush_interval / 4))
        while not self._stop.is_set():
            self._wake.wait(tick)
            self._wake.clear()
            if self._stop.is_set():
                return
            metrics.shingle_buffer(self._cells, self.max_cells)  # sampled once per tick
            if time.monotonic() < self._retry_at:
                continue
            try:
                self._flush_round()
                if time.monotonic() >= self._next_expire:
                    self._next_expire = time.monotonic() + self.expire_interval
                    dropped = self.store.expire(self.clock())
                    if dropped:
                        log.info("shingle counters: %d expired bucket(s) dropped", dropped)
            except Exception:  # keep flushing whatever happens
                log.exception("shingle counter flusher failed; retrying")
                time.sleep(tick)

    # -- reads ----------------------------------------------------------------------------
    def query(
        self, refs: Sequence[Ref], windows: Sequence[Window], *, now: float | None = None
    ) -> list[dict[str, Counts]]:
        """For each ref, window name -> kind -> value: stored + buffered + in flight.

        A unique's buffered and in-flight pairs count once per (pair, bucket) and only when
        the store does not have that pair's bucket yet (the store's unique already counted
        it then): the same value the store holds once everything is flushed.

        The buffers are read under the lock, the store after it: a flush of one of the
        refs' shards in between would put the same increments in both and count them twice.
        Such a read (a shard in flight, or written, since the buffers were read) is done
        again, once; a second that overlaps a flush too (a store slow to write) is answered
        as it is, at most that flush's increments high."""
        now = self.clock() if now is None else now
        empty = Buckets()
        return [window_sums(b or empty, windows, now) for b in self._buckets(refs, windows, now)]

    def query_flat(
        self, refs: Sequence[Ref], windows: Sequence[Window], *, now: float | None = None
    ) -> list[Flat]:
        """``query`` as plain ints (``buckets.flat_sums``: each window's kinds in turn), with
        no dict per shingle and window; a shingle nobody counted is ``buckets.zeros``'s shared
        tuple. What a verdict reads (``antispam.verdict.shingle_features_flat``)."""
        now = self.clock() if now is None else now
        return [flat_sums(b, windows, now) for b in self._buckets(refs, windows, now)]

    def _buckets(
        self, refs: Sequence[Ref], windows: Sequence[Window], now: float
    ) -> list[Buckets | None]:
        """Each ref's buckets (None: nothing anywhere), read as ``query`` says."""
        for _ in range(QUERY_TRIES - 1):
            merged, settled = self._query(refs, windows, now)
            if settled:
                return merged
        return self._query(refs, windows, now)[0]

    def _query(
        self, refs: Sequence[Ref], windows: Sequence[Window], now: float
    ) -> tuple[list[Buckets | None], bool]:
        """One read (each ref's buckets; None: nothing buffered, in flight, cached or
        stored), and whether no flush of the refs' shards overlapped it. The buckets may be
        the read cache's: only read them."""
        sp = span(windows, now)
        mono = time.monotonic()
        merged: list[Buckets | None] = [None] * len(refs)
        missing: list[int] = []
        epochs: list[int] = []
        # ref index -> the (pair, code, slot)s buffered or in flight for that unique
        pending: dict[int, set[tuple[tuple[int, int], str, int]]] = {}
        pending_epochs: dict[int, int] = {}  # as ``epochs``, for the refs in ``pending``
        settled = True
        current = slot_of(self.clock())
        with self._lock:
            shards, flights, cache = self._shards, self._in_flight, self._cache
            stored_now = self._stored.now(current)
            for i, ref in enumerate(refs):
                h, u = ref.hash, ref.unique  # ``ref.shard`` and ``ref.id``, inline
                shard = (h if u is None else u.hash) & _MASK
                id_ = (ref.type, h)
                b: Buckets | None = None
                buf = shards[shard]
                flying = flights.get(shard)
                if buf.cells:
                    b = Buckets()
                    buf.contribution(id_, b, uniques=False)
                    if buf.pairs:
                        got_pairs = _unknown(buf.pair_buckets(id_), stored_now, current)
                        if got_pairs:
                            pending.setdefault(i, set()).update(got_pairs)
                if flying is not None:
                    b = b or Buckets()
                    flying.contribution(id_, b, uniques=False)
                    if flying.pairs:
                        got_pairs = _unknown(flying.pair_buckets(id_), stored_now, current)
                        if got_pairs:
                            pending.setdefault(i, set()).update(got_pairs)
                cached = cache.get(id_, sp, mono)
                if cached is not None:
                    if b is None:
                        b = cached  # only read from here on
                    else:
                        b.merge(cached)
                else:
                    missing.append(i)
                    epochs.append(-1 if flying is not None else self._epoch[shard])
                if i in pending:
                    pending_epochs[i] = -1 if flying is not None else self._epoch[shard]
                merged[i] = b
        # the stored buckets of the pending pairs, read with the uniques they decide
        pair_refs: list[Ref] = []
        pair_index: dict[tuple[int, int], int] = {}
        for i, cells in pending.items():
            unique = refs[i]
            for p, _, _ in cells:
                if p not in pair_index:
                    pair_index[p] = len(pair_refs)
                    pair_refs.append(Ref(p[0], p[1], Ref(unique.type, unique.hash)))
        if missing or pair_refs:
            try:
                read = self.store.read([*(refs[i] for i in missing), *pair_refs], sp)
            except Exception:
                with self._lock:
                    self._stored.forget()  # a store that fails may have lost what it had
                raise
            stored, stored_pairs = read[: len(missing)], read[len(missing) :]
            with self._lock:
                self._stored.found(pending, pair_index, stored_pairs, current)
                for i, epoch in pending_epochs.items():
                    shard = refs[i].shard
                    if epoch != self._epoch[shard] or shard in self._in_flight:
                        settled = False
                for i, epoch, got in zip(missing, epochs, stored, strict=True):
                    shard = refs[i].shard
                    if epoch == self._epoch[shard] and shard not in self._in_flight:
                        self._cache.put(refs[i].id, got.copy(), sp, mono)
                    else:
                        settled = False
                    mine = merged[i]
                    if mine is None:
                        merged[i] = got
                    else:
                        mine.merge(got)
            for i, cells in pending.items():
                b = Buckets()
                mine = merged[i]
                if mine is not None:
                    b.merge(mine)  # a copy: ``mine`` may be the cache's
                days: set[tuple[tuple[int, int], str, int]] = set()
                for p, code, slot in cells:
                    pair = stored_pairs[pair_index[p]]
                    if not pair.slots.get((code, slot)):
                        b.slots[(code, slot)] = b.slots.get((code, slot), 0) + 1
                    day = day_of_slot(slot)
                    if (p, code, day) not in days:
                        days.add((p, code, day))
                        if not pair.days.get((code, day)):
                            b.days[(code, day)] = b.days.get((code, day), 0) + 1
                merged[i] = b
        return merged, settled

    def stats(self) -> CounterStats:
        with self._lock:
            flying = sum(b.size for b in self._in_flight.values())
            return CounterStats(
                buffered=self._cells - flying,
                in_flight=flying,
                cached=len(self._cache),
                updates=self._updates,
                written=self._written,
                batches=self._batches,
                failures=self._failures,
                last_error=self._last_error,
            )

    def close(self, timeout: float = 10.0) -> None:
        """Stop the flusher and write everything buffered (retrying for up to ``timeout``
        seconds), then close the store. Increments still unwritten then are logged as lost."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._room.notify_all()
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        deadline = time.monotonic() + timeout
        while self.buffered:
            errors = self._flush_round(force=True)
            if not errors:
                break
            if time.monotonic() >= deadline:
                with self._lock:
                    lost = self._cells
                log.error(
                    "shingle counters: %d buffered increment(s) lost at close: %s", lost, errors[0]
                )
                break
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        self.store.close()


PairCell = tuple[tuple[int, int], str, int]  # (pair (type, hash), kind code, slot)


def _unknown(
    cells: list[PairCell], stored: set[tuple[int, int, str]], current: int
) -> list[PairCell]:
    """The buffered pair cells whose bucket the store is not known to have: a cell of the
    current 10 minutes whose pair and kind are in ``stored`` (:class:`_Stored`) is left out
    (its bucket, and so its day, is not zero there: its unique counts nothing for it)."""
    if not stored:
        return cells
    return [c for c in cells if c[2] != current or (*c[0], c[1]) not in stored]


class _Stored:
    """The pairs (type, hash, kind code) whose bucket of the current 10 minutes the store has
    (not zero): written by a flush of this process, or found by a read. Counters only grow
    within a bucket that no window has left (expiry drops buckets a day old), so what is
    known stays true while that bucket is the current one; it is forgotten when the next
    begins. At most ``limit`` pairs (then all are forgotten, to be learned again). Called
    with the counters' lock held; ``current``: the 10-minute bucket of the caller's clock."""

    __slots__ = ("limit", "pairs", "slot")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.slot = -1
        self.pairs: set[tuple[int, int, str]] = set()

    def now(self, current: int) -> set[tuple[int, int, str]]:
        """What is known of bucket ``current``: forgotten whenever the bucket changes, a
        clock stepping back included (a bucket met again may have been expired meanwhile)."""
        if current != self.slot:
            self.slot = current
            self.pairs = set()
        return self.pairs

    def forget(self) -> None:
        """Forget everything: the store failed (a Redis failover can lose acknowledged
        writes), so what it had is not known any more."""
        self.pairs = set()

    def _add(self, pair: tuple[int, int, str]) -> None:
        if len(self.pairs) >= self.limit:
            self.pairs = set()
        self.pairs.add(pair)

    def written(self, cells: Sequence[Cell], current: int) -> None:
        """A batch reached the store: its pairs' cells of bucket ``current`` are there."""
        self.now(current)
        for t, h, code, slot, _, unique in cells:
            if unique is not None and slot == current:
                self._add((t, h, code))

    def found(
        self,
        pending: dict[int, set[PairCell]],
        index: dict[tuple[int, int], int],
        read: Sequence[Buckets],
        current: int,
    ) -> None:
        """A read of the pairs of ``pending`` (their buckets ``read``, by ``index``): the
        cells of bucket ``current`` it found stored are known from now on."""
        self.now(current)
        for cells in pending.values():
            for p, code, slot in cells:
                if slot == current and read[index[p]].slots.get((code, slot)):
                    self._add((*p, code))
