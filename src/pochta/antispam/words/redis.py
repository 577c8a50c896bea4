"""Learned words in Redis 7.0+ (one server, Sentinel, Cluster; through ``pochta.redisconn``):
for an installation whose loaders share a Redis and no PostgreSQL.

Layout: every key of one owner carries the hash tag ``{w:<owner>}`` and so lives on one slot
(one node of a Cluster), so that each step is one Lua script, atomic, on one node:

    <prefix>{w:<owner>}:s   hash   word -> spam letters     word: its 64-bit hash as 16 hex
    <prefix>{w:<owner>}:h   hash   word -> ham letters            digits (so that the text
    <prefix>{w:<owner>}:d   zset   word, score its last day       order is the numbers' order)
    <prefix>{w:<owner>}:t   hash   s, h -> the letters the owner learned
    <prefix>{w}:owners      set    the owners that learned anything (another slot: kept
                                   beside the owner's step, not in it)

Counts are HINCRBY, saturating: a sum past 2^63 - 1 (HINCRBY refuses it) is set to 2^63 - 1,
one below 0 to 0, as in the other stores. ``counts`` is one script of two HMGETs; ``prune``
takes the owner's words in the order of the day, then the word (ZRANGE), and drops them. The
zset is what pruning by day costs: about 150 bytes a word in all (BENCHMARKS.md).

What this costs: an owner's table is on one node (the installation's too: 2,000,000 words,
about 650 MB there), and an ``add`` holds that node for as long as its script runs (a flush
of 20,000 new words: about a quarter of a second on a loaded 2-vCPU machine). PostgreSQL,
when the installation has it, spreads neither cost onto the mail's Redis.

Failover: Redis replicates asynchronously; words a master acknowledged just before it died
are lost with it (learning is statistics: a few letters' words, never a letter).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pochta.antispam.words import WordStore
from pochta.errors import ConfigError, StorageError
from pochta.redisconn import UNAVAILABLE, Call, Script, Scripts, SyncClient, text

_CHUNK = 1000  # words per script call (Lua's unpack and one call's time on the node)


class RedisWordStore:
    # KEYS: s, h, d, t; ARGV[1] the day, ARGV[2], ARGV[3] the letters (spam, ham), then
    # (word, spam delta, ham delta) triples; returns the number of words
    ADD = Script(
        """
local MAX = '9223372036854775807'
local function add(key, field, n)
  local ok, v = pcall(redis.call, 'HINCRBY', key, field, n)
  if not ok then redis.call('HSET', key, field, MAX)
  elseif v < 0 then redis.call('HSET', key, field, 0) end
end
local day = ARGV[1]
for i = 4, #ARGV, 3 do
  local w = ARGV[i]
  add(KEYS[1], w, ARGV[i + 1])
  add(KEYS[2], w, ARGV[i + 2])
  redis.call('ZADD', KEYS[3], day, w)
end
add(KEYS[4], 's', ARGV[2])
add(KEYS[4], 'h', ARGV[3])
return (#ARGV - 3) / 3
"""
    )
    # KEYS: s, h; ARGV: words; returns {spam values, ham values} (nil: unknown)
    READ = Script(
        """#!lua flags=no-writes
return {redis.call('HMGET', KEYS[1], unpack(ARGV)), redis.call('HMGET', KEYS[2], unpack(ARGV))}
"""
    )
    # KEYS: s, h, d; ARGV[1] the words to keep; returns how many were dropped
    PRUNE = Script(
        """
local excess = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[1])
if excess <= 0 then return 0 end
local dropped = 0
while dropped < excess do
  local n = math.min(500, excess - dropped)
  local old = redis.call('ZRANGE', KEYS[3], 0, n - 1)
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('HDEL', KEYS[2], unpack(old))
  redis.call('ZREM', KEYS[3], unpack(old))
  dropped = dropped + #old
end
return dropped
"""
    )
    # KEYS: the owner's keys; ARGV: none
    FORGET = Script("return redis.call('DEL', unpack(KEYS))")
    # KEYS: the owner's t; ARGV: none; returns {spam letters, ham letters} (nil: none)
    TOTALS = Script(
        """#!lua flags=no-writes
