"""Time buckets of the shingle counters: pure arithmetic, no I/O, time passed in.

Every increment lands in two buckets: the 10-minute one of its time (kept 24 hours) and the
day one (kept 14 days). Bucket numbers count from the Unix epoch, as in seed 002: 10-minute
period 2 831 519 starts 2023-11-02 07:50 UTC, day 19 663 is 2023-11-02.

A window covers whole buckets: the current (partial) one and the ones before it, of the finest
kind that reaches back far enough. Up to 24 hours that is ``ceil(seconds / 600)`` 10-minute
buckets (``1h`` = this one and the 5 before it); beyond, ``ceil(seconds / 86400)`` day buckets
(``14d`` = today and the 13 days before). So ``1h`` at 12:34 counts from 11:40, and ``24h``
counts the last 143 full 10-minute periods and the current one.

Keys (the seed's ``<prefix>_<shingle hex>_<type>_<period>_<period number>``, with the shard's
Redis hash tag in the prefix so that every bucket of a shingle lives on one slot): one hash per
(shingle, type) and day holds the day's totals and its 10-minute buckets:

    sh{1a3}_5791f8cac2b7d8dd_14_1d_19663      fields: "s47" = spam in the day's 10-minute
                                              bucket 47, i.e. 10-minute period
                                              19663*144+47 = 2831519; the day bucket is the
                                              sum of the day's fields ("s" = the day's value
                                              kept apart for paired and unique shingles)

One key per shingle and day, not one per bucket: a 24-hour window reads two keys, a 14-day
one fourteen, and a shingle seen once costs one key. The key expires 14 days after its day
(its 10-minute fields, read only for 24 hours, go with it).

The shard is the low 10 bits of the shingle's hash, or for a paired shingle of its unique's
hash (seed 002: the pair lives on the unique's shard, so the "was it zero?" check is local).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pochta.errors import InvalidInput

SLOT = 600
"""Seconds in a 10-minute bucket."""
DAY = 86_400
SLOTS_PER_DAY = DAY // SLOT  # 144
KEEP_SLOTS = SLOTS_PER_DAY
"""10-minute buckets a window can reach: the last 24 hours."""
KEEP_DAYS = 14
"""Day buckets a window can reach: today and the 13 days before."""
SHARDS = 1024
"""Logical shards: the Redis hash tag of a shingle's keys, and the unit of write batching."""
DAY_KEY_DAYS = KEEP_DAYS
"""A day key lives until the end of its 13th day after (the last day a 14d window reaches it)."""
MAX_VALUE = (1 << 63) - 1
"""Counters are signed 64-bit and saturate there (seed 002: 2^63 "will hardly overflow")."""
EXPIRY_MARGIN = 3600
"""Seconds a key outlives the last window that can reach it (clock skew between hosts)."""

KINDS: dict[str, str] = {
    "ham": "h",  # delivered with verdict ham
    "spam": "s",  # delivered with verdict spam
    "complaint": "c",  # a user said "this is spam"
    "unspam": "u",  # a user said "not spam"
    "read": "r",  # a user opened it
}
"""Counter kinds and their one-letter codes in the store. Stable: append, never reuse a code."""
KIND_NAMES: dict[str, str] = {code: name for name, code in KINDS.items()}


def kind_code(kind: str) -> str:
    try:
        return KINDS[kind]
    except KeyError:
        raise InvalidInput(f"unknown counter kind {kind!r}; known: {', '.join(KINDS)}") from None


def slot_of(t: float) -> int:
    """The 10-minute bucket of a time (seconds since the epoch)."""
    return math.floor(t / SLOT)


def day_of(t: float) -> int:
    return math.floor(t / DAY)


def day_of_slot(slot: int) -> int:
    return slot // SLOTS_PER_DAY


def shard_of(shingle_hash: int) -> int:
    return shingle_hash & (SHARDS - 1)


def tag(shard: int) -> str:
    """The Redis hash tag of a shard: three hex digits."""
    return f"{shard:03x}"


def stem(prefix: str, shard: int, shingle_hash: int, shingle_type: int) -> str:
    """What every key of one (shingle, type) starts with: ``<prefix>{<tag>}_<hex>_<type>``."""
    return f"{prefix}{{{shard:03x}}}_{shingle_hash:016x}_{shingle_type}"


def day_key(stem_: str, day: int) -> str:
    return f"{stem_}_1d_{day}"


def day_key_expiry(day: int) -> int:
    return (day + DAY_KEY_DAYS) * DAY + EXPIRY_MARGIN


# -- windows --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Window:
    """``count`` buckets of ``unit`` ("10m" or "1d") ending with the current one."""

    name: str
    unit: str
    count: int


_WINDOW = re.compile(r"(\d+)\s*([smhd]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": DAY}


