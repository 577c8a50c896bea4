"""Counters on Redis 7.0+ (one server, Sentinel, Cluster; through ``pochta.redisconn``): Lua
scripts, one hash tag per shard.

Layout (see ``buckets``): per (shingle, type) and day, one hash
``sh{1a3}_<hex>_<type>_1d_<day>`` with the day totals (fields = kind codes) and the day's
10-minute buckets (fields = code + offset). It expires by itself (EXPIREAT, set when it gets
its first value) 14 days after its day. Every key of a shingle carries its shard's hash tag
``{1a3}`` and so lives on one slot; a paired shingle carries its unique's tag, so the pair's
"was it zero?" and the unique's +1 run in one script on one node.

Calls are grouped by node: one ``APPLY`` call carries the batches of many shards of that node
(each call is atomic, so each shard's batch is), one ``READ`` call reads the buckets of every
queried shingle on that node. Both scripts use the ``allow-cross-slot-keys`` flag (Redis 7.0)
and name their keys in ARGV: a Cluster node runs them only over slots it serves, and a slot
that moved away (resharding, failover) fails the call before anything is written; the store
then refreshes its map of the cluster and the service retries the batch later.

Failover: Redis replicates asynchronously, so increments a master acknowledged just before it
died and had not yet sent to its replica are lost with it. A reply lost on the way back makes
the service write that batch again (at least once).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import redis
from redis.crc import key_slot
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pochta.antispam.shingles.counters import Batch, Ref
from pochta.antispam.shingles.counters.buckets import (
    DAY,
    DAY_KEY_DAYS,
    EXPIRY_MARGIN,
    MAX_VALUE,
    SHARDS,
    SLOTS_PER_DAY,
    Buckets,
    Span,
    stem,
    tag,
)
from pochta.errors import ConfigError, StorageError
from pochta.redisconn import Call, Nodes, Script, SyncClient

CALL_CELLS = 4096
"""Cells per APPLY call at most (a call blocks its node while it runs: ~1-2 ms)."""
READ_PAUSE = 0.5
"""Seconds that reads fail at once after a read found Redis unavailable (from its first failed
try on); then one reader at a time tries once (the others still fail at once) until one
succeeds. A master that hangs (stopped, cut off: its packets dropped) costs one letter one
``[redis] timeout`` (a timed-out try is not repeated), not every letter the timeout of every
try (up to 4 tries, and a refresh of the map, per letter)."""


class RedisStore:
    APPLY = Script(
        """#!lua flags=allow-cross-slot-keys
