"""Guard: leased locks with fencing, rolling rate limits, connection limits, passwords,
leaked-credential audit.

lock/ / alock.py        Locks, AsyncLocks: leases renewed while their owner lives
ratelimit/              the rolling-limit formula, RateLimiter, AsyncRateLimiter
schedule.py             the account-wide schedule of password checks (slots, growing delay)
logins.py               LoginGuard: known clients, their own limits, the schedule for the rest
known/ / devices.py     which addresses, networks and device tokens an account logged in from
anvil/                  connection limits per address, network and in all (Gate)
reserve.py              the spool's disk reserve (DiskReserve)
leaks.py                audit(): which leaked email:password lines open an account
passwords.py            argon2id hashing

A port's engines live in the folder of the module that uses them, one file per engine (the
layout of every port, docs/glossary.md): ``__init__.py`` is the service, beside it
``memory.py`` (one process: tests and single-process tools), ``sqlite.py`` (embedded: one
SQLite file shared by the threads and processes of one host), ``redis.py`` (one server, a
Sentinel-watched master or a Cluster, sync and asyncio, every step one Lua script on the
server's clock, through ``pochta.redisconn``):

lock/        LockBackend, AsyncLockBackend and Fence: memory.py (MemoryFence), sqlite.py
             (FIFOs wake lock waiters), redis.py
ratelimit/   RateLimitBackend (limits and schedules): memory.py, sqlite.py, redis.py
known/       KnownClientsBackend: memory.py, sqlite.py, redis.py
anvil/       ConnectionTable: memory.py, mapped.py (memory-mapped files shared by the
             processes of ``pochta serve --processes N``)
"""

from pochta.guard.alock import AsyncLease, AsyncLocks
from pochta.guard.leaks import LeakReport, audit, dump_lines
from pochta.guard.lock import Lease, Locks
from pochta.guard.lock.memory import MemoryFence
from pochta.guard.ratelimit import (
    AsyncRateLimiter,
    RateLimiter,
    ThreadedRateLimitBackend,
)
from pochta.guard.ratelimit.memory import MemoryRateLimitBackend
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
