"""Rolling rate limits and schedules on Redis (one server, Sentinel, Cluster; through
``pochta.redisconn``): one Lua script per check or reservation, on the server's clock (TIME),
all the limits of one check charged together or not at all.

Each (limit, subject) is a hash ``{u: used, t: at}`` that expires when the limit has refilled
(a missing key is a full limit); each (schedule, subject) a hash ``{c: checks, t: at, n:
next}`` that expires when it says nothing any more. All keys of one call must be in one hash
slot on a Cluster: ``RateLimiter`` gives all its keys one hash tag.
"""

from __future__ import annotations

from collections.abc import Sequence

from pochta.errors import GuardUnavailable
from pochta.guard import schedule as schedules
from pochta.redisconn import AsyncClient, AsyncScripts, Script, Scripts, SyncClient, text
from pochta.types import Limit, RateDecision, Schedule, Slot


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

    # The formula of pochta.guard.schedule.reserve, step for step.
    # KEYS[1] the schedule's hash {c = checks counted, t = at, n = next slot (server seconds)}
    # ARGV[1] free, ARGV[2] period, ARGV[3] spacing, ARGV[4] the least interval past free,
    # ARGV[5] ramp, ARGV[6] max_wait (seconds), ARGV[7] '1' to reserve ('0': only look),
    # ARGV[8] the rounding a wait may be past max_wait (seconds)
    # returns {granted 1/0, wait, retry_after, checks}
    RESERVE = Script(
        """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local free, period = tonumber(ARGV[1]), tonumber(ARGV[2])
local spacing, least = tonumber(ARGV[3]), tonumber(ARGV[4])
local ramp, maxwait = tonumber(ARGV[5]), tonumber(ARGV[6])
local s = redis.call('HMGET', KEYS[1], 'c', 't', 'n')
local checks, at, slot = 0, now, now
if s[1] then
  local c, last, nxt = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
  local elapsed = now - last
  if elapsed < 0 then elapsed = 0 end
  checks = math.max(0, c - free * elapsed / period)
  if last > now then at = last end
  if nxt > now then slot = nxt end
end
local wait = slot - now
if wait > maxwait + tonumber(ARGV[8]) then
  return {0, '0', string.format('%.17g', wait - maxwait), string.format('%.17g', checks)}
end
checks = math.min(checks + 1, free + ramp)
local over = checks - free
local interval = 0
if over > 0 then interval = math.min(spacing, math.max(least, spacing * 2 ^ (over - ramp))) end
if ARGV[7] == '1' then
  local nxt = slot + interval
  local c, a = string.format('%.17g', checks), string.format('%.17g', at)
  redis.call('HSET', KEYS[1], 'c', c, 't', a, 'n', string.format('%.17g', nxt))
  local expires = math.max(nxt, at + checks * period / free)
  redis.call('PEXPIRE', KEYS[1], math.floor((expires - now) * 1000) + 1)
end
return {1, string.format('%.17g', wait), '0', string.format('%.17g', checks)}
"""
    )

    # KEYS[1] a usage or schedule hash; returns how many keys were deleted
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

    @staticmethod
    def _slot_args(schedule: Schedule, commit: bool) -> list[str]:
        schedules.check(schedule)
        spacing = schedules.spacing(schedule)
        least = min(spacing, schedule.max_wait / schedule.waiters)
        return [
            str(int(schedule.free)),
            repr(float(schedule.period)),
            repr(spacing),
            repr(least),
            str(schedules.RAMP),
            repr(float(schedule.max_wait)),
            "1" if commit else "0",
            repr(schedules.EPSILON),
        ]

    @staticmethod
    def _slot(reply: Sequence[object]) -> Slot:
        granted, wait, retry, checks = (text(x) for x in reply)
        return Slot(granted == "1", float(wait), float(retry), float(checks))


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

    def reserve(self, key: str, schedule: Schedule, commit: bool = True) -> Slot:
        return self._slot(self.io.run(self.RESERVE, [key], self._slot_args(schedule, commit)))

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

    async def reserve(self, key: str, schedule: Schedule, commit: bool = True) -> Slot:
        reply = await self.io.run(self.RESERVE, [key], self._slot_args(schedule, commit))
        return self._slot(reply)

    async def reset(self, keys: Sequence[str]) -> None:
        await self.io.run_many([(self.RESET, (key,), ()) for key in keys])

    async def close(self) -> None:
        pass