-- Add batches of increments.
-- KEYS[1]: the tag key of the call's first shard (a moved slot answers MOVED before running)
-- ARGV[1]: the tag keys of every shard in the call, space-separated: touched before any
--          write, so a slot this node no longer serves fails the call with nothing written
-- ARGV[2]: seconds a day key lives past its day's start
-- ARGV[3]: plain cells, one per line: "<stem> <day> <kind code> <slot offset> <n>"; only
--          the 10-minute field is kept (the day's value is their sum: one write per cell)
-- ARGV[4]: paired cells: "<stem> <day> <kind code> <slot offset> <n> <unique's stem>"; the
--          pair keeps a day field too (was it zero today?), and so does the unique (distinct
--          pairs per day, which is not the sum of distinct pairs per 10 minutes)
-- returns: the number of cells added (values saturate at 2^63-1)
local life = tonumber(ARGV[2])
-- HINCRBY, saturating at 2^63-1 (an overflow would stop the script halfway); -1 if saturated
local function add(key, field, n)
  local v = redis.pcall('HINCRBY', key, field, n)
  if type(v) == 'table' and v.err then
    redis.call('HSET', key, field, '9223372036854775807')
    return -1
  end
  return v
end
for t in string.gmatch(ARGV[1], '%S+') do redis.call('EXISTS', t) end
local count = 0
for st, day, code, off, n in string.gmatch(ARGV[3], '(%S+) (%d+) (%a+) (%d+) (%d+)') do
  local k = st .. '_1d_' .. day
  if add(k, code .. off, n) == tonumber(n) then redis.call('EXPIREAT', k, day * 86400 + life) end
  count = count + 1
end
for st, day, code, off, n, ust in
    string.gmatch(ARGV[4], '(%S+) (%d+) (%a+) (%d+) (%d+) (%S+)') do
  local k, uk, inc = st .. '_1d_' .. day, ust .. '_1d_' .. day, tonumber(n)
  local f = code .. off
  local s = add(k, f, n)
  local d = add(k, code, n)
  if d == inc then
    redis.call('EXPIREAT', k, day * 86400 + life)
    if add(uk, code, 1) == 1 then redis.call('EXPIREAT', uk, day * 86400 + life) end
  end
  if s == inc then add(uk, f, 1) end
  count = count + 1
end
return count
"""
    )

    READ = Script(
        """#!lua flags=no-writes,allow-cross-slot-keys
-- Read the day keys of shingles that live on this node.
-- KEYS: none (the keys are built from ARGV; every one must be on this node)
-- ARGV[1], ARGV[2]: first and last day to read
-- ARGV[3]: stems, "<prefix>{<tag>}_<hex>_<type>", space-separated
-- returns: one line per non-empty key, "\\n"-joined: "<stem index> <day> <field> <n> ..."
local d1, d2 = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
local i = 0
for st in string.gmatch(ARGV[3], '%S+') do
  i = i + 1
  for day = d1, d2 do
    local h = redis.call('HGETALL', st .. '_1d_' .. day)
    if #h > 0 then out[#out + 1] = i .. ' ' .. day .. ' ' .. table.concat(h, ' ') end
  end
end
return table.concat(out, '\\n')
"""
    )

    def __init__(self, client: SyncClient, *, prefix: str = "sh", retries: int = 3) -> None:
        if not prefix or any(c in prefix for c in " {}\n"):
            raise ConfigError(f"shingle key prefix {prefix!r}: no spaces or braces")
        self.client = client
        self.nodes = Nodes(client)
        self.prefix = prefix
        self.retries = retries
        self._tags = [f"{prefix}{{{tag(s)}}}" for s in range(SHARDS)]
        self._slots = [key_slot(tag(s).encode()) for s in range(SHARDS)]
        self._life = str(DAY_KEY_DAYS * DAY + EXPIRY_MARGIN)
        self._read_lock = threading.Lock()
        self._failing = False  # the last read found Redis unavailable
        self._probing = False  # a reader is trying it again
        self._paused_until = 0.0  # monotonic: reads fail at once until then

    def _nodes(self, shards: Sequence[int]) -> list[tuple[redis.Redis, list[int]]]:
        """The node client serving each shard, grouped: (client, shards)."""
        return [
            (node, [shards[i] for i in where])
            for node, where in self.nodes.nodes([self._slots[s] for s in shards])
        ]

    # -- writes ---------------------------------------------------------------------------
    def apply(self, batches: Sequence[Batch]) -> list[Exception | None]:
        prefix = self.prefix
        packed: dict[int, tuple[int, str, str]] = {}
        per_day = SLOTS_PER_DAY
        for i, (shard, cells) in enumerate(batches):
            head = f"{prefix}{{{shard:03x}}}_"  # every stem of the shard starts so
            plain = []
            pairs = []
            for t, h, code, slot, n, u in cells:
                day = slot // per_day
                if u is None:
                    plain.append(f"{head}{h:016x}_{t} {day} {code} {slot - day * per_day} {n}")
                else:
                    pairs.append(
                        f"{head}{h:016x}_{t} {day} {code} {slot - day * per_day} {n}"
                        f" {head}{u[1]:016x}_{u[0]}"
                    )
            packed[i] = (shard, "\n".join(plain), "\n".join(pairs))
        results: list[Exception | None] = [None] * len(batches)
        if not batches:
            return results
        try:
            by_node = self._nodes(sorted({shard for shard, _ in batches}))
        except Exception as exc:
            self.nodes.refresh()
            err = StorageError(f"shingle counters: Redis cluster map unavailable: {exc}")
            return [err] * len(batches)
        index: dict[int, list[int]] = {}
        for i, (shard, _) in enumerate(batches):
            index.setdefault(shard, []).append(i)
        plan: list[tuple[redis.Redis, list[list[int]], list[Call]]] = []
        for conn, shards in by_node:
            groups: list[list[int]] = [[]]
            size = 0
            for shard in shards:
                for i in index[shard]:
                    n = len(batches[i][1])
                    if groups[-1] and size + n > CALL_CELLS:
                        groups.append([])
                        size = 0
                    groups[-1].append(i)
                    size += n
            calls: list[Call] = []
            for group in groups:
                tags = [self._tags[packed[i][0]] for i in group]
                plain_lines = "\n".join(packed[i][1] for i in group)
                pair_lines = "\n".join(packed[i][2] for i in group)
                args = (" ".join(tags), self._life, plain_lines, pair_lines)
                calls.append((self.APPLY, (tags[0],), args))
            plan.append((conn, groups, calls))
        replies = self.nodes.scatter([(conn, calls) for conn, _, calls in plan])
        failed = False
        for (_, groups, _), node_replies in zip(plan, replies, strict=True):
            for group, reply in zip(groups, node_replies, strict=True):
                error = (
                    StorageError(f"shingle counters: Redis did not take a batch: {reply}")
                    if isinstance(reply, Exception)
                    else None
                )
                failed = failed or error is not None
                for i in group:
                    results[i] = error
        if failed:
            self.nodes.refresh()
        elif self._failing:  # every node took its batch: reads need not wait for a probe
            with self._read_lock:
                self._failing = False
        return results

    # -- reads ----------------------------------------------------------------------------
    def read(self, refs: Sequence[Ref], span: Span) -> list[Buckets]:
        """The stored buckets of ``refs``. StorageError when Redis cannot be read: at once
        while a recent read found it unavailable (``READ_PAUSE``; then one reader tries
        again, once, while the others still fail at once)."""
        out = [Buckets() for _ in refs]
        if not refs:
            return out
        probe = False
        with self._read_lock:
            if self._failing:
                if self._probing or time.monotonic() < self._paused_until:
                    raise StorageError("shingle counters: Redis unavailable (a read just failed)")
                self._probing = probe = True
        try:
            if probe:  # the Cluster's masters may have changed meanwhile (a failover)
                self.nodes.refresh()
            got = self._read(refs, span, out, 0 if probe else self.retries)
        except StorageError:
            with self._read_lock:
                self._failing, self._paused_until = True, time.monotonic() + READ_PAUSE
                if probe:
                    self._probing = False
            raise
        except BaseException:
            if probe:
                with self._read_lock:
                    self._probing = False
            raise
        if probe or self._failing:
            # the prober's own flag too: a batch written meanwhile may have cleared _failing
            # already, and a probe left standing would fail every later read at once
            with self._read_lock:
                self._failing = False
                if probe:
                    self._probing = False
        return got

    def _read(
        self, refs: Sequence[Ref], span: Span, out: list[Buckets], retries: int
    ) -> list[Buckets]:
        days = range(
            min([span.day_from, *span.slot_days[:1]]), max([span.day_to, *span.slot_days[-1:]]) + 1
        )
        head = (days.start, days.stop - 1)
        prefix = self.prefix
        last: Exception | None = None
        for attempt in range(retries + 1):
            if attempt:
                self.nodes.refresh()
                time.sleep(min(1.0, 0.05 * 4**attempt))
            try:
                by_shard: dict[int, list[int]] = {}
                for i, ref in enumerate(refs):
                    by_shard.setdefault(ref.shard, []).append(i)
                plan: list[tuple[redis.Redis, list[int], Call]] = []
                for conn, shards in self._nodes(list(by_shard)):
                    idx = [i for s in shards for i in by_shard[s]]
                    stems = [stem(prefix, refs[i].shard, refs[i].hash, refs[i].type) for i in idx]
                    plan.append((conn, idx, (self.READ, (), (*head, " ".join(stems)))))
                replies = self.nodes.scatter([(conn, [call]) for conn, _, call in plan])
                for (_, idx, _), (reply,) in zip(plan, replies, strict=True):
                    if isinstance(reply, Exception):
                        raise reply
                    self._parse(reply, idx, out, span)
                return out
            except RedisError as exc:
                last = exc
                for b in out:
                    b.slots.clear()
                    b.days.clear()
                with self._read_lock:  # the other readers fail at once meanwhile
                    self._failing = True
                    self._paused_until = time.monotonic() + READ_PAUSE
                if isinstance(exc, RedisTimeoutError):
                    break  # a node that hangs or is cut off: another try would hang as long
        raise StorageError(f"shingle counters: Redis unavailable: {last}")

    @staticmethod
    def _parse(reply: bytes | str, idx: list[int], out: list[Buckets], span: Span) -> None:
        """10-minute buckets (field = code + offset) inside the slot span; a day's value of a
        kind is its day field (code alone) when the key has one (pairs, uniques), else the sum
        of its 10-minute fields."""
        if not reply:
            return
        text = reply.decode() if isinstance(reply, bytes) else reply
        d1, d2, s1, s2 = span.day_from, span.day_to, span.slot_from, span.slot_to
        for line in text.split("\n"):
            parts = line.split(" ")
            b = out[idx[int(parts[0]) - 1]]
            day = int(parts[1])
            base = day * SLOTS_PER_DAY
            in_days = d1 <= day <= d2
            totals: dict[str, int] = {}
            sums: dict[str, int] = {}
            for j in range(2, len(parts) - 1, 2):
                name = parts[j]
                n = int(parts[j + 1])
                if len(name) == 1:
                    totals[name] = n
                    continue
                code = name[:1]
                if in_days:
                    sums[code] = sums.get(code, 0) + n
                slot = base + int(name[1:])
                if s1 <= slot <= s2:
                    b.slots[(code, slot)] = n
            if in_days:
                for code, n in (sums | totals).items():
                    b.days[(code, day)] = min(n, MAX_VALUE)

    def expire(self, now: float) -> int:
        return 0  # every key has its EXPIREAT

    def memory(self) -> dict[str, int]:
        """used_memory and keys, summed over the masters (for the benchmark)."""
        used = keys = 0
        for conn in self.nodes.primaries():
            info = conn.info("memory")
            used += int(info["used_memory"])
            keys += int(conn.dbsize())
        return {"used_memory": used, "keys": keys}

    def close(self) -> None:
        pass  # the client is the caller's (app.py closes the one it built)
