"""redis-py clients from the ``[redis]`` settings: one server, a Sentinel-watched master, or a
Cluster; sync and asyncio. The only place pochta turns settings into a Redis connection.

Every client gets the same short leash: ``timeout`` for connecting and for each reply, and
one retry without backoff, so that a Redis that is gone is reported (and guard's leases
declared lost) in seconds, not after redis-py's default retries with backoff.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel
from redis import exceptions as rx
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from pochta.errors import ConfigError

if TYPE_CHECKING:  # pochta.config pulls in pydantic: not for a process that only takes locks
    from pochta.config import RedisSettings

SyncClient: TypeAlias = "redis.Redis | redis.RedisCluster"
AsyncClient: TypeAlias = "redis.asyncio.Redis | redis.asyncio.RedisCluster"

UNAVAILABLE: tuple[type[BaseException], ...] = (
    rx.ConnectionError,  # also BusyLoadingError (LOADING) and Sentinel's MasterNotFoundError
    rx.TimeoutError,
    rx.ClusterError,
    rx.RedisClusterException,
    rx.ReadOnlyError,  # a master that became a replica (failover)
    rx.TryAgainError,  # a Cluster slot in migration
    OSError,
)
"""What redis-py raises when Redis is down, restarting, failing over or cut off: a caller
turns these into its StorageError; anything else is a bug (a script error, a wrong type)."""


def describe(settings: RedisSettings) -> str:
    """Where ``settings`` point, for messages (never with a password)."""
    where = ", ".join(settings.nodes)
    if settings.mode == "sentinel":
        return f"the master {settings.service!r} of the sentinels at {where}"
    if settings.mode == "cluster":
        return f"the Redis Cluster at {where}"
    return f"Redis at {where}"


def _options(settings: RedisSettings) -> dict[str, Any]:
    """Connection options shared by every mode (for the data nodes, not the sentinels)."""
    options: dict[str, Any] = {
        "socket_timeout": settings.timeout,
        "socket_connect_timeout": settings.timeout,
    }
    if settings.username:
        options["username"] = settings.username
    if settings.password is not None:
        options["password"] = settings.password.get_secret_value()
    if settings.tls:
        options["ssl"] = True
        if settings.tls_ca_file is not None:
            options["ssl_ca_certs"] = str(settings.tls_ca_file)
    return options


def _sentinel_options(settings: RedisSettings) -> dict[str, Any]:
    options: dict[str, Any] = {
        "socket_timeout": settings.timeout,
        "socket_connect_timeout": settings.timeout,
    }
    if settings.sentinel_password is not None:
        options["password"] = settings.sentinel_password.get_secret_value()
    if settings.tls:
        options["ssl"] = True
        if settings.tls_ca_file is not None:
            options["ssl_ca_certs"] = str(settings.tls_ca_file)
    return options


def _hosts(settings: RedisSettings) -> list[tuple[str, int]]:
    return [a for a in settings.addresses() if isinstance(a, tuple)]


class _SentinelMaster(redis.Redis):
    """The master a Sentinel names (``master_for(redis_class=...)``); closing it also closes
    the connections to the sentinels, which redis-py leaves open."""

    def close(self) -> None:
        super().close()
        pool = self.connection_pool
        if isinstance(pool, redis.sentinel.SentinelConnectionPool):
            for sentinel in pool.sentinel_manager.sentinels:
                sentinel.close()


class _AsyncSentinelMaster(redis.asyncio.Redis):
    """``_SentinelMaster`` for asyncio."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        pool = self.connection_pool
        if isinstance(pool, redis.asyncio.sentinel.SentinelConnectionPool):
            for sentinel in pool.sentinel_manager.sentinels:
                await sentinel.aclose()


def connect(settings: RedisSettings, *, ping: bool = False) -> SyncClient:
    """A sync client for ``settings``. With ``ping``, Redis is reached once (PING) so that
    wrong settings stop pochta at start. Either way, a client that cannot be made (a Cluster
    is asked for its map at once) is a ConfigError that names the settings, with redis-py's
    reason and never the password."""
    try:
        client = _sync(settings)
        if ping:
            client.ping()
    except (rx.RedisError, OSError) as exc:
        reason = str(exc) or type(exc).__name__
        raise ConfigError(f"cannot use {describe(settings)} ([redis] settings): {reason}") from exc
    return client


def _sync(settings: RedisSettings) -> SyncClient:
    options = _options(settings)
    options["retry"] = Retry(NoBackoff(), 1)
    if settings.mode == "cluster":
        nodes = [redis.cluster.ClusterNode(h, p) for h, p in _hosts(settings)]  # type: ignore[no-untyped-call]
        return redis.RedisCluster(startup_nodes=nodes, **options)
    if settings.mode == "sentinel":
        sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            _hosts(settings), sentinel_kwargs=_sentinel_options(settings), **options
        )
        master: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
            settings.service, redis_class=_SentinelMaster, db=settings.db
        )
        return master
    (address,) = settings.addresses()
    if isinstance(address, str):
        return redis.Redis(unix_socket_path=address, db=settings.db, **options)
    return redis.Redis(host=address[0], port=address[1], db=settings.db, **options)


def connect_async(settings: RedisSettings) -> AsyncClient:
    """``connect`` for asyncio."""
    options = _options(settings)
    options["retry"] = AsyncRetry(NoBackoff(), 1)
    if settings.mode == "cluster":
        nodes = [redis.asyncio.cluster.ClusterNode(h, p) for h, p in _hosts(settings)]
        return redis.asyncio.RedisCluster(startup_nodes=nodes, **options)
    if settings.mode == "sentinel":
        sentinel = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            _hosts(settings), sentinel_kwargs=_sentinel_options(settings), **options
        )
        master: redis.asyncio.Redis = sentinel.master_for(
            settings.service, redis_class=_AsyncSentinelMaster, db=settings.db
        )
        return master
    (address,) = settings.addresses()
    if isinstance(address, str):
        return redis.asyncio.Redis(unix_socket_path=address, db=settings.db, **options)
    return redis.asyncio.Redis(host=address[0], port=address[1], db=settings.db, **options)
