"""pochta's one way to Redis, for guard (locks, fences, rate limits) and the shingle counters.

    client.py     connect / connect_async: a redis-py client from the [redis] settings
                  (one server, a Sentinel-watched master, a Cluster)
    scripts.py    Script (a Lua constant and its SHA-1); Scripts / AsyncScripts run them
                  (EVALSHA, loaded on NOSCRIPT, batches in one round trip, BLPOP) and turn
                  an unreachable Redis into the caller's StorageError

Only redis-py's public API is used. Named ``redisconn``, not ``redis``, so that ``import
redis`` always means redis-py.
"""

from pochta.redisconn.client import (
    UNAVAILABLE,
    AsyncClient,
    SyncClient,
    connect,
    connect_async,
    describe,
)
from pochta.redisconn.scripts import AsyncScripts, Call, Script, Scripts, text

__all__ = [
    "UNAVAILABLE",
    "AsyncClient",
    "AsyncScripts",
    "Call",
    "Script",
    "Scripts",
    "SyncClient",
    "connect",
    "connect_async",
    "describe",
    "text",
]
