"""Lua scripts, and how one redis-py connection runs several of them in one round trip.

Every Redis step pochta takes is one script, kept as a class constant with a comment stating
its KEYS, ARGV and return value:

    class Counter:
        # KEYS[1] the counter; returns its new value
        BUMP = Script("return redis.call('INCR', KEYS[1])")

    scripts = Scripts(client, GuardUnavailable)                      # sync.py
    scripts.run(Counter.BUMP, ["a"], [])
    scripts.run_many([(Counter.BUMP, ["a"], []), (Counter.BUMP, ["b"], [])])  # one round trip

A script is called by its SHA-1 (EVALSHA) and sent in full (SCRIPT LOAD) only when a server
answers NOSCRIPT: its first use there, after a restart, on a new master. Everything here goes
through the public methods of redis-py's ``Connection``: ``send_command``,
``send_packed_command``, ``pack_commands``, ``read_response``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import redis
import redis.asyncio
from redis import exceptions as rx

from pochta.redisconn.client import AsyncClient, SyncClient

pack_command: Callable[[tuple[Arg, ...]], bytes] | None
try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # redis[hiredis] brings it; without it, redis-py's packer does the job
    pack_command = None
else:
    pack_command = _hiredis_pack  # type: ignore[assignment]  # its stub says a 1-tuple

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


def evalsha(call: Call) -> tuple[Arg, ...]:
    """The EVALSHA command of ``call``."""
    script, keys, args = call
    return ("EVALSHA", script.sha, len(keys), *keys, *args)


# -- one connection, several commands ---------------------------------------------------------
def send(conn: Any, commands: Sequence[Sequence[Arg]]) -> None:
    """Write ``commands`` to redis-py connection ``conn`` at once. Packed by hiredis (in C;
    redis-py's ``pack_command`` spends about three times as long in Python around the same
    call: a lock cycle packs two commands), else by redis-py. Strings go as UTF-8."""
    if pack_command is not None:
        conn.send_packed_command([b"".join(pack_command(tuple(c)) for c in commands)])
    elif len(commands) == 1:
        conn.send_command(*commands[0])
    else:
        conn.send_packed_command(conn.pack_commands(commands))


def read(conn: Any, n: int) -> list[Any]:
    """``n`` replies; an error reply is returned in its place, so the connection stays in step.
    A broken connection raises (redis-py has then closed it)."""
    replies: list[Any] = []
    for _ in range(n):
        try:
            replies.append(conn.read_response())
        except rx.ResponseError as exc:
            replies.append(exc)
    return replies


def load_missing(conn: Any, calls: Sequence[Call], replies: list[Any]) -> list[Any]:
    """Load the scripts a server answered NOSCRIPT for, and run those calls again."""
    again = [i for i, reply in enumerate(replies) if isinstance(reply, rx.NoScriptError)]
    if again:
        sources = list({calls[i][0].source: None for i in again})
        send(conn, [("SCRIPT", "LOAD", source) for source in sources])
        read(conn, len(sources))  # a failed load shows as NOSCRIPT again below
        send(conn, [evalsha(calls[i]) for i in again])
        for i, reply in zip(again, read(conn, len(again)), strict=True):
            replies[i] = reply
    return replies


def exchange(conn: Any, calls: Sequence[Call]) -> list[Any]:
    """Run ``calls`` on redis-py connection ``conn`` in one round trip (two more when the
    server lacks a script); replies in order, error replies in place."""
    send(conn, [evalsha(call) for call in calls])
    return load_missing(conn, calls, read(conn, len(calls)))
