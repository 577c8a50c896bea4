"""Where locks, fences and rate limits live.

- ``redislock`` / ``redisrate``: Redis (one server, a Sentinel-watched master, or a Cluster;
  sync and asyncio), every step one Lua script using the server's clock, run through
  ``pochta.redisconn``;
- ``redisknown`` / ``sqliteknown``: the known clients of accounts (``pochta.guard.known``);
- ``sqlitelock`` / ``sqliterate``: embedded, one SQLite file shared by the threads and
  processes of one host (FIFOs wake lock waiters);
- ``pochta.guard.ratelimit.MemoryRateLimitBackend``, ``pochta.guard.known.MemoryKnownClients``
  and ``pochta.guard.fence.MemoryFence``:
  one process, for tests and single-process tools.
"""
