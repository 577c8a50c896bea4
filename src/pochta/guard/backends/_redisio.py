"""Running the guard's Lua scripts on redis-py clients: each script registered once (by SHA-1,
loaded on the first NOSCRIPT), Redis errors translated once into GuardUnavailable.

On a plain ``redis.Redis`` the sync runner keeps one connection per thread and talks to it
directly (``_wire``): a script call is one send and one receive. Anything else (RedisCluster,
Sentinel pools, asyncio clients) goes through the client's own command path, which follows
MOVED/ASK redirections and failovers.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import redis
import redis.asyncio
from redis import exceptions as rx
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript, Script
from redis.retry import Retry

from pochta.errors import GuardUnavailable
from pochta.guard._proc import pid
from pochta.guard.backends._wire import Wire

SyncClient: TypeAlias = "redis.Redis | redis.RedisCluster"
AsyncClient: TypeAlias = "redis.asyncio.Redis | redis.asyncio.RedisCluster"
Arg: TypeAlias = "str | bytes | int | float"

# what a Redis that is down, restarting, failing over or partitioned raises
UNAVAILABLE: tuple[type[BaseException], ...] = (
    rx.ConnectionError,
    rx.TimeoutError,
    rx.ClusterError,
    rx.RedisClusterException,
    rx.ReadOnlyError,
    rx.TryAgainError,
    OSError,
)

MAX_BLOCK = 2.0  # seconds one BLPOP may block: below redis-py's default 5 s socket timeout


def redis_client(url: str, *, cluster: bool = False, timeout: float = 2.0) -> SyncClient:
    """A client for the guard: short timeouts and one retry, so that a Redis that is gone
    is reported (and leases declared lost) in seconds, not after redis-py's default ten
    retries with backoff."""
    options: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), 1),
    }
    if cluster:
        return redis.RedisCluster.from_url(url, **options)
    return redis.Redis.from_url(url, **options)


def async_redis_client(url: str, *, cluster: bool = False, timeout: float = 2.0) -> AsyncClient:
    """``redis_client`` for asyncio."""
    options: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": AsyncRetry(NoBackoff(), 1),
    }
    if cluster:
        return redis.asyncio.RedisCluster.from_url(url, **options)
    return redis.asyncio.Redis.from_url(url, **options)


@dataclass(frozen=True)
class Lua:
    """A Lua script; ``sha`` is how it is called once the server has it."""

    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha1(self.source.encode(), usedforsecurity=False)
        object.__setattr__(self, "sha", digest.hexdigest())


def text(value: object) -> str:
    """A reply as str, whatever ``decode_responses`` the client was made with."""
    return value.decode() if isinstance(value, bytes) else str(value)


class SyncRedis:
    """Script calls and BLPOP on a sync client."""

    def __init__(self, client: SyncClient, *, direct: bool | None = None) -> None:
        self.client = client
        pool = getattr(client, "connection_pool", None)
        plain = isinstance(client, redis.Redis) and type(pool) in (
            redis.ConnectionPool,
            redis.BlockingConnectionPool,
        )
        self.direct = plain if direct is None else direct and plain
        self._pool = pool
        self._local = threading.local()
        self._wires: weakref.WeakSet[Wire] = weakref.WeakSet()
        self._wires_lock = threading.Lock()
        self._scripts: dict[str, Script] = {}

    # -- the direct path: this thread's own connection ------------------------------------
    def _wire(self) -> Wire:
        wire: Wire | None = getattr(self._local, "wire", None)
        if wire is None or wire.pid != pid():
            assert self._pool is not None
            wire = Wire(self._pool.connection_class(**self._pool.connection_kwargs), pid())
            self._local.wire = wire
            with self._wires_lock:
                self._wires.add(wire)
        return wire

    def _drop_wire(self) -> None:
        wire: Wire | None = getattr(self._local, "wire", None)
        self._local.wire = None
        if wire is not None:
            with self._wires_lock:
                self._wires.discard(wire)
            wire.close()

    def _exchange(self, commands: Sequence[Sequence[Arg]], block: float | None = None) -> list[Any]:
        """Send ``commands`` in one write and read every reply (an error reply is returned as
        its exception, so the connection stays in step). ``block``: seconds a reply may take
        (BLPOP). One retry on a broken connection: after a Redis restart the first use of an
        old socket fails."""
        for attempt in (0, 1):
            try:
                wire = self._wire()
                if block is None:
                    replies = wire.exchange(commands)
                else:
                    wire.set_timeout(block)
                    replies = wire.exchange(commands)
                    wire.set_timeout(wire.timeout)
            except UNAVAILABLE as exc:
                self._drop_wire()
                timed_out = isinstance(exc, (TimeoutError, BlockingIOError, rx.TimeoutError))
                if attempt or timed_out:
                    raise GuardUnavailable(f"redis: {exc!r}") from exc
                continue
            for reply in replies:
                if isinstance(reply, UNAVAILABLE):  # LOADING, READONLY, TRYAGAIN
                    raise GuardUnavailable(f"redis: {reply}") from reply
            return replies
        raise AssertionError("unreachable")

    def _direct_many(self, calls: Sequence[tuple[Lua, Sequence[str], Sequence[Arg]]]) -> list[Any]:
        commands = [("EVALSHA", lua.sha, len(keys), *keys, *args) for lua, keys, args in calls]
        replies = self._exchange(commands)
        missing = {calls[i][0] for i, r in enumerate(replies) if isinstance(r, rx.NoScriptError)}
        if missing:
            self._exchange([("SCRIPT", "LOAD", lua.source) for lua in missing])
            again = [i for i, r in enumerate(replies) if isinstance(r, rx.NoScriptError)]
            redone = self._exchange([commands[i] for i in again])
            for i, reply in zip(again, redone, strict=True):
                replies[i] = reply
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    # -- the client's own path --------------------------------------------------------------
    def _script(self, lua: Lua) -> Script:
        script = self._scripts.get(lua.sha)
        if script is None:
            script = self._scripts[lua.sha] = self.client.register_script(lua.source)
        return script

    # -- what the backends call -------------------------------------------------------------
    def run(self, lua: Lua, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        if self.direct:
            return self._direct_many([(lua, keys, args)])[0]
        try:
            return self._script(lua)(keys=keys, args=args)
        except UNAVAILABLE as exc:
            raise GuardUnavailable(f"redis: {exc}") from exc

    def run_many(self, calls: Sequence[tuple[Lua, Sequence[str], Sequence[Arg]]]) -> list[Any]:
        """Several script calls: pipelined in one round trip on the direct path."""
        if not calls:
            return []
        if self.direct:
            return self._direct_many(calls)
        return [self.run(lua, keys, args) for lua, keys, args in calls]

    def blpop(self, key: str, timeout: float) -> bool:
        """Block up to ``timeout`` (at most MAX_BLOCK) for an element of list ``key``."""
        timeout = min(timeout, MAX_BLOCK)
        if timeout <= 0:
            return False
        seconds = f"{max(timeout, 0.001):.3f}"
        if self.direct:
            (reply,) = self._exchange([("BLPOP", key, seconds)], block=timeout + 1.0)
            if isinstance(reply, Exception):
                raise reply
            return reply is not None
        try:
            return self.client.blpop([key], float(seconds)) is not None
        except UNAVAILABLE as exc:
            raise GuardUnavailable(f"redis: {exc}") from exc

    def close(self) -> None:
        with self._wires_lock:
            wires = list(self._wires)
            self._wires.clear()
        for wire in wires:
            wire.close()


class AsyncRedis:
    """Script calls and BLPOP on an asyncio client.

    The client is initialized once, before its first command: redis-py's asyncio
    ``RedisCluster`` (8.1.0) lets commands started together on a fresh client race its own
    initialization, and then one of them fails inside redis-py with ``'NoneType' object has
    no attribute 'writelines'`` (22 of 300 tries of five concurrent calls here; 0 of 300 once
    initialized first)."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._scripts: dict[str, AsyncScript] = {}
        self._ready = False
        self._lock: asyncio.Lock | None = None

    async def _initialized(self) -> None:
        if self._ready:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self._ready:
                await self.client.initialize()
                self._ready = True

    def _script(self, lua: Lua) -> AsyncScript:
        script = self._scripts.get(lua.sha)
        if script is None:
            script = self._scripts[lua.sha] = self.client.register_script(lua.source)
        return script

    async def run(self, lua: Lua, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        try:
            await self._initialized()
            return await self._script(lua)(keys=keys, args=args)
        except UNAVAILABLE as exc:
            raise GuardUnavailable(f"redis: {exc}") from exc

    async def blpop(self, key: str, timeout: float) -> bool:
        timeout = min(timeout, MAX_BLOCK)
        if timeout <= 0:
            return False
        try:
            await self._initialized()
            reply = await self.client.blpop([key], round(max(timeout, 0.001), 3))
        except UNAVAILABLE as exc:
            raise GuardUnavailable(f"redis: {exc}") from exc
        return reply is not None
