"""Lua scripts on redis-py clients. Every Redis step pochta takes is one script, kept as a
class constant with a comment stating its KEYS, ARGV and return value, and run from here:

    class Counter:
        # KEYS[1] the counter; returns its new value
        BUMP = Script("return redis.call('INCR', KEYS[1])")

    scripts = Scripts(client, GuardUnavailable)
    scripts.run(Counter.BUMP, ["a"], [])
    scripts.run_many([(Counter.BUMP, ["a"], []), (Counter.BUMP, ["b"], [])])  # one round trip

A script is called by its SHA-1 (EVALSHA) and sent in full (SCRIPT LOAD) only when a server
answers NOSCRIPT: its first use there, after a restart, on a new master. Redis being out of
reach (``client.UNAVAILABLE``) becomes the caller's StorageError class; any other error reply
(a script error, a wrong type) is raised as it is: a bug.

How calls travel, through redis-py's public API only:

- ``redis.Redis`` (one server, or the master that Sentinel names): each thread keeps one
  connection of the client's own pool (``ConnectionPool.get_connection``) and talks on it with
  ``Connection.send_command`` / ``send_packed_command`` / ``read_response``; several calls are
  one write and one read. That skips what redis-py does around every command (a pool checkout
  with a readiness poll, the retry wrapper, metrics), which on loopback costs about as much
  client CPU as the round trip itself; a lock cycle is two calls (BENCHMARKS.md, Guard). A
  broken connection is dropped and the call tried once more on a new one (after a Redis
  restart the first use of an old connection fails).
- ``redis.RedisCluster``: the client's own command path (``register_script``), which follows
  MOVED/ASK redirections and failovers; several calls go as a cluster pipeline, one round trip
  per node.
- asyncio clients (``AsyncScripts``): their own command path; several calls, one pipeline.
- Scripts that name their keys in ARGV (``allow-cross-slot-keys``, the shingle counters) go to
  the node that serves their slots: ``Scripts.nodes`` groups slots by node, ``scatter`` writes
  every node its calls before it reads any reply, so the nodes work at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import redis
import redis.asyncio
from redis import exceptions as rx
from redis.commands.core import AsyncScript
from redis.commands.core import Script as RegisteredScript

from pochta.errors import StorageError
from pochta.redisconn.client import UNAVAILABLE, AsyncClient, SyncClient

Arg: TypeAlias = "str | bytes | int | float"
Call: TypeAlias = "tuple[Script, Sequence[str], Sequence[Arg]]"

MAX_BLOCK = 2.0
"""Seconds one BLPOP blocks at most; less when the client's socket timeout is short (half of
it), so that a quiet list never looks like a dead server."""


@dataclass(frozen=True)
class Script:
    """A Lua script; ``sha`` (its SHA-1) is how it is called once the server has it."""

    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha1(self.source.encode(), usedforsecurity=False)
        object.__setattr__(self, "sha", digest.hexdigest())


def text(value: object) -> str:
    """A reply as str, whatever ``decode_responses`` the client was made with."""
    return value.decode() if isinstance(value, bytes) else str(value)


def max_block(client: SyncClient | AsyncClient) -> float:
    """How long one BLPOP on ``client`` may block (see MAX_BLOCK)."""
    if isinstance(client, redis.RedisCluster):
        options = client.nodes_manager.connection_kwargs
    elif isinstance(client, redis.asyncio.RedisCluster):
        options = client.connection_kwargs
    else:
        options = client.connection_pool.connection_kwargs
    timeout = options.get("socket_timeout")
    return MAX_BLOCK if not timeout else min(MAX_BLOCK, float(timeout) / 2)


def _evalsha(call: Call) -> tuple[Arg, ...]:
    script, keys, args = call
    return ("EVALSHA", script.sha, len(keys), *keys, *args)


# -- one connection, several commands ---------------------------------------------------------
def _send(conn: Any, commands: Sequence[Sequence[Arg]]) -> None:
    if len(commands) == 1:
        conn.send_command(*commands[0])
    else:
        conn.send_packed_command(conn.pack_commands(commands))


def _read(conn: Any, n: int) -> list[Any]:
    """``n`` replies; an error reply is returned in its place, so the connection stays in step.
    A broken connection raises (redis-py has then closed it)."""
    replies: list[Any] = []
    for _ in range(n):
        try:
            replies.append(conn.read_response())
        except rx.ResponseError as exc:
            replies.append(exc)
    return replies


def _load_missing(conn: Any, calls: Sequence[Call], replies: list[Any]) -> list[Any]:
    """Load the scripts a server answered NOSCRIPT for, and run those calls again."""
    again = [i for i, reply in enumerate(replies) if isinstance(reply, rx.NoScriptError)]
    if again:
        sources = list({calls[i][0].source: None for i in again})
        _send(conn, [("SCRIPT", "LOAD", source) for source in sources])
        _read(conn, len(sources))  # a failed load shows as NOSCRIPT again below
        _send(conn, [_evalsha(calls[i]) for i in again])
        for i, reply in zip(again, _read(conn, len(again)), strict=True):
            replies[i] = reply
    return replies


def exchange(conn: Any, calls: Sequence[Call]) -> list[Any]:
    """Run ``calls`` on redis-py connection ``conn`` in one round trip (two more when the
    server lacks a script); replies in order, error replies in place."""
    _send(conn, [_evalsha(call) for call in calls])
    return _load_missing(conn, calls, _read(conn, len(calls)))


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


# -- sync ---------------------------------------------------------------------------------------
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
        self._pool = (
            client.connection_pool if isinstance(client, redis.Redis) and direct else None
        )
        self._local = threading.local()
        self._held: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._held_lock = threading.Lock()
        self._registered: dict[str, RegisteredScript] = {}
        self._refresh_lock = threading.Lock()

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
                pipe.execute_command(*_evalsha(call))
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
                (reply,) = self._checked(_read(conn, 1))
            except UNAVAILABLE as exc:
                self._drop()
                if attempt or isinstance(exc, (rx.TimeoutError, TimeoutError)):
                    raise self._fail(exc) from exc
                continue
            return reply is not None
        raise AssertionError("unreachable")

    # -- scripts sent to chosen nodes ----------------------------------------------------------
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
                _send(conn, [_evalsha(call) for call in calls])
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
                replies += _load_missing(conn, calls, _read(conn, len(calls)))
            except rx.RedisError as exc:
                conn.disconnect()  # replies may be left unread: never reuse it
                replies.extend([exc] * (len(calls) - len(replies)))
            except BaseException:
                conn.disconnect()
                raise
            finally:
                pool.release(conn)
        return out

    def close(self) -> None:
        """Give back the connections threads keep (the client itself is the caller's); for
        when no call is under way. A thread that calls again takes a new connection."""
        with self._held_lock:
            held = list(self._held)
            self._held.clear()
        for h in held:
            h.give_back()


# -- asyncio ------------------------------------------------------------------------------------
class AsyncScripts:
    """Scripts and BLPOP on an asyncio client.

    The client is initialized once, before its first command: redis-py's asyncio
    ``RedisCluster`` (8.1.0) lets commands started together on a fresh client race its own
    initialization, and then one of them fails inside redis-py with ``'NoneType' object has
    no attribute 'writelines'`` (22 of 300 tries of five concurrent calls; 0 of 300 once
    initialized first)."""

    def __init__(self, client: AsyncClient, unavailable: type[StorageError] = StorageError) -> None:
        self.client = client
        self.unavailable = unavailable
        self.max_block = max_block(client)
        self._registered: dict[str, AsyncScript] = {}
        self._ready = False
        self._lock: asyncio.Lock | None = None

    def _fail(self, exc: BaseException) -> StorageError:
        return self.unavailable(f"redis: {type(exc).__name__}: {exc}")

    async def _initialized(self) -> None:
        if self._ready:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self._ready:
                await self.client.initialize()
                self._ready = True

    def _script(self, script: Script) -> AsyncScript:
        registered = self._registered.get(script.sha)
        if registered is None:
            registered = self._registered[script.sha] = self.client.register_script(script.source)
        return registered

    async def run(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        try:
            await self._initialized()
            return await self._script(script)(keys=keys, args=args)
        except UNAVAILABLE as exc:
            raise self._fail(exc) from exc

    async def run_many(self, calls: Sequence[Call]) -> list[Any]:
        """Several calls in one pipeline (one round trip per node)."""
        if not calls:
            return []

        async def once(todo: Sequence[Call]) -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for call in todo:
                pipe.execute_command(*_evalsha(call))
            return list(await pipe.execute(raise_on_error=False))

        try:
            await self._initialized()
            replies = await once(calls)
            again = [i for i, r in enumerate(replies) if isinstance(r, rx.NoScriptError)]
            if again:
                for source in {calls[i][0].source for i in again}:
                    await self.client.script_load(source)
                for i, reply in zip(again, await once([calls[i] for i in again]), strict=True):
                    replies[i] = reply
        except UNAVAILABLE as exc:
            raise self._fail(exc) from exc
        for reply in replies:
            if isinstance(reply, UNAVAILABLE):
                raise self._fail(reply) from reply
            if isinstance(reply, Exception):
                raise reply
        return replies

    async def blpop(self, key: str, timeout: float) -> bool:
        timeout = min(timeout, self.max_block)
        if timeout <= 0:
            return False
        try:
            await self._initialized()
            reply = await self.client.blpop([key], round(max(timeout, 0.001), 3))
        except UNAVAILABLE as exc:
            raise self._fail(exc) from exc
        return reply is not None
