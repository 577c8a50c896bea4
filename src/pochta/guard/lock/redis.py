"""Locks and fences on Redis (one server, Sentinel, Cluster; through ``pochta.redisconn``).

The keys of lock NAME share the hash tag ``{NAME}``, so on a Cluster they live in one slot and
each script touches one node:

    pochta:lock:{NAME}          the lease: the holder's owner string, with PX expiry
    pochta:lock:{NAME}:fence    the last fencing token handed out
    pochta:lock:{NAME}:waiters  owners refused recently (sorted set, score = until when)
    pochta:lock:{NAME}:wake     a one-element list a release pushes when there are waiters;
                                they BLPOP it (Redis wakes the one blocked longest)
    pochta:lock:{NAME}:handoff  set by such a release: for HANDOFF_MS only an owner refused
                                before it may take the lock, not a newcomer

The hand-off keeps a client that releases and at once acquires again from taking the lock
back while others wait (barging): waiters are served about in the order they blocked. If no
waiter comes within HANDOFF_MS (it died, was paused, or gave up), the lock is anyone's again.
An owner string is per acquire call, so a waiter is one blocking call that was refused.

Fencing tokens are ``max(last + 1, server time in µs)``: strictly increasing while the
counter survives, and still increasing when it does not (a restart without persistence, a
failover to a replica that missed the last increments), as long as Redis hands out fewer than
a million tokens per second per name and the servers' clocks agree within a failover's time.

Redis replication is asynchronous: after a failover a lease may be gone (its holder is then
told: the next extension fails) or, rarely, still present for a holder that had released it.
The fencing tokens are what keeps a protected resource safe either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pochta.errors import GuardUnavailable, StaleToken
from pochta.guard.names import check_name
from pochta.redisconn import AsyncClient, AsyncScripts, Script, Scripts, SyncClient, text
from pochta.types import Grant

WAKE_TTL_MS = 5000  # a wake-up nobody took is dropped after this
# A waiter is refused again at least every pochta.redisconn.scripts.MAX_BLOCK (2 s: its BLPOP
# ends), which renews its place among the waiters; the place outlives that gap. One that gave
# up keeps it this long.
WAITING_MS = 3000
HANDOFF_MS = 50


class _LockScripts:
    prefix: str

    # KEYS[1] the lease, KEYS[2] the fencing counter, KEYS[3] the waiters, KEYS[4] the hand-off
    # ARGV[1] owner, ARGV[2] ttl (ms), ARGV[3] how long a refused owner stays a waiter (ms),
    # ARGV[4] '1' if a refused owner will wait (it joins the waiters)
    # returns {token, 0} when taken (or already held by ARGV[1]: a retried call), else
    # {0, ms until the holder's lease or the hand-off ends (-1: never)}
    ACQUIRE = Script(
        """
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function refuse(pttl)
  if ARGV[4] == '1' then
    redis.call('ZADD', KEYS[3], now_ms + tonumber(ARGV[3]), ARGV[1])
    redis.call('PEXPIRE', KEYS[3], ARGV[3])
  end
  return {0, pttl}
end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  local mine = redis.call('GET', KEYS[2])
  if mine then
    return {tonumber(mine), 0}
  end
elseif cur then
  return refuse(redis.call('PTTL', KEYS[1]))
end
local released_at = redis.call('GET', KEYS[4])
if released_at then  -- handed over to those who waited before that release
  local until_ms = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[1]) or '0')
  if until_ms < now_ms or until_ms - tonumber(ARGV[3]) > tonumber(released_at) then
    return refuse(redis.call('PTTL', KEYS[4]))
  end
  redis.call('DEL', KEYS[4])
end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
local token = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
if token < floor then token = floor end
redis.call('SET', KEYS[2], string.format('%.0f', token))
return {token, 0}
"""
    )

    # KEYS[1] the lease; ARGV[1] owner, ARGV[2] ttl (ms)
    # returns 1 when extended, 0 when ARGV[1] does not hold it
    EXTEND = Script(
        """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
    )

    # KEYS[1] the lease, KEYS[2] the wake list, KEYS[3] the waiters, KEYS[4] the hand-off
    # (the release's time, ms); ARGV[1] owner, ARGV[2] wake list ttl (ms), ARGV[3] hand-off (ms)
    # returns 1 when released (and a waiter woken, if any), 0 when ARGV[1] did not hold it
    RELEASE = Script(
        """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now_ms - 1)
if redis.call('ZCARD', KEYS[3]) > 0 then
  redis.call('SET', KEYS[4], now_ms, 'PX', ARGV[3])
  redis.call('DEL', KEYS[2])
  redis.call('RPUSH', KEYS[2], '1')
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
"""
    )

    def _lease(self, name: str) -> str:
        return f"{self.prefix}:{{{name}}}"

    def _keys(self, name: str) -> tuple[str, str, str, str, str]:
        """The lease, fencing counter, wake list, waiters and hand-off of lock ``name``."""
        lease = self._lease(name)
        return lease, lease + ":fence", lease + ":wake", lease + ":waiters", lease + ":handoff"

    def _acquire(self, name: str, owner: str, ttl: float, queue: bool) -> tuple[Any, Any]:
        lease, fence, _, waiters, handoff = self._keys(name)
        return (lease, fence, waiters, handoff), (owner, _ms(ttl), WAITING_MS, int(queue))

    def _release(self, name: str, owner: str) -> tuple[Any, Any]:
        lease, _, wake, waiters, handoff = self._keys(name)
        return (lease, wake, waiters, handoff), (owner, WAKE_TTL_MS, HANDOFF_MS)

    @staticmethod
    def _grant(reply: Sequence[object]) -> Grant:
        token, pttl = int(text(reply[0])), int(text(reply[1]))
        if token:
            return Grant(token)
        return Grant(None, float("inf") if pttl == -1 else max(pttl, 0) / 1000)