return redis.call('HMGET', KEYS[1], 's', 'h')
"""
    )

    def __init__(self, client: SyncClient, *, prefix: str = "lw") -> None:
        if not prefix or any(c in prefix for c in " {}\n"):
            raise ConfigError(f"learned words' key prefix {prefix!r}: no spaces or braces")
        self.client = client
        self.prefix = prefix
        self.io = Scripts(client, StorageError)
        self._owners = f"{prefix}{{w}}:owners"

    def _keys(self, owner: int) -> tuple[str, str, str, str]:
        k = f"{self.prefix}{{w:{int(owner)}}}:"
        return k + "s", k + "h", k + "d", k + "t"

    def _owned(self, owner: int) -> None:
        try:
            self.client.sadd(self._owners, str(int(owner)))
        except UNAVAILABLE as exc:
            raise StorageError(f"redis: learned words' owners: {exc}") from exc

    def add(
        self,
        owner: int,
        words: Mapping[int, tuple[int, int]],
        letters: tuple[int, int],
        day: int,
    ) -> None:
        self._owned(owner)
        keys = self._keys(owner)
        args: list[str | int] = [int(day), int(letters[0]), int(letters[1])]
        for h, (s, m) in words.items():
            args += [f"{h:016x}", int(s), int(m)]
        # one script: the step is atomic (a letter's words are at most a few thousand)
        self.io.run(self.ADD, keys, args)

    def counts(self, owner: int, words: Sequence[int]) -> dict[int, tuple[int, int]]:
        s, h, _, _ = self._keys(owner)
        out: dict[int, tuple[int, int]] = {}
        calls = [
            (self.READ, (s, h), [f"{w:016x}" for w in words[i : i + _CHUNK]])
            for i in range(0, len(words), _CHUNK)
        ]
        for i, (spam, ham) in enumerate(self.io.run_many(calls)):
            for w, a, b in zip(words[i * _CHUNK : (i + 1) * _CHUNK], spam, ham, strict=True):
                if a is not None:
                    out[w] = (int(text(a)), int(text(b)) if b is not None else 0)
        return out

    def totals(self, owner: int) -> tuple[int, int]:
        try:
            s, m = self.client.hmget(self._keys(owner)[3], ["s", "h"])
        except UNAVAILABLE as exc:
            raise StorageError(f"redis: learned words: {exc}") from exc
        return (int(text(s)) if s is not None else 0, int(text(m)) if m is not None else 0)

    def size(self, owner: int) -> int:
        try:
            return int(self.client.zcard(self._keys(owner)[2]))
        except UNAVAILABLE as exc:
            raise StorageError(f"redis: learned words: {exc}") from exc

    def prune(self, owner: int, keep: int) -> int:
        s, h, d, _ = self._keys(owner)
        return int(self.io.run(self.PRUNE, (s, h, d), [max(int(keep), 0)]))

    def forget(self, owner: int) -> None:
        self.io.run(self.FORGET, self._keys(owner), [])
        try:
            self.client.srem(self._owners, str(int(owner)))
        except UNAVAILABLE as exc:
            raise StorageError(f"redis: learned words' owners: {exc}") from exc

    def owners(self) -> list[int]:
        try:
            found = self.client.smembers(self._owners)
        except UNAVAILABLE as exc:
            raise StorageError(f"redis: learned words' owners: {exc}") from exc
        return sorted(int(text(o)) for o in found)

    def all_totals(self) -> dict[int, tuple[int, int]]:
        """The owners' set, then every owner's totals in pipelines of ``_CHUNK`` (one round
        trip per node each)."""
        owners = self.owners()
        out: dict[int, tuple[int, int]] = {}
        for i in range(0, len(owners), _CHUNK):
            chunk = owners[i : i + _CHUNK]
            calls: list[Call] = [(self.TOTALS, (self._keys(o)[3],), []) for o in chunk]
            for owner, (s, m) in zip(chunk, self.io.run_many(calls), strict=True):
                out[owner] = (
                    int(text(s)) if s is not None else 0,
                    int(text(m)) if m is not None else 0,
                )
        return out

    def close(self) -> None:
        """Give back this store's connections (the client is the caller's)."""
        self.io.close()


def _check(store: RedisWordStore) -> WordStore:  # the Protocol, checked by mypy
    return store
