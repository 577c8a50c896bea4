"""One contract for every shingle counter store: in-memory, SQLite, Redis, Redis Cluster.

Each test runs against each backend with the same assertions: through the ``CounterStore``
protocol directly, and through the ``Counters`` service (buffer, flusher, read cache) in front
of it. The Redis backends use the real servers of ``tests/servers.py``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from pochta.antispam.shingles.counters import Cell, CounterStore, Ref
from pochta.antispam.shingles.counters.buckets import (
    DAY,
    KINDS,
    SHARDS,
    SLOT,
    parse_window,
    slot_of,
    span,
    window_sum,
)
from pochta.antispam.shingles.counters.memory import MemoryStore
from pochta.antispam.shingles.counters.redis import RedisStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.counters.sqlite import SQLiteStore

STORE_KINDS = [
    "memory",
    "sqlite",
    pytest.param("redis", marks=pytest.mark.integration),
    pytest.param("redis-cluster", marks=pytest.mark.integration),
]

# Redis expires keys on its own clock (EXPIREAT, 14 days after a key's day), so the tests'
# dates are near the real one: today (UTC; a time later today is fine, an older day would let
# keys written 13 days before it expire already). Only the date comes from the real clock; the
# time of day is fixed, so every run sees the same bucket and day boundaries.
DAY0 = float((int(time.time()) // DAY) * DAY)
NOW = DAY0 + 12 * 3600 + 5 * 60  # 12:05 UTC, in the middle of its 10-minute bucket
TIMES_OF_DAY = [
    pytest.param(0, id="00:00"),
    pytest.param(300, id="00:05"),
    pytest.param(3 * 3600 + 300, id="03:05"),
    pytest.param(12 * 3600 + 300, id="12:05"),
    pytest.param(18 * 3600 + 1799, id="18:29:59"),
    pytest.param(DAY - 600, id="23:50"),
    pytest.param(DAY - 1, id="23:59:59"),
]
"""When the brute-force run ends: just before and just after midnight among them."""
ALL = [parse_window(w) for w in ("10m", "1h", "24h", "2d", "14d")]


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CounterStore]:
    kind = request.param
    s: CounterStore
    if kind == "memory":
        s = MemoryStore()
    elif kind == "sqlite":
        s = SQLiteStore(tmp_path / "counters.sqlite3")
    elif kind == "redis":
        client: redis.Redis = request.getfixturevalue("redis_client")
        s = RedisStore(client, prefix="t")
    elif kind == "redis-cluster":
        cluster: redis.RedisCluster = request.getfixturevalue("redis_cluster_client")
        s = RedisStore(cluster, prefix="t")
    else:
        raise ValueError(kind)
    yield s
    s.close()


def cell(ref: Ref, code: str, t: float, n: int = 1) -> Cell:
    return (ref.type, ref.hash, code, slot_of(t), n, None if ref.unique is None else ref.unique.id)


def apply(store: CounterStore, *cells_: Cell, refs: list[Ref] | None = None) -> None:
    """Group cells into per-shard batches and apply them; every batch must succeed."""
    shard_of_cell = {}
    for r in refs or []:
        shard_of_cell[r.id] = r.shard
    by_shard: dict[int, list[Cell]] = {}
    for c in cells_:
        shard = shard_of_cell.get((c[0], c[1]), Ref(c[0], c[1]).shard)
        by_shard.setdefault(shard, []).append(c)
    assert store.apply(list(by_shard.items())) == [None] * len(by_shard)


def sums(store: CounterStore, refs: list[Ref], now: float = NOW) -> list[dict[str, dict[str, int]]]:
    buckets = store.read(refs, span(ALL, now))
    return [{w.name: window_sum(b, w, now) for w in ALL} for b in buckets]


# -- the store protocol -----------------------------------------------------------------------
def test_unknown_shingles_read_as_zero(store: CounterStore) -> None:
    got = sums(store, [Ref(8, 1), Ref(30, 2, Ref(31, 3))])
    assert all(v == 0 for r in got for w in r.values() for v in w.values())


def test_a_read_of_many_refs_equals_each_read_alone(store: CounterStore) -> None:
    """One read of many shingles (as a letter's, with a unique's pairs), among them one hash
    under two types and a ref asked twice, gives each what a read of it alone gives; each
    ref its own buckets, so changing one changes no other."""
    same = 0xFEDCBA9876543210
    refs = [Ref(8, same), Ref(14, same), Ref(10, 5), Ref(21, 2**64 - 1), Ref(22, 7)]
    unique = Ref(31, 0x77)
    pairs = [Ref(30, 0x7700 + i, unique) for i in range(40)]
    apply(
        store,
        cell(refs[0], "s", NOW, 3),
        cell(refs[1], "h", NOW - 3 * DAY, 2),
        cell(refs[2], "s", NOW - 30 * 60),
        cell(refs[3], "c", NOW - 25 * 3600, 4),
        *(cell(p, "h", NOW - i * 600) for i, p in enumerate(pairs[::2])),
        refs=pairs,
    )
    asked = [*refs, *pairs, refs[0], Ref(8, 0x99)]
    together = store.read(asked, span(ALL, NOW))
    alone = [store.read([r], span(ALL, NOW))[0] for r in asked]
    assert together == alone
    assert together[0] == together[len(refs) + len(pairs)] and together[0] is not together[-2]
    together[0].add_slot("s", slot_of(NOW), 1)
    assert together[len(refs) + len(pairs)] == alone[0]


def test_increments_land_in_their_buckets_and_windows(store: CounterStore) -> None:
    a, b = Ref(8, 0x0123456789ABCDEF), Ref(14, 2**64 - 1)
    apply(
        store,
        cell(a, "s", NOW, 2),
        cell(a, "s", NOW - 30 * 60),  # half an hour ago: in 1h
        cell(a, "s", NOW - 5 * 3600),  # in 24h, not in 1h
        cell(a, "h", NOW - 3 * DAY),  # in 14d only
        cell(a, "h", NOW - 20 * DAY),  # in no window
        cell(b, "c", NOW, 7),
        cell(b, "r", NOW - 25 * 3600),  # yesterday or the day before: in 2d
    )
    got_a, got_b = sums(store, [a, b])
    assert got_a["10m"]["spam"] == 2
    assert got_a["1h"]["spam"] == 3
    assert got_a["24h"]["spam"] == 4
    assert got_a["14d"] == {"ham": 1, "spam": 4, "complaint": 0, "unspam": 0, "read": 0}
    assert got_b["24h"]["complaint"] == 7
    assert got_b["2d"]["read"] == 1
    assert got_b["14d"]["read"] == 1


def test_values_are_64_bit_and_saturate(store: CounterStore) -> None:
    a, b = Ref(8, 5), Ref(8, 6)
    apply(store, cell(a, "s", NOW, 2**62), cell(a, "s", NOW, 2**62 - 1), cell(b, "s", NOW, 3))
    assert sums(store, [a])[0]["10m"]["spam"] == 2**63 - 1
    apply(store, cell(a, "s", NOW, 2**62), cell(b, "s", NOW, 4))  # the batch still goes in
    got_a, got_b = sums(store, [a, b])
    assert got_a["10m"]["spam"] == got_a["14d"]["spam"] == 2**63 - 1
    assert got_b["10m"]["spam"] == 7


def test_a_pair_counts_its_unique_once_per_bucket(store: CounterStore) -> None:
    sender = Ref(31, 0xABC)
    to = [Ref(30, 0x1000 + i, sender) for i in range(4)]
    apply(
        store,
        cell(to[0], "h", NOW),
        cell(to[0], "h", NOW),  # the same pair again: no new unique
        cell(to[1], "h", NOW, 3),
        cell(to[2], "s", NOW),  # another kind counts apart
        refs=to,
    )
    apply(store, cell(to[0], "h", NOW), cell(to[3], "h", NOW), refs=to)
    got = sums(store, [sender, *to])
    assert got[0]["24h"] == {"ham": 3, "spam": 1, "complaint": 0, "unspam": 0, "read": 0}
    assert got[0]["14d"]["ham"] == 3
    assert [g["24h"]["ham"] for g in got[1:]] == [3, 3, 0, 1]
    # later the same day, in another 10-minute bucket: distinct per bucket, and per day
    later = NOW + 1200 if (NOW + 1200) // DAY == NOW // DAY else NOW - 1200
    apply(store, cell(to[0], "h", later), cell(to[1], "h", later), refs=to)
    got = sums(store, [sender], now=max(NOW, later))
    assert got[0]["14d"]["ham"] == 3  # the day's unique counter: still 3 distinct pairs
    assert got[0]["24h"]["ham"] == 5  # 10-minute buckets: 3 + 2


def test_pair_and_unique_keys_live_on_the_uniques_shard(store: CounterStore) -> None:
    sender = Ref(31, 5)
    pairs = [Ref(30, h, sender) for h in range(SHARDS + 1, SHARDS + 40)]
    assert len({p.shard for p in pairs}) == 1
    assert {Ref(30, p.hash).shard for p in pairs} != {sender.shard}
    apply(store, *(cell(p, "u", NOW) for p in pairs), refs=pairs)
    assert sums(store, [sender])[0]["24h"]["unspam"] == len(pairs)


def test_many_shards_in_one_apply(store: CounterStore) -> None:
    rng = random.Random(7)
    refs = [Ref(rng.choice([8, 14, 15, 22]), rng.getrandbits(64)) for _ in range(600)]
    expected = {r.id: rng.randint(1, 1000) for r in refs}
    apply(store, *(cell(r, "s", NOW, expected[r.id]) for r in refs))
    got = sums(store, refs)
    assert [g["24h"]["spam"] for g in got] == [expected[r.id] for r in refs]
    assert len({r.shard for r in refs}) > 300


def test_a_day_boundary_is_crossed_by_24h(store: CounterStore) -> None:
    midnight = (NOW // DAY) * DAY
    a = Ref(8, 77)
    apply(store, cell(a, "r", midnight - 600), cell(a, "r", midnight + 60))
    got = sums(store, [a], now=midnight + 3000)[0]  # 1h: the 00:00 to 00:50 buckets
    assert got["24h"]["read"] == 2
    assert got["1h"]["read"] == 1
    assert got["14d"]["read"] == 2


def test_expiry_never_removes_what_a_window_reaches(store: CounterStore) -> None:
    a = Ref(8, 99)
    apply(store, cell(a, "h", NOW - 13 * DAY), cell(a, "h", NOW - 23 * 3600), cell(a, "h", NOW))
    store.expire(NOW)
    got = sums(store, [a])[0]
    assert (got["24h"]["ham"], got["14d"]["ham"]) == (2, 3)


# -- the service in front of each store -------------------------------------------------------
@pytest.mark.parametrize("time_of_day", TIMES_OF_DAY)
def test_service_matches_a_brute_force_model(store: CounterStore, time_of_day: int) -> None:
    """A seeded random run of letters over 3 days, with flushes, queries and pairs, ending at
    a fixed time of day. Buffered pairs are queried before the last flush: a unique counts a
    buffered pair once per bucket, and not at all where the store already has it."""
    end = DAY0 + time_of_day
    rng = random.Random(2024)
    clock = Clock()
    clock.now = end - 2 * DAY
    counters = Counters(store, clock=clock, flush_interval=3600, cache_ttl=3600)
    senders = [Ref(31, rng.getrandbits(64)) for _ in range(3)]
    plain = [Ref(t, rng.getrandbits(64)) for t in (8, 14, 15, 22, 62) for _ in range(3)]
    events: list[tuple[float, Ref, str, int]] = []
    firsts: set[tuple[int, str, int]] = set()  # (pair hash, code, day) seen
    first_slots: set[tuple[int, str, int]] = set()
    unique_events: list[tuple[float, Ref, str]] = []
    for step in range(300):
        clock.now += rng.choice([1, 30, 600, 1800])
        kind = rng.choice(list(KINDS))
        n = rng.randint(1, 5)
        refs = rng.sample(plain, 4)
        sender = rng.choice(senders)
        pair = Ref(30, sender.hash ^ rng.randrange(4), sender)
        counters.update([*refs, pair], kind, n)
        for r in [*refs, pair]:
            events.append((clock.now, r, kind, n))
        code, slot = KINDS[kind], slot_of(clock.now)
        if (pair.hash, code, slot // 144) not in firsts:
            firsts.add((pair.hash, code, slot // 144))
            unique_events.append((clock.now, sender, "day:" + kind))
        if (pair.hash, code, slot) not in first_slots:
            first_slots.add((pair.hash, code, slot))
            unique_events.append((clock.now, sender, "slot:" + kind))
        if step % 37 == 0:
            counters.flush()
        if clock.now > end:
            break
    everyone = [*plain, *senders]
    queried = counters.query(everyone, ALL)
    counters.flush()
    fresh = Counters(store, clock=clock, buffered=False, cache_size=0)
    stored = fresh.query(everyone, ALL)
    now = clock.now
    for ref, got, again in zip(everyone, queried, stored, strict=True):
        assert got == again, ref
        for w in ALL:
            size = SLOT if w.unit == "10m" else DAY
            start = (now // size + 1 - w.count) * size
            want = dict.fromkeys(KINDS, 0)
            if ref.type == 31:
                tag = "slot:" if w.unit == "10m" else "day:"
                for t, r, label in unique_events:
                    if r == ref and t >= start and label.startswith(tag):
                        want[label.removeprefix(tag)] += 1
            else:
                for t, r, kind, n in events:
                    if r == ref and t >= start:
                        want[kind] += n
            assert got[w.name] == want, (ref, w)
    counters.close()
