"""Guard: leased locks with fencing, rolling rate limits, connection limits, passwords,
leaked-credential audit.

lock.py / alock.py      Locks, AsyncLocks: leases renewed while their owner lives
fence.py                MemoryFence; backends/ has RedisFence and SqliteFence
ratelimit.py            the rolling-limit formula, RateLimiter, AsyncRateLimiter
schedule.py             the account-wide schedule of password checks (slots, growing delay)
logins.py               LoginGuard: known clients, their own limits, the schedule for the rest
known.py / devices.py   which addresses, networks and device tokens an account logged in from
anvil.py                connection limits per address, network and in all (Gate)
reserve.py              the spool's disk reserve (DiskReserve)
leaks.py                audit(): which leaked email:password lines open an account
passwords.py            argon2id hashing
backends/               Redis (and Cluster) and embedded SQLite implementations
"""

from pochta.guard.alock import AsyncLease, AsyncLocks
from pochta.guard.fence import MemoryFence
from pochta.guard.leaks import LeakReport, audit, dump_lines
from pochta.guard.lock import Lease, Locks
from pochta.guard.ratelimit import (
    AsyncRateLimiter,
    MemoryRateLimitBackend,
    RateLimiter,
    ThreadedRateLimitBackend,
)
from pochta.types import Limit, RateDecision

__all__ = [
    "AsyncLease",
    "AsyncLocks",
    "AsyncRateLimiter",
    "LeakReport",
    "Lease",
    "Limit",
    "Locks",
    "MemoryFence",
    "MemoryRateLimitBackend",
    "RateDecision",
    "RateLimiter",
    "ThreadedRateLimitBackend",
    "audit",
    "dump_lines",
]
