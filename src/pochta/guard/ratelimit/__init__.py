"""Rolling rate limits (seed 003's TrafficJam, atomic and on the server's clock).

A limit of ``max`` attempts per ``period`` keeps two numbers per subject: attempts ``used``
and the time ``at`` they were counted. Attempts come back continuously:

    remaining = min(max, max - used + max * (now - at) / period)

so after a burst of 10 logins in a 10-per-hour limit the next one is allowed 6 minutes later,
not an hour later. An attempt is allowed when ``remaining >= cost``; it then sets ``used =
max - remaining + cost`` and ``at = now``. Several limits (per IP, per account) are checked
together: the attempt is charged to all of them or, if any refuses, to none. A refusal says
how long until the same attempt would pass (``retry_after``).

The formula is the pure functions below; the backends apply it atomically on their own clock
(Redis: one Lua script using the server's TIME, so clients' clocks do not matter). Keys hold
no IP or e-mail address: a subject is replaced by an HMAC under a configured secret.

On Redis Cluster the keys of one call must share a hash slot: every key of a ``RateLimiter``
carries its ``tag`` as hash tag, so all of that limiter's state lives on one shard. Give
unrelated limiters different tags to spread them.

    limiter = RateLimiter(backend, secret, tag="login")
    PER_IP, PER_ACCOUNT = Limit("ip", 10, 3600), Limit("account", 20, 3600)
    decision = limiter.hit((PER_IP, ip), (PER_ACCOUNT, email))
    if not decision.allowed:
        ...  # 429, Retry-After: ceil(decision.retry_after)
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pochta.errors import InvalidInput
from pochta.guard import schedule as schedules
from pochta.guard.names import check_name, subject_digest
from pochta.types import (
    AsyncRateLimitBackend,
    Limit,
    RateDecision,
    RateLimitBackend,
    Schedule,
    Slot,
)

MIN_SECRET = 16


# -- the formula --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Usage:
    """Attempts ``used`` of a limit, as counted at time ``at``."""

    used: float
    at: float


def remaining(limit: Limit, usage: Usage | None, now: float) -> float:
    """Attempts left at ``now``. Time that runs backwards refills nothing."""
    if usage is None:
        return float(limit.max)
    elapsed = max(0.0, now - usage.at)
    return min(float(limit.max), limit.max - usage.used + limit.max * elapsed / limit.period)


def wait_for(limit: Limit, usage: Usage | None, left: float, cost: float, now: float) -> float:
    """Seconds from ``now`` until ``left`` has refilled to ``cost`` (refilling starts at
    ``usage.at`` if the clock is behind it); infinite when cost exceeds the max."""
    if cost > limit.max:
        return math.inf
    behind = 0.0 if usage is None else max(0.0, usage.at - now)
    return behind + max(0.0, (cost - left) * limit.period / limit.max)


def refilled_in(limit: Limit, usage: Usage) -> float:
    """Seconds after ``usage.at`` when the limit is full again (its state can be dropped)."""
    return usage.used * limit.period / limit.max


def decide(
    checks: Sequence[tuple[Limit, Usage | None]], cost: float, now: float
) -> tuple[RateDecision, list[Usage | None]]:
    """Charge ``cost`` to every limit or to none; the decision and each limit's new usage."""
    lefts = [remaining(limit, usage, now) for limit, usage in checks]
    denied = [i for i, left in enumerate(lefts) if left < cost]
    if denied:
        retry = max(wait_for(*checks[i], lefts[i], cost, now) for i in denied)
        names = tuple(checks[i][0].name for i in denied)
        return RateDecision(False, max(0.0, min(lefts)), retry, names), [u for _, u in checks]
    new: list[Usage | None] = [
        Usage(limit.max - left + cost, now if usage is None else max(now, usage.at))
        for (limit, usage), left in zip(checks, lefts, strict=True)
    ]
    return RateDecision(True, max(0.0, min(lefts) - cost), 0.0), new