def parse_window(text: str) -> Window:
    """``10m``, ``1h``, ``24h``, ``14d``, ``90m``, ``3600`` (seconds): at least one 10-minute
    bucket, at most 14 days. InvalidInput otherwise."""
    m = _WINDOW.fullmatch(text.strip().lower())
    if m is None:
        raise InvalidInput(f"window {text!r}: expected a number with s, m, h or d (e.g. 24h)")
    seconds = int(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    if seconds <= 0 or seconds > KEEP_DAYS * DAY:
        raise InvalidInput(f"window {text!r}: must be more than 0 and at most {KEEP_DAYS}d")
    if seconds <= DAY:
        return Window(text.strip(), "10m", math.ceil(seconds / SLOT))
    return Window(text.strip(), "1d", math.ceil(seconds / DAY))


DEFAULT_WINDOWS = ("1h", "24h", "14d")


@dataclass(frozen=True, slots=True)
class Span:
    """Which buckets a query reads: slots ``slot_from..slot_to`` and days ``day_from..day_to``
    (inclusive; empty when from > to)."""

    slot_from: int
    slot_to: int
    day_from: int
    day_to: int

    @property
    def slot_days(self) -> range:
        """The days the slots belong to."""
        if self.slot_from > self.slot_to:
            return range(0)
        return range(day_of_slot(self.slot_from), day_of_slot(self.slot_to) + 1)

    @property
    def days(self) -> range:
        return range(self.day_from, self.day_to + 1)


def span(windows: Iterable[Window], now: float) -> Span:
    slot, day = slot_of(now), day_of(now)
    slots = max((w.count for w in windows if w.unit == "10m"), default=0)
    days = max((w.count for w in windows if w.unit == "1d"), default=0)
    return Span(slot - slots + 1, slot, day - days + 1, day)


# -- the buckets of one (shingle, type) -------------------------------------------------------
@dataclass(slots=True)
class Buckets:
    """The values of one (shingle, type): (kind code, slot) -> n and (kind code, day) -> n."""

    slots: dict[tuple[str, int], int] = field(default_factory=dict)
    days: dict[tuple[str, int], int] = field(default_factory=dict)

    def add_slot(self, code: str, slot: int, n: int) -> None:
        """An increment seen through its 10-minute bucket: counts in its day too."""
        key = (code, slot)
        self.slots[key] = self.slots.get(key, 0) + n
        dkey = (code, slot // SLOTS_PER_DAY)
        self.days[dkey] = self.days.get(dkey, 0) + n

    def merge(self, other: Buckets) -> None:
        for k, n in other.slots.items():
            self.slots[k] = self.slots.get(k, 0) + n
        for k, n in other.days.items():
            self.days[k] = self.days.get(k, 0) + n

    def copy(self) -> Buckets:
        return Buckets(dict(self.slots), dict(self.days))

    def __bool__(self) -> bool:
        return bool(self.slots or self.days)


Counts = dict[str, int]
"""Kind name -> value (every known kind present, 0 when never counted)."""


def _summed(values: dict[tuple[str, int], int], first: int, last: int) -> Counts:
    """Each kind's sum over the buckets ``first``..``last`` of ``values`` (saturating)."""
    out = dict.fromkeys(KINDS, 0)
    names = KIND_NAMES
    for (code, number), n in values.items():
        if first <= number <= last:
            name = names.get(code)
            if name is not None:
                out[name] += n
    if max(out.values()) > MAX_VALUE:
        return {k: min(v, MAX_VALUE) for k, v in out.items()}
    return out


def window_sum(buckets: Buckets, window: Window, now: float) -> Counts:
    """The sum of each kind over the window's buckets (saturating at MAX_VALUE)."""
    values = buckets.slots if window.unit == "10m" else buckets.days
    if not values:
        return dict.fromkeys(KINDS, 0)
    last = slot_of(now) if window.unit == "10m" else day_of(now)
    return _summed(values, last - window.count + 1, last)


def window_sums(buckets: Buckets, windows: Sequence[Window], now: float) -> dict[str, Counts]:
    """``{w.name: window_sum(buckets, w, now) for w in windows}`` (a later window of the same
    name wins) with the current bucket numbers found once: what a verdict asks of every
    shingle of every letter."""
    result: dict[str, Counts] = {}
    slots, days = buckets.slots, buckets.days
    if not slots and not days:
        for w in windows:
            result[w.name] = dict.fromkeys(KINDS, 0)
        return result
    last_slot, last_day = slot_of(now), day_of(now)
    for w in windows:
        values, last = (slots, last_slot) if w.unit == "10m" else (days, last_day)
        result[w.name] = _summed(values, last - w.count + 1, last)
    return result


Flat = tuple[int, ...]
"""A shingle's sums as plain ints: for each window in turn, each kind of :data:`KINDS` in its
order (``len(windows) * len(KINDS)`` values). What the verdict reads of every shingle of every
letter, with no dict per window (:func:`flat_sums`)."""

_ZEROS: dict[int, Flat] = {}


def zeros(windows: int) -> Flat:
    """The flat sums of a shingle nobody counted: one shared tuple per number of windows (a
    caller may tell it by identity)."""
    z = _ZEROS.get(windows)
    if z is None:
        z = _ZEROS.setdefault(windows, (0,) * (windows * len(KINDS)))
    return z


def flat_sums(buckets: Buckets | None, windows: Sequence[Window], now: float) -> Flat:
    """``window_sums`` as one tuple: each window's sums in the windows' order (a window named
    like an earlier one is still its own), each window's kinds in :data:`KINDS`' order;
    :func:`zeros` (the shared tuple) when ``buckets`` is empty or None."""
    if buckets is None or (not buckets.slots and not buckets.days):
        return zeros(len(windows))
    slots, days = buckets.slots, buckets.days
    last_slot, last_day = slot_of(now), day_of(now)
    out: list[int] = []
    for w in windows:
        values, last = (slots, last_slot) if w.unit == "10m" else (days, last_day)
        if values:
            out.extend(_summed(values, last - w.count + 1, last).values())
        else:
            out.extend(zeros(1))
    return tuple(out)


def trim(buckets: Buckets, sp: Span) -> Buckets:
    """Only the buckets inside the span (what a store returns)."""
    return Buckets(
        {k: n for k, n in buckets.slots.items() if sp.slot_from <= k[1] <= sp.slot_to},
        {k: n for k, n in buckets.days.items() if sp.day_from <= k[1] <= sp.day_to},
    )


def expired_before(now: float) -> tuple[int, int]:
    """(first slot, first day) still reachable by a window at ``now``: older buckets can go."""
    return slot_of(now) - KEEP_SLOTS + 1, day_of(now) - KEEP_DAYS + 1
