"""``AsyncScripts``: Lua scripts and BLPOP on an asyncio redis-py client, through its own
command path (``register_script``); several calls, one pipeline (one round trip per node)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis import exceptions as rx
from redis.commands.core import AsyncScript

from pochta.errors import StorageError
from pochta.redisconn.client import UNAVAILABLE, AsyncClient
from pochta.redisconn.scripts import Arg, Call, Script, evalsha, max_block


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
                pipe.execute_command(*evalsha(call))
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
