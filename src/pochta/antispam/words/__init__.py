"""The words this installation has learned: a token table that grows with its mail.

The shipped model reads ``tokens.score``, the SpamBayes statistic of a letter's words over a
table learned from the training corpus (:mod:`pochta.antispam.tokens`, ``tokens.json``). That
table knows only the words of 2002's mailing lists and spam; the words of the mail a service
really gets (its shops' newsletters, its banks' notices, this year's spam) are in it only by
chance. As SpamAssassin's and Rspamd's Bayes do, pochta learns them where it runs:

- people's word: "spam" / "not spam" (moving a letter into or out of Spam, in any client)
  counts the letter's words as :data:`FEEDBACK_WEIGHT` letters of that class;
- pochta's sure verdicts (:class:`pochta.antispam.verdict.Learning`): a letter the shipped
  knowledge alone calls surely spam, or surely ham, counts as one letter of its class. What
  the installation learned never decides what it learns next (the decision reads the
  shipped table's score, not the merged one), so a mistake cannot feed on itself.

A letter's score then reads both tables at once: for each of its words, the shipped counts
plus the learned ones, over the shipped plus learned letters (:func:`merged_table`). A model
with word weights (``tokens.weights``) has that column moved by the same counts: each learned
word by how far its statistic's log-odds moved, calibrated once per model
(:meth:`pochta.antispam.tokens.TokenTable.weighed`), so a user's teaching decides beside the
weights again (BENCHMARKS.md, issue 28: P 0.98 for club notes a user taught as spam, 0.55 with
the column fixed); the installation's learning gains less than with a model without word
weights (30 % of misfiled letters corrected: 2 more spam-2 letters caught against 27).

    Words (this module)         learn / judge / flush / close; what the scanner uses
      ├── a buffer of learned   word -> (spam, ham) added up in memory, written by a background
      │   increments            flusher (``start``) every ``flush_interval`` s as one step
      └── WordStore             this Protocol; one atomic step per flush
            ├── MemoryWordStore (memory.py)     in-process: tests, evaluation
            ├── SQLiteWordStore (sqlite.py)     embedded: one file, one writer
            ├── PostgresWordStore (postgres.py) every loader's one table ([postgres])
            └── RedisWordStore (redis.py)       every loader's one table ([redis])

Words are kept as 64-bit hashes (:func:`pochta.antispam.tokens.token_hash`), never as text: a
letter's words include names, codes and passwords, and the table must not be a copy of them.

Bounded: at most ``max_words`` words are kept; past it the flusher drops the words learned
longest ago (``prune``). The buffer holds at most ``max_pending`` words; past it a letter's
words are dropped (logged), never waited for: learning must not slow the mail. A crash loses
what was buffered (at most ``flush_interval`` seconds of learning).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pochta.antispam import tokens as tokens_mod
from pochta.errors import StorageError
from pochta.types import Clock

log = logging.getLogger("pochta.antispam")

Kind = Literal["spam", "ham"]
FEEDBACK_WEIGHT = 3
"""Letters one person's "spam" / "not spam" counts for, here and in the shingles' counters
(:func:`pochta.antispam.verdict.spam_lean`): an assumption (about a third of the people who
see a misfiled letter say so), not a measurement."""
DAY = 86400.0
MAX_HASHES = tokens_mod.MAX_TOKENS + 64
"""Words of one letter a store is asked about or told (tokenize gives at most MAX_TOKENS)."""


INSTALLATION = 0
"""The owner of the installation's words; an account's own words have its id as owner."""


class WordStore(Protocol):
    """Where learned words live, by owner (:data:`INSTALLATION`, or an account's id: each
    owner's table is its own). Counts are letters (weighted), 64-bit, never below 0."""

    def add(
        self,
        owner: int,
        words: Mapping[int, tuple[int, int]],
        letters: tuple[int, int],
        day: int,
    ) -> None:
        """In one atomic step: each of the owner's words' (spam, ham) letters += the given
        ones (a negative delta stops at 0), the owner's learned letters += ``letters``, and
        each word's last day seen = ``day``. StorageError when nothing was written."""

    def counts(self, owner: int, words: Sequence[int]) -> dict[int, tuple[int, int]]:
        """(spam, ham) of each of the owner's words known (unknown words are absent).
        StorageError."""

    def totals(self, owner: int) -> tuple[int, int]:
        """Letters the owner learned as (spam, ham). StorageError."""

    def size(self, owner: int) -> int:
        """The owner's words kept."""

    def prune(self, owner: int, keep: int) -> int:
        """Drop the owner's words last seen longest ago until at most ``keep`` remain; how
        many were dropped."""

    def forget(self, owner: int) -> None:
        """Drop everything the owner learned (its words and its letters' totals)."""

    def owners(self) -> list[int]:
        """The owners that learned anything, in order."""

    def all_totals(self) -> dict[int, tuple[int, int]]:
        """Letters each owner that learned anything learned, as (spam, ham), in one read
        (one round trip per node): what deciding whose words count reads. StorageError."""

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class WordStats:
    words: int  # kept in the store
    pending: int  # words waiting in the buffer
    learned_spam: int
    learned_ham: int
    dropped: int  # letters whose words the full buffer could not take
    failures: int  # flushes that failed (their words went back to the buffer)
    last_error: str | None


def merged_table(
    tokens: Sequence[str],
    hashes: Sequence[int],
    shipped: tokens_mod.TokenTable | None,
    learned: Mapping[int, tuple[int, int]],
    totals: tuple[int, int],
    key: bytes = b"",
) -> tokens_mod.TokenTable:
    """The table of one letter's words: shipped counts plus learned ones, over the shipped
    plus learned letters (pure). ``hashes``: the tokens' hashes with ``key``."""
    by_hash = shipped.by_hash(key) if shipped is not None else {}
    counts: dict[str, tuple[int, int]] = {}
    for token, h in zip(tokens, hashes, strict=True):
        a = by_hash.get(h)
        b = learned.get(h)
        if a is None and b is None:
            continue
        s = (a[0] if a else 0) + (b[0] if b else 0)
        m = (a[1] if a else 0) + (b[1] if b else 0)
        if s or m:
            counts[token] = (s, m)
    spam = (shipped.spam_letters if shipped is not None else 0) + totals[0]
    ham = (shipped.ham_letters if shipped is not None else 0) + totals[1]
    return tokens_mod.TokenTable(counts, spam, ham)


def _as_shipped(
    tokens: Sequence[str], hashes: Sequence[int], shipped: tokens_mod.TokenTable, key: bytes
) -> bool:
    """Whether :func:`merged_table` with nothing learned gives each token the shipped table's
    own counts (it reads them by hash: a token whose hash is another shipped token's would
    get that one's). A token neither gives, or gives (0, 0), is no clue in either."""
    by_hash = shipped.by_hash(key)
    counts = shipped.counts
    zero = (0, 0)
    for token, h in zip(tokens, hashes, strict=True):
        if (by_hash.get(h) or zero) != (counts.get(token) or zero):
            return False
    return True


class Words:
    """The learned words in front of a WordStore (see the module's doc). ``shipped``: the
    model's table, read together with the installation's learned one. ``max_words`` bounds
    the installation's table, ``max_words_per_owner`` each account's."""

    def __init__(
        self,
        store: WordStore,
        *,
        shipped: tokens_mod.TokenTable | None = None,
        key: bytes = b"",
        clock: Clock = time.time,
        buffered: bool = True,
        flush_interval: float = 2.0,
        max_pending: int = 500_000,
        max_words: int = 2_000_000,
        max_words_per_owner: int = 50_000,
        prune_interval: float = 600.0,
    ) -> None:
        self.store = store
        self.shipped = shipped
        self.key = key
        self.clock = clock
        self.buffered = buffered
        self.flush_interval = flush_interval
        self.max_pending = max_pending
        self.max_words = max_words
        self.max_words_per_owner = max_words_per_owner
        self.prune_interval = prune_interval
        self._lock = threading.Lock()
        self._round = threading.Lock()  # one flush at a time
        # owner -> word -> [spam, ham]; owner -> [spam, ham] letters
        self._pending: dict[int, dict[int, list[int]]] = {}
        self._letters: dict[int, list[int]] = {}
        self._pending_words = 0  # words in _pending, over all owners
        self._in_flight: dict[int, dict[int, list[int]]] = {}
        self._flight_letters: dict[int, list[int]] = {}
        self._dropped = 0
        self._failures = 0
        self._last_error: str | None = None
        self._flushes = 0  # flushes ended: a read that saw one begin or end reads again
        self._writing = False  # a flush is writing to the store
        self._touched: set[int] = set()  # owners written since the last prune
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_prune = time.monotonic() + prune_interval

    # reading

    def warm(self) -> None:
        """The shipped table keyed by this store's hashes, built now rather than under the
        first letter's time (~18,600 keyed hashes, ~0.07 s; see ``TokenTable.by_hash``; and the
        words' log-odds a learned word moves ``tokens.weights`` from, ``TokenTable.weighed``)."""
        self.use(self.shipped)

    def use(self, shipped: tokens_mod.TokenTable | None) -> None:
        """``shipped`` read from now on (a newly promoted model's table), keyed and its clues
        ranked before it replaces the one read until now, as :meth:`warm` does at start: a
        letter being judged reads the old table or the new one, and none builds the new
        one's under its own time."""
        if shipped is not None:
            shipped.by_hash(self.key)
            shipped.judge(())  # and its clues ranked (what ``judge`` reads)
            _ = shipped.weight_scale  # and what a learned word moves tokens.weights by
        self.shipped = shipped

    def judge(
        self, tokens: Sequence[str], hashes: Sequence[int], shown: int = 0
    ) -> tuple[float, tuple[str, ...]]:
        """``table(tokens, hashes).judge(tokens, shown)``: the score of shipped + learned
        words and the words shown; StorageError when the store does not answer (see
        :meth:`judged`)."""
        score, words, _ = self.judged(tokens, hashes, shown)
        return score, words

    def judged(
        self, tokens: Sequence[str], hashes: Sequence[int], shown: int = 0
    ) -> tuple[float, tuple[str, ...], float | None]:
        """The score of shipped + learned words, the words shown, and ``tokens.weights`` as
        the learned words move it (:meth:`pochta.antispam.tokens.TokenTable.weighed`; None
        when the shipped table has no weights or nothing of these words was learned: the
        shipped weights' score stands); StorageError when the store does not answer. When the
        installation has learned no letter (stored and buffered) and nothing of these words,
        and each of them has the counts the shipped table gives it, the letter's table is
        the shipped one for them (the same counts over the same letters: the same clues, in
        the same order, the same sums): the shipped table judges, its clues ranked once a
        process, and no table is made and ranked for the letter (~half of this step's CPU)."""
        shipped = self.shipped
        cut = list(hashes)[:MAX_HASHES]
        learned, totals = self.learned(INSTALLATION, cut)
        if (
            shipped is not None
            and totals == (0, 0)
            and not learned
            and len(cut) == len(hashes) == len(tokens)
            and _as_shipped(tokens, cut, shipped, self.key)
        ):
            distinct = frozenset(tokens)  # as the analysis judged them: its answer is kept
            score, words = shipped.judge(
                distinct if len(distinct) == len(tokens) else tokens, shown
            )
            return score, words, None
        table = self._merged(tokens, cut, learned, totals, shipped)  # the table read above
        score, words = table.judge(tokens, shown)
        weights = None
        if shipped is not None and learned:
            weights = shipped.weighed(list(tokens)[: len(cut)], table)
        return score, words, weights

    def table(self, tokens: Sequence[str], hashes: Sequence[int]) -> tokens_mod.TokenTable:
        """One letter's table: shipped + the installation's stored + buffered, each learned
        letter counted once; StorageError when the store does not answer."""
        cut = list(hashes)[:MAX_HASHES]
        shipped = self.shipped
        return self._merged(tokens, cut, *self.learned(INSTALLATION, cut), shipped)

    def _merged(
        self,
        tokens: Sequence[str],
        cut: list[int],
        learned: Mapping[int, tuple[int, int]],
        totals: tuple[int, int],
        shipped: tokens_mod.TokenTable | None,
    ) -> tokens_mod.TokenTable:
        """The letter's table from its first hashes (``cut``) and what the store gave for them,
        over ``shipped`` (the table the caller read once: a model switch in between, and the
        column's shipped counts would not be the table's)."""
        return merged_table(list(tokens)[: len(cut)], cut, shipped, learned, totals, self.key)

    def learned(
        self, owner: int, hashes: Sequence[int]
    ) -> tuple[dict[int, tuple[int, int]], tuple[int, int]]:
        """What ``owner`` learned of these words, stored + buffered, and its letters (spam,
        ham): each learned letter counted once (a flush that writes between reading the
        store and the buffers is seen and the read is made again). StorageError."""
        hashes = list(hashes)[:MAX_HASHES]
        for _ in range(3):
            with self._lock:
                seen = self._flushes
            learned = self.store.counts(owner, hashes)
            totals = self.store.totals(owner)
            with self._lock:
                if self._flushes != seen or self._writing:
                    continue
                return self._buffered(owner, hashes, learned, totals)
        with self._round:  # flushes kept coming: read between two of them
            learned = self.store.counts(owner, hashes)
            totals = self.store.totals(owner)
            with self._lock:
                return self._buffered(owner, hashes, learned, totals)

    def all_totals(self) -> dict[int, tuple[int, int]]:
        """Every owner's learned letters (spam, ham), stored + buffered, in one read of the
        store (each learned letter counted once, as :meth:`learned`). StorageError."""
        for _ in range(3):
            with self._lock:
                seen = self._flushes
            stored = self.store.all_totals()
            with self._lock:
                if self._flushes != seen or self._writing:
                    continue
                return self._all_buffered(stored)
        with self._round:
            stored = self.store.all_totals()
            with self._lock:
                return self._all_buffered(stored)

    def _all_buffered(self, stored: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
        """Under ``_lock``: the stored totals plus the letters buffered or being written."""
        out = dict(stored)
        for source in (self._letters, self._flight_letters):
            for owner, (s, h) in source.items():
                a, b = out.get(owner, (0, 0))
                out[owner] = (a + s, b + h)
        return out

    def _buffered(
        self,
        owner: int,
        hashes: list[int],
        learned: dict[int, tuple[int, int]],
        totals: tuple[int, int],
    ) -> tuple[dict[int, tuple[int, int]], tuple[int, int]]:
        """Under ``_lock``: the stored counts plus what is buffered or being written."""
        zero = [0, 0]
        a, b = self._letters.get(owner, zero), self._flight_letters.get(owner, zero)
        letters = (totals[0] + a[0] + b[0], totals[1] + a[1] + b[1])
        bufs = [buf[owner] for buf in (self._pending, self._in_flight) if owner in buf]
        if bufs:
            learned = dict(learned)
            for h in hashes:
                for buf in bufs:
                    d = buf.get(h)
                    if d is not None:
                        s, m = learned.get(h, (0, 0))
                        learned[h] = (max(0, s + d[0]), max(0, m + d[1]))
        return learned, letters

    def hashes(self, tokens: Iterable[str]) -> tuple[int, ...]:
        """The tokens' hashes with this table's key."""
        return tokens_mod.hashed(tokens, self.key)[1]

    # writing

    def learn(
        self, hashes: Iterable[int], kind: Kind, weight: int = 1, owner: int = INSTALLATION
    ) -> bool:
        """Count one letter's words as ``weight`` letters of ``kind`` in ``owner``'s table
        (buffered; returns at once). False when the buffer is full and the letter's words
        were dropped."""
        if kind not in ("spam", "ham"):
            raise ValueError(f"unknown kind {kind!r}")
        col = 0 if kind == "spam" else 1
        words = list(dict.fromkeys(hashes))[:MAX_HASHES]
        with self._lock:
            if self._pending_words + len(words) > self.max_pending:
                self._dropped += 1
                log.warning("learned words: the buffer is full; one letter's words dropped")
                return False
            table = self._pending.setdefault(owner, {})
            for h in words:
                d = table.get(h)
                if d is None:
                    d = table[h] = [0, 0]
                    self._pending_words += 1
                d[col] += weight
            self._letters.setdefault(owner, [0, 0])[col] += weight
        if not self.buffered:
            self.flush()
        return True

    def flush(self) -> None:
        """Write what is buffered, one atomic step per owner (StorageError: what was not
        written stays buffered)."""
        with self._round:
            with self._lock:
                if not self._pending and not self._letters:
                    return
                self._in_flight, self._pending = self._pending, {}
                self._flight_letters, self._letters = self._letters, {}
                self._pending_words = 0
                self._writing = True
            day = int(self.clock() // DAY)
            owners = sorted(set(self._in_flight) | set(self._flight_letters))
            error: StorageError | None = None
            for owner in owners:
                batch = {h: (d[0], d[1]) for h, d in self._in_flight.get(owner, {}).items()}
                fl = self._flight_letters.get(owner, [0, 0])
                try:
                    self.store.add(owner, batch, (fl[0], fl[1]), day)
                except StorageError as exc:
                    error = exc
                    continue
                with self._lock:  # written: no longer in flight
                    self._in_flight.pop(owner, None)
                    self._flight_letters.pop(owner, None)
                    self._touched.add(owner)
            with self._lock:  # what failed goes back into the buffer, added to what came
                for owner, table in self._in_flight.items():
                    into = self._pending.setdefault(owner, {})
                    for h, d in table.items():
                        e = into.get(h)
                        if e is None:
                            e = into[h] = [0, 0]
                            self._pending_words += 1
                        e[0] += d[0]
                        e[1] += d[1]
                for owner, fl in self._flight_letters.items():
                    e = self._letters.setdefault(owner, [0, 0])
                    e[0] += fl[0]
                    e[1] += fl[1]
                self._in_flight, self._flight_letters = {}, {}
                if error is not None:
                    self._failures += 1
                    self._last_error = str(error)
                self._writing = False
                self._flushes += 1
            if error is not None:
                raise error
            if time.monotonic() >= self._next_prune:
                self._next_prune = time.monotonic() + self.prune_interval
                self.prune()

    def prune(self) -> int:
        """Keep at most ``max_words`` words of the installation and ``max_words_per_owner``
        of each account written to since the last prune (the flusher calls it every
        ``prune_interval``)."""
        with self._lock:
            owners, self._touched = sorted(self._touched | {INSTALLATION}), set()
        dropped = 0
        for owner in owners:
            keep = self.max_words if owner == INSTALLATION else self.max_words_per_owner
            if self.store.size(owner) > keep:
                n = self.store.prune(owner, keep)
                dropped += n
                log.info(
                    "learned words: %d of owner %d's words learned longest ago dropped", n, owner
                )
        return dropped

    def forget(self, owner: int) -> None:
        """Drop what ``owner`` learned, buffered and stored (StorageError)."""
        if owner == INSTALLATION:
            raise ValueError("the installation's words are cleared, not forgotten")
        with self._round:
            with self._lock:
                table = self._pending.pop(owner, {})
                self._pending_words -= len(table)
                self._letters.pop(owner, None)
            self.store.forget(owner)

    def clear(self) -> None:
        """Drop the installation's learned words, buffered and stored (StorageError)."""
        with self._round:
            with self._lock:
                table = self._pending.pop(INSTALLATION, {})
                self._pending_words -= len(table)
                self._letters.pop(INSTALLATION, None)
            self.store.forget(INSTALLATION)

    def totals(self, owner: int) -> tuple[int, int]:
        """The letters ``owner`` learned as (spam, ham), stored + buffered (StorageError)."""
        return self.learned(owner, [])[1]

    def stats(self, owner: int = INSTALLATION) -> WordStats:
        spam, ham = self.store.totals(owner)
        with self._lock:
            letters = self._letters.get(owner, [0, 0])
            pending = len(self._pending.get(owner, {})) + len(self._in_flight.get(owner, {}))
            return WordStats(
                self.store.size(owner), pending, spam + letters[0], ham + letters[1],
                self._dropped, self._failures, self._last_error,
            )  # fmt: skip

    # the flusher

    def start(self) -> None:
        """Start the background flusher (once; an unbuffered table has none)."""
        if self._thread is not None or not self.buffered:
            return
        self._thread = threading.Thread(target=self._run, name="pochta-words", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        backoff = self.flush_interval
        while not self._stop.wait(backoff):
            try:
                self.flush()
                backoff = self.flush_interval
            except StorageError as exc:
                log.warning("learned words: flush failed, kept to retry: %s", exc)
                backoff = min(60.0, backoff * 2)
            except Exception:
                log.exception("learned words: flush failed, kept to retry")
                backoff = min(60.0, backoff * 2)

    def close(self) -> None:
        """Stop the flusher, write what is buffered, close the store."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        try:
            self.flush()
        except StorageError as exc:
            log.warning("learned words: %d words lost at close: %s", self._pending_words, exc)
        self.store.close()
