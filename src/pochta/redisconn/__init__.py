"""pochta's one way to Redis, for guard (locks, fences, rate limits) and the shingle counters.

    client.py     connect / connect_async: a redis-py client from the [redis] settings
                  (one server, a Sentinel-watched master, a Cluster); UNAVAILABLE
    scripts.py    Script (a Lua constant and its SHA-1); EVALSHA on one connection, several
                  calls in one round trip, NOSCRIPT answered by loading the script
    sync.py       Scripts: run / run_many / blpop on a sync client (per-thread connections
                  on one server, the client's own path on a Cluster)
    aio.py        AsyncScripts: the same for asyncio clients
    nodes.py      Nodes: scripts sent to the node that serves their slots (shingle counters)

Only redis-py's public API is used. Named ``redisconn``, not ``redis``, so that ``import
redis`` always means redis-py.
"""

from pochta.redisconn.aio import AsyncScripts
from pochta.redisconn.client import (
    UNAVAILABLE,
    AsyncClient,
    SyncClient,
    connect,
    connect_async,
    describe,
)
from pochta.redisconn.nodes import Nodes
from pochta.redisconn.scripts import Call, Script, text
from pochta.redisconn.sync import Scripts

__all__ = [
    "UNAVAILABLE",
    "AsyncClient",
    "AsyncScripts",
    "Call",
    "Nodes",
    "Script",
    "Scripts",
    "SyncClient",
    "connect",
    "connect_async",
    "describe",
    "text",
]
