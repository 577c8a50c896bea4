"""Where locks, fences and rate limits live.

- ``redislock`` / ``redisrate``: Redis or Redis Cluster (sync and asyncio), every step one Lua
  script using the server's clock;
- ``sqlitelock`` / ``sqliterate``: embedded, one SQLite file shared by the threads and
  processes of one host (FIFOs wake lock waiters);
- ``pochta.guard.ratelimit.MemoryRateLimitBackend`` and ``pochta.guard.fence.MemoryFence``:
  one process, for tests and single-process tools.
"""

from pochta.guard.backends._redisio import async_redis_client, redis_client

__all__ = ["async_redis_client", "redis_client"]
