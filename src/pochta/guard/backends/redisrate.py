"""Rolling rate limits on Redis (one server, Sentinel, Cluster; through ``pochta.redisconn``):
one Lua script per check, on the server's clock (TIME), all the limits of one check charged
together or not at all.

Each (limit, subject) is a hash ``{u: used, t: at}`` that expires when the limit has refilled
(a missing key is a full limit). All keys of one call must be in one hash slot on a Cluster:
``RateLimiter`` gives all its keys one hash tag.
"""

from __future__ import annotations

from collections.abc import Sequence

from pochta.errors import GuardUnavailable
from pochta.redisconn import AsyncClient, AsyncScripts, Script, Scripts, SyncClient, text
from pochta.types import Limit, RateDecision


class _RateScripts:
    # The formula of pochta.guard.ratelimit.decide, step for step.
    # KEYS[i] the usage hash {u = used, t = at (server seconds)} of limit i
    # ARGV[1] cost, ARGV[2] '1' to charge ('0': only look),
    # ARGV[1 + 2i] max and ARGV[2 + 2i] period (seconds) of limit i
    # returns {allowed 1/0, remaining, retry_after (seconds), 'i,j' the refusing limits}
    HIT = Script(
        """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local cost = tonumber(ARGV[1])
local n = #KEYS
local lefts, ats, denied = {}, {}, {}
local retry, low = 0, math.huge
for i = 1, n do
  local max, period = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  local s = redis.call('HMGET', KEYS[i], 'u', 't')
  local left, at = max, now
  if s[1] then
    local used, last = tonumber(s[1]), tonumber(s[2])
    local elapsed = now - last
    if elapsed < 0 then elapsed = 0 end
    left = math.min(max, max - used + max * elapsed / period)
    if last > now then at = last end
  end
  lefts[i], ats[i] = left, at
  if left < low then low = left end
  if left < cost then
    denied[#denied + 1] = i
    local wait = math.huge
    if cost <= max then wait = (at - now) + math.max(0, (cost - left) * period / max) end
    if wait > retry then retry = wait end
  end
end
if #denied > 0 then
  if low < 0 then low = 0 end
  return {0, string.format('%.17g', low), string.format('%.17g', retry), table.concat(denied, ',')}
end
if ARGV[2] == '1' then
  for i = 1, n do
    local max, period = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
    local used = max - lefts[i] + cost
    local u, at = string.format('%.17g', used), string.format('%.17g', ats[i])
    redis.call('HSET', KEYS[i], 'u', u, 't', at)
    redis.call('PEXPIRE', KEYS[i], math.floor(used * period / max * 1000) + 1)
  end
end
low = low - cost
if low < 0 then low = 0 end
return {1, string.format('%.17g', low), '0', ''}
"""
    )

    # KEYS[1] a usage hash; returns how many keys were deleted
    RESET = Script("return redis.call('DEL', KEYS[1])")

    @staticmethod
    def _args(checks: Sequence[tuple[str, Limit]], cost: float, commit: bool) -> list[str]:
        args = [repr(float(cost)), "1" if commit else "0"]
        for _, limit in checks:
            args += [str(int(limit.max)), repr(float(limit.period))]
        return args

    @staticmethod
    def _decision(checks: Sequence[tuple[str, Limit]], reply: Sequence[object]) -> RateDecision:
        allowed, left, retry, denied = (text(x) for x in reply)
        names = tuple(checks[int(i) - 1][1].name for i in denied.split(",") if i)
        return RateDecision(allowed == "1", float(left), float(retry), names)


class RedisRateLimitBackend(_RateScripts):
    """``RateLimitBackend`` on a sync ``redis.Redis`` or ``redis.RedisCluster``."""

    def __init__(self, client: SyncClient) -> None:
        self.io = Scripts(client, GuardUnavailable)

    def hit(
        self, checks: Sequence[tuple[str, Limit]], cost: float, commit: bool = True
    ) -> RateDecision:
        keys = [key for key, _ in checks]
        reply = self.io.run(self.HIT, keys, self._args(checks, cost, commit))
        return self._decision(checks, reply)

    def reset(self, keys: Sequence[str]) -> None:
        self.io.run_many([(self.RESET, (key,), ()) for key in keys])

    def close(self) -> None:
        self.io.close()


class AsyncRedisRateLimitBackend(_RateScripts):
    """``AsyncRateLimitBackend`` on ``redis.asyncio.Redis`` or ``RedisCluster``."""

    def __init__(self, client: AsyncClient) -> None:
        self.io = AsyncScripts(client, GuardUnavailable)

    async def hit(
        self, checks: Sequence[tuple[str, Limit]], cost: float, commit: bool = True
    ) -> RateDecision:
        keys = [key for key, _ in checks]
        reply = await self.io.run(self.HIT, keys, self._args(checks, cost, commit))
        return self._decision(checks, reply)

    async def reset(self, keys: Sequence[str]) -> None:
        await self.io.run_many([(self.RESET, (key,), ()) for key in keys])

    async def close(self) -> None:
        pass
