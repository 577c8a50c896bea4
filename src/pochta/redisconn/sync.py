"""``Scripts``: Lua scripts and BLPOP on a sync redis-py client; Redis being out of reach
(``client.UNAVAILABLE``) becomes the caller's StorageError class, any other error reply (a
script error, a wrong type) is raised as it is: a bug.

- ``redis.Redis`` (one server, or the master that Sentinel names): each thread keeps one
  connection of the client's own pool (``ConnectionPool.get_connection``) and talks on it
  directly (``scripts.exchange``); several calls are one write and one read. That skips what
  redis-py does around every command (a pool checkout with a readiness poll, the retry
  wrapper, metrics), which on loopback costs about as much client CPU as the round trip
  itself; a lock cycle is two calls (BENCHMARKS.md, Guard). A broken connection is dropped
  and the call tried once more on a new one (after a Redis restart the first use of an old
  connection fails; after a Sentinel failover the old master answers READONLY).
- ``redis.RedisCluster``: the client's own command path (``register_script``), which follows
  MOVED/ASK redirections and failovers; several calls go as a cluster pipeline, one round
  trip per node.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import redis
from redis import exceptions as rx
from redis.commands.core import Script as RegisteredScript

from pochta.errors import StorageError
from pochta.redisconn.client import UNAVAILABLE, SyncClient
from pochta.redisconn.scripts import Arg, Call, Script, evalsha, exchange, max_block, read


class _Forks:
    generation = 0  # a connection from before a fork belongs to the parent


def _forked() -> None:
    _Forks.generation += 1


os.register_at_fork(after_in_child=_forked)


class _Held:
    """One thread's connection; back to its pool when the thread ends (its thread-local slot
    is dropped), when it breaks, or when the Scripts close."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self.conn: Any = pool.get_connection()
        self.generation = _Forks.generation
        self.give_back = weakref.finalize(self, pool.release, self.conn)


class Scripts:
    """Scripts and BLPOP on a sync client; ``unavailable``: the StorageError to raise when
    Redis does not answer. ``direct=False`` sends every call through the client's own
    command path even on a ``redis.Redis`` (the benchmarks compare the two)."""

    def __init__(
        self,
        client: SyncClient,
        unavailable: type[StorageError] = StorageError,
        *,
        direct: bool = True,
    ) -> None:
        self.client = client
        self.unavailable = unavailable
        self.max_block = max_block(client)
        self._pool = client.connection_pool if isinstance(client, redis.Redis) and direct else None
        self._local = threading.local()
        self._held: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._held_lock = threading.Lock()
        self._registered: dict[str, RegisteredScript] = {}

    def _fail(self, exc: BaseException) -> StorageError:
        return self.unavailable(f"redis: {type(exc).__name__}: {exc}")

    def _checked(self, replies: list[Any]) -> list[Any]:
        for reply in replies:
            if isinstance(reply, UNAVAILABLE):  # READONLY, TRYAGAIN in place of a reply
                raise self._fail(reply) from reply
            if isinstance(reply, Exception):
                raise reply
        return replies

    # -- redis.Redis: this thread's connection ------------------------------------------------
    def _mine(self) -> _Held:
        held: _Held | None = getattr(self._local, "held", None)
        if held is None or not held.give_back.alive or held.generation != _Forks.generation:
            assert self._pool is not None  # (given back: by close(), which another thread ran)
            held = self._local.held = _Held(self._pool)
            with self._held_lock:
                self._held.add(held)
        return held

    def _drop(self) -> None:
        held: _Held | None = getattr(self._local, "held", None)
        self._local.held = None
        if held is not None and held.give_back.alive:  # not already someone else's
            held.conn.disconnect()
            held.give_back()

    def _direct(self, calls: Sequence[Call]) -> list[Any]:
        for attempt in (0, 1):
            try:
                replies = exchange(self._mine().conn, calls)
            except UNAVAILABLE as exc:
                self._drop()
                if attempt or isinstance(exc, (rx.TimeoutError, TimeoutError)):
                    raise self._fail(exc) from exc
                continue
            return self._checked(replies)
        raise AssertionError("unreachable")

    # -- redis.RedisCluster: the client's own path ----------------------------------------------
    def _script(self, script: Script) -> RegisteredScript:
        registered = self._registered.get(script.sha)
        if registered is None:
            registered = self._registered[script.sha] = self.client.register_script(script.source)
        return registered

    def _pipelined(self, calls: Sequence[Call]) -> list[Any]:
        def once(todo: Sequence[Call]) -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for call in todo:
                pipe.execute_command(*evalsha(call))
            return list(pipe.execute(raise_on_error=False))

        try:
            replies = once(calls)
            again = [i for i, r in enumerate(replies) if isinstance(r, rx.NoScriptError)]
            if again:
                for source in {calls[i][0].source for i in again}:
                    self.client.script_load(source)
                for i, reply in zip(again, once([calls[i] for i in again]), strict=True):
                    replies[i] = reply
        except UNAVAILABLE as exc:
            raise self._fail(exc) from exc
        return self._checked(replies)

    # -- what the backends call ---------------------------------------------------------------
    def run(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """One script call; its reply."""
        if self._pool is not None:
            return self._direct([(script, keys, args)])[0]
        try:
            return self._script(script)(keys=keys, args=args)
        except UNAVAILABLE as exc:
            raise self._fail(exc) from exc

    def run_many(self, calls: Sequence[Call]) -> list[Any]:
        """Several script calls in one round trip (one per node on a Cluster); each reply in
        order. Not atomic together: each call is."""
        if not calls:
            return []
        if self._pool is not None:
            return self._direct(calls)
        return self._pipelined(calls)

    def blpop(self, key: str, timeout: float) -> bool:
        """Block up to ``timeout`` (at most ``max_block``) for an element of list ``key``;
        whether one came."""
        timeout = min(timeout, self.max_block)
        if timeout <= 0:
            return False
        seconds = f"{max(timeout, 0.001):.3f}"
        if self._pool is None:
            try:
                return self.client.blpop([key], float(seconds)) is not None
            except UNAVAILABLE as exc:
                raise self._fail(exc) from exc
        for attempt in (0, 1):
            try:
                conn = self._mine().conn
                conn.send_command("BLPOP", key, seconds)
                (reply,) = self._checked(read(conn, 1))
            except UNAVAILABLE as exc:
                self._drop()
                if attempt or isinstance(exc, (rx.TimeoutError, TimeoutError)):
                    raise self._fail(exc) from exc
                continue
            return reply is not None
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Give back the connections threads keep (the client itself is the caller's); for
        when no call is under way. A thread that calls again takes a new connection."""
        with self._held_lock:
            held = list(self._held)
            self._held.clear()
        for h in held:
            h.give_back()