# -- the limiters ------------------------------------------------------------------------------
class _Keys:
    def __init__(self, secret: bytes | str, tag: str, prefix: str) -> None:
        self._secret = secret.encode() if isinstance(secret, str) else bytes(secret)
        if len(self._secret) < MIN_SECRET:
            raise InvalidInput(f"the rate-limit key secret has at least {MIN_SECRET} bytes")
        self.tag = check_name(tag, "rate-limit tag")
        self.prefix = prefix

    def key(self, limit: Limit | Schedule, subject: str) -> str:
        """Where ``subject``'s usage of ``limit`` (or its slots on a schedule) is kept; the
        subject itself is not in it."""
        digest = subject_digest(self._secret, limit.name, subject)
        return f"{self.prefix}:{{{self.tag}}}:{limit.name}:{digest}"

    def slot_key(self, schedule: Schedule, subject: str) -> str:
        check_name(schedule.name, "schedule name")
        schedules.check(schedule)
        return self.key(schedule, subject)

    def checks(self, pairs: Sequence[tuple[Limit, str]], cost: float) -> list[tuple[str, Limit]]:
        if not pairs:
            raise InvalidInput("a rate-limit check names at least one limit")
        if not cost >= 0:
            raise InvalidInput("a rate-limit cost is >= 0")
        names = [limit.name for limit, _ in pairs]
        if len(set(names)) != len(names):
            raise InvalidInput(f"one check names a limit twice: {names}")
        for limit, _ in pairs:
            check_name(limit.name, "limit name")
            if limit.max < 1 or not limit.period > 0:
                raise InvalidInput(f"limit {limit.name!r}: max >= 1 and period > 0")
        return [(self.key(limit, subject), limit) for limit, subject in pairs]


class RateLimiter(_Keys):
    """Rolling limits on one backend. ``secret`` keys the subject hash; ``tag`` groups this
    limiter's keys (one Redis Cluster slot)."""

    def __init__(
        self,
        backend: RateLimitBackend,
        secret: bytes | str,
        *,
        tag: str = "rate",
        prefix: str = "pochta:rate",
    ) -> None:
        super().__init__(secret, tag, prefix)
        self.backend = backend

    def hit(self, *checks: tuple[Limit, str], cost: float = 1.0) -> RateDecision:
        """Charge one attempt (``cost``) of each subject to its limit, all or none."""
        return self.backend.hit(self.checks(checks, cost), cost)

    def peek(self, *checks: tuple[Limit, str], cost: float = 1.0) -> RateDecision:
        """What ``hit`` would answer, charging nothing."""
        return self.backend.hit(self.checks(checks, cost), cost, commit=False)

    def reserve(self, schedule: Schedule, subject: str, *, commit: bool = True) -> Slot:
        """The next slot of ``subject`` on ``schedule`` (``commit=False``: only look)."""
        return self.backend.reserve(self.slot_key(schedule, subject), schedule, commit)

    def reset(self, *checks: tuple[Limit, str]) -> None:
        """Forget the subjects' usage (e.g. after a successful password reset)."""
        self.backend.reset([key for key, _ in self.checks(checks, 0.0)])

    def reset_slots(self, schedule: Schedule, subject: str) -> None:
        """Forget ``subject``'s checks and slots on ``schedule``."""
        self.backend.reset([self.slot_key(schedule, subject)])


class AsyncRateLimiter(_Keys):
    """``RateLimiter`` for asyncio."""

    def __init__(
        self,
        backend: AsyncRateLimitBackend,
        secret: bytes | str,
        *,
        tag: str = "rate",
        prefix: str = "pochta:rate",
    ) -> None:
        super().__init__(secret, tag, prefix)
        self.backend = backend

    async def hit(self, *checks: tuple[Limit, str], cost: float = 1.0) -> RateDecision:
        return await self.backend.hit(self.checks(checks, cost), cost)

    async def peek(self, *checks: tuple[Limit, str], cost: float = 1.0) -> RateDecision:
        return await self.backend.hit(self.checks(checks, cost), cost, commit=False)

    async def reserve(self, schedule: Schedule, subject: str, *, commit: bool = True) -> Slot:
        return await self.backend.reserve(self.slot_key(schedule, subject), schedule, commit)

    async def reset(self, *checks: tuple[Limit, str]) -> None:
        await self.backend.reset([key for key, _ in self.checks(checks, 0.0)])


class ThreadedRateLimitBackend:
    """``AsyncRateLimitBackend`` over a sync one, each call in a worker thread."""

    def __init__(self, backend: RateLimitBackend) -> None:
        self.sync = backend

    async def hit(
        self, checks: Sequence[tuple[str, Limit]], cost: float, commit: bool = True
    ) -> RateDecision:
        return await asyncio.to_thread(self.sync.hit, checks, cost, commit)

    async def reserve(self, key: str, schedule: Schedule, commit: bool = True) -> Slot:
        return await asyncio.to_thread(self.sync.reserve, key, schedule, commit)

    async def reset(self, keys: Sequence[str]) -> None:
        await asyncio.to_thread(self.sync.reset, keys)

    async def close(self) -> None:
        self.sync.close()
