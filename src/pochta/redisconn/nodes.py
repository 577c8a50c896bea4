"""``Nodes``: scripts that name their keys in ARGV (``allow-cross-slot-keys``; the shingle
counters) sent to the node that serves their slots. ``nodes`` groups slots by node,
``scatter`` writes every node its calls before it reads any reply, so the nodes work at once.
One server, or the master a Sentinel names, is the only node."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import redis
from redis import exceptions as rx

from pochta.redisconn.client import UNAVAILABLE, SyncClient
from pochta.redisconn.scripts import Call, evalsha, load_missing, read, send


class Nodes:
    """The nodes of a sync client."""

    def __init__(self, client: SyncClient) -> None:
        self.client = client
        self._refresh_lock = threading.Lock()

    def nodes(self, slots: Sequence[int]) -> list[tuple[redis.Redis, list[int]]]:
        """The node serving each of ``slots``: (the node's client, positions in ``slots``).
        One server (or a Sentinel master) serves them all."""
        client = self.client
        if not isinstance(client, redis.RedisCluster):
            return [(client, list(range(len(slots))))]
        out: dict[str, tuple[redis.Redis, list[int]]] = {}
        manager = client.nodes_manager
        for i, slot in enumerate(slots):
            node = manager.get_node_from_slot(slot)
            entry = out.get(node.name)
            if entry is None:
                conn = node.redis_connection or client.get_redis_connection(node)
                entry = out[node.name] = (conn, [])
            entry[1].append(i)
        return list(out.values())

    def primaries(self) -> list[redis.Redis]:
        """A client of every master (one for a server or a Sentinel master)."""
        client = self.client
        if isinstance(client, redis.RedisCluster):
            return [
                client.get_redis_connection(node)
                for node in client.get_primaries()  # type: ignore[no-untyped-call]
            ]
        return [client]

    def refresh(self) -> None:
        """After an error: learn the Cluster's masters again (a failover, a resharding). The
        next call refreshes again if the Cluster is still electing."""
        if isinstance(self.client, redis.RedisCluster):
            with self._refresh_lock:
                try:
                    self.client.nodes_manager.initialize()
                except UNAVAILABLE:
                    return

    @staticmethod
    def scatter(plan: Sequence[tuple[redis.Redis, Sequence[Call]]]) -> list[list[Any]]:
        """Write every node its calls, then read every reply. Each node's replies in order; a
        node that could not be reached or stopped answering gives its error in place of each
        reply it owes (after a write the calls may have run: at least once)."""
        taken: list[tuple[redis.ConnectionPool, Any] | None] = []
        out: list[list[Any]] = []
        for client, calls in plan:
            pool = client.connection_pool
            conn: Any = None
            try:
                conn = pool.get_connection()
                send(conn, [evalsha(call) for call in calls])
            except rx.RedisError as exc:
                if conn is not None:
                    conn.disconnect()
                    pool.release(conn)
                taken.append(None)
                out.append([exc] * len(calls))
                continue
            taken.append((pool, conn))
            out.append([])
        for held, (_, calls), replies in zip(taken, plan, out, strict=True):
            if held is None:
                continue
            pool, conn = held
            try:
                replies += load_missing(conn, calls, read(conn, len(calls)))
            except rx.RedisError as exc:
                conn.disconnect()  # replies may be left unread: never reuse it
                replies.extend([exc] * (len(calls) - len(replies)))
            except BaseException:
                conn.disconnect()
                raise
            finally:
                pool.release(conn)
        return out