class RedisLockBackend(_LockScripts):
    """``LockBackend`` on a sync ``redis.Redis`` or ``redis.RedisCluster``."""

    def __init__(self, client: SyncClient, *, prefix: str = "pochta:lock") -> None:
        self.prefix = prefix
        self.io = Scripts(client, GuardUnavailable)

    def try_acquire(self, name: str, owner: str, ttl: float, queue: bool = False) -> Grant:
        return self._grant(self.io.run(self.ACQUIRE, *self._acquire(name, owner, ttl, queue)))

    def extend(self, leases: Sequence[tuple[str, str, float]]) -> list[bool]:
        replies = self.io.run_many(
            [(self.EXTEND, (self._lease(n),), (owner, _ms(ttl))) for n, owner, ttl in leases]
        )
        return [bool(int(r)) for r in replies]

    def release(self, name: str, owner: str) -> bool:
        return bool(int(self.io.run(self.RELEASE, *self._release(name, owner))))

    def listen(self, name: str) -> _Listener:
        return _Listener(self.io, self._keys(name)[2])

    def close(self) -> None:
        self.io.close()


class _Listener:
    def __init__(self, io: Scripts, key: str) -> None:
        self._io = io
        self._key = key

    def wait(self, timeout: float) -> None:
        self._io.blpop(self._key, timeout)

    def close(self) -> None:
        pass


class AsyncRedisLockBackend(_LockScripts):
    """``AsyncLockBackend`` on ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``."""

    def __init__(self, client: AsyncClient, *, prefix: str = "pochta:lock") -> None:
        self.prefix = prefix
        self.io = AsyncScripts(client, GuardUnavailable)

    async def try_acquire(self, name: str, owner: str, ttl: float, queue: bool = False) -> Grant:
        reply = await self.io.run(self.ACQUIRE, *self._acquire(name, owner, ttl, queue))
        return self._grant(reply)

    async def extend(self, leases: Sequence[tuple[str, str, float]]) -> list[bool]:
        replies = await self.io.run_many(
            [(self.EXTEND, (self._lease(n),), (owner, _ms(ttl))) for n, owner, ttl in leases]
        )
        return [bool(int(r)) for r in replies]

    async def release(self, name: str, owner: str) -> bool:
        return bool(int(await self.io.run(self.RELEASE, *self._release(name, owner))))

    def listen(self, name: str) -> _AsyncListener:
        return _AsyncListener(self.io, self._keys(name)[2])

    async def close(self) -> None:
        pass  # the client is the caller's


class _AsyncListener:
    def __init__(self, io: AsyncScripts, key: str) -> None:
        self._io = io
        self._key = key

    async def wait(self, timeout: float) -> None:
        await self._io.blpop(self._key, timeout)

    def close(self) -> None:
        pass


class RedisFence:
    """``Fence`` in Redis: one hash per resource, ``pochta:fence:{RESOURCE}``, with the highest
    token seen (``t``) and the value (``v``), checked and set by one script."""

    # KEYS[1] the fence hash {t = highest token, v = value}
    # ARGV[1] token, ARGV[2] '1' to store ARGV[3] as the value ('0': only admit)
    # returns 1 when admitted (and stored), 0 when the token is older than one seen
    WRITE = Script(
        """
local top = tonumber(redis.call('HGET', KEYS[1], 't') or '0')
if tonumber(ARGV[1]) < top then
  return 0
end
redis.call('HSET', KEYS[1], 't', ARGV[1])
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'v', ARGV[3])
end
return 1
"""
    )

    # KEYS[1] the fence hash; returns {highest token or nil, value or nil}
    READ = Script("return redis.call('HMGET', KEYS[1], 't', 'v')")

    def __init__(self, client: SyncClient, *, prefix: str = "pochta:fence") -> None:
        self.prefix = prefix
        self.io = Scripts(client, GuardUnavailable)
        self.client = client

    def _key(self, resource: str) -> str:
        return f"{self.prefix}:{{{check_name(resource, 'resource name')}}}"

    def admit(self, resource: str, token: int) -> None:
        self._check(resource, token, self.io.run(self.WRITE, (self._key(resource),), (token, 0)))

    def write(self, resource: str, token: int, value: bytes) -> None:
        reply = self.io.run(self.WRITE, (self._key(resource),), (token, 1, value))
        self._check(resource, token, reply)

    def read(self, resource: str) -> tuple[int, bytes | None]:
        token, value = self.io.run(self.READ, (self._key(resource),), ())
        return (int(text(token)) if token is not None else 0), _bytes(value)

    @staticmethod
    def _check(resource: str, token: int, reply: object) -> None:
        if not int(text(reply)):
            raise StaleToken(f"fencing token {token} for {resource!r} is older than one seen")


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _bytes(value: object) -> bytes | None:
    if value is None:
        return None
    return value if isinstance(value, bytes) else str(value).encode()
