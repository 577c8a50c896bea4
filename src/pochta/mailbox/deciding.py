"""A worker process's decision half, and the store choices it shares with ``app.py``.

Each worker process of the intake (:mod:`pochta.mailbox.intake`) builds its own
:class:`~pochta.antispam.verdict.Scanner` with :func:`worker_scanner`: the server's rules, the
model, and its own connections to the shingles' counters and the learned words. It lives here,
not in ``app.py``, so that a worker imports only what deciding needs: unpickling a function of
``app`` imported the whole application (the blob store, guard, the HTTP side, ~300 modules and
~25 MB more in every worker) and made each worker's start seconds slower. The Redis and
PostgreSQL modules are imported only when a setting asks for them.

``app.py`` builds the server's own stores with the same functions (``shingler``,
``word_store``, ``redis_client``, ``words_backend``, ``postgres_pool``, ``secret``), so the
server and its workers open the same stores alike.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pochta import secretfile
from pochta.antispam.rules import ruleset as rules
from pochta.antispam.shingles.counters import CounterStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.counters.sqlite import SQLiteStore
from pochta.antispam.shingles.shingler import Shingler
from pochta.antispam.verdict import Analyzer, Scanner
from pochta.antispam.words import Words, WordStore
from pochta.antispam.words.bounded import BoundedReads
from pochta.antispam.words.sqlite import SQLiteWordStore
from pochta.config import Settings
from pochta.errors import ConfigError

if TYPE_CHECKING:
    from pydantic import SecretStr

    from pochta.antispam.model import booster as model
    from pochta.postgres.database import Postgres
    from pochta.redisconn import SyncClient

log = logging.getLogger("pochta")


def primary_postgres_stores(settings: Settings) -> list[str]:
    """The stores whose own ``backend`` setting says postgres (not those that follow them)."""
    backends = [
        ("mailbox.backend", settings.mailbox.backend),
        ("blobs.backend", settings.blobs.backend),
        ("valkyrie.backend", settings.valkyrie.backend),
    ]
    return [name for name, backend in backends if backend == "postgres"]


def words_backend(settings: Settings) -> Literal["sqlite", "postgres", "redis"]:
    """Where the learned words live (``antispam.learned_words_backend``; ``auto``: where the
    installation's other shared stores are, so that every loader learns one table)."""
    chosen = settings.antispam.learned_words_backend
    if chosen != "auto":
        return chosen
    if primary_postgres_stores(settings):
        return "postgres"
    if "redis" in (settings.guard.backend, settings.shingles.backend):
        return "redis"
    return "sqlite"


def redis_client(settings: Settings) -> SyncClient | None:
    """The one Redis client, from ``[redis]``, when guard, the shingle counters or the learned
    words use Redis (they share it); reached once here, so that wrong settings stop pochta at
    start."""
    if "redis" not in (settings.guard.backend, settings.shingles.backend, words_backend(settings)):
        return None
    from pochta.redisconn import connect

    return connect(settings.redis, ping=True)


def postgres_pool(settings: Settings, dsn: SecretStr | None = None) -> Postgres:
    """A pool on the ``[postgres]`` database (``pochta db``), or on ``dsn`` (a FileDB shard)
    with the same pool settings; ConfigError without a dsn."""
    from pochta.postgres.database import PoolSettings, Postgres

    p = settings.postgres
    if dsn is None and p.dsn is None:
        raise ConfigError(
            "postgres.dsn is not set: give the database as [postgres] dsn in the settings file"
            " or POCHTA_POSTGRES__DSN"
        )
    pool = PoolSettings(
        min_size=p.pool_min,
        max_size=p.pool_max,
        connect_timeout=p.connect_timeout,
        pool_timeout=p.pool_timeout,
        statement_timeout=p.statement_timeout,
        synchronous_commit=p.synchronous_commit,
        failover_timeout=p.failover_timeout,
        network_timeout=p.network_timeout,
        answer_timeout=p.answer_timeout,
    )
    where = dsn if dsn is not None else p.dsn
    assert where is not None
    return Postgres.connect(where.get_secret_value(), pool)


def shingler(settings: Settings, data: Path, redis: SyncClient | None) -> Shingler:
    """The shingles' counters (``[shingles]``): in Redis, or in ``<data>/shingles.sqlite3``."""
    s = settings.shingles
    store: CounterStore
    if s.backend == "redis":
        from pochta.antispam.shingles.counters.redis import RedisStore

        assert redis is not None
        store = RedisStore(redis, prefix=s.key_prefix)
    else:
        store = SQLiteStore(data / "shingles.sqlite3", synchronous="normal")
    return Shingler(
        Counters(
            store,
            flush_interval=s.flush_interval,
            shard_cells=s.shard_cells,
            max_cells=s.max_cells,
            wait_timeout=s.wait_timeout,
            cache_size=s.cache_size,
            cache_ttl=s.cache_ttl,
        )
    )


def word_store(
    settings: Settings,
    data: Path,
    pg: Postgres | None,
    redis: SyncClient | None,
    *,
    warn: bool = True,
) -> WordStore:
    """The learned words' store (``words_backend``). A table shared by several loaders must be
    keyed alike on each: without ``antispam.learned_words_key`` each machine keys it with its
    own ``<data_dir>/words-key``, and their words would not meet (said once, at start)."""
    backend = words_backend(settings)
    if backend == "sqlite":
        return SQLiteWordStore(data / "words.sqlite3")
    if warn and settings.antispam.learned_words_key is None:
        log.warning(
            "learned words are in %s, keyed with this machine's <data_dir>/words-key: set"
            " antispam.learned_words_key (POCHTA_ANTISPAM__LEARNED_WORDS_KEY), the same on every"
            " loader, or each loader's words stay its own",
            backend,
        )
    timeout = settings.antispam.learned_words_read_timeout
    if backend == "postgres":
        from pochta.antispam.words.postgres import PostgresWordStore

        assert pg is not None
        return BoundedReads(PostgresWordStore(pg.share()), timeout=timeout)
    from pochta.antispam.words.redis import RedisWordStore

    assert redis is not None
    return BoundedReads(RedisWordStore(redis), timeout=timeout)


def secret(settings: Settings, given: SecretStr | None, name: str) -> str:
    """A secret from settings, else kept in ``<data_dir>/<name>`` (made once, mode 0600, by
    whichever process comes first: ``pochta.secretfile``)."""
    if given is not None:
        value = given.get_secret_value()
        if len(value) < secretfile.MIN_LENGTH:
            raise ConfigError(
                f"{name.replace('-', '_')} must be at least {secretfile.MIN_LENGTH} characters long"
            )
        return value
    return secretfile.read_or_create(settings.data_dir / name)


def worker_scanner(settings: Settings, model_: model.Model | None) -> Scanner:
    """A worker process's decision half (``mailbox.intake.init_pool_process``): the server's rules,
    ``model_`` (``Model.for_workers``), and this process's own connections to the shingles'
    counters and the learned words (the same stores the server reads; each process buffers
    its own increments and writes them every ``flush_interval``, as ``serve --processes``'s
    processes do). No personal step: the recipients are the server's."""
    data = settings.data_dir.resolve()
    redis = redis_client(settings)
    backend = words_backend(settings)
    pg = postgres_pool(settings) if backend == "postgres" else None
    a = settings.antispam
    counters = shingler(settings, data, redis).counters
    counters.start()
    words = None
    tokens = model_.tokens if model_ is not None else None
    if a.learn_words and tokens is not None:
        key = secret(settings, a.learned_words_key, "words-key").encode()[:64]
        words = Words(
            word_store(settings, data, pg, redis, warn=False),
            shipped=tokens,
            key=key,
            flush_interval=a.learned_words_flush_seconds,
            max_words=a.learned_words_max,
            max_words_per_owner=a.learned_words_per_account_max,
        )
        words.start()
    return Scanner(
        words=words,
        learn_from_verdicts=a.learn_words_from_verdicts,
        rules_=rules.load(a.rules_file) if a.rules_file is not None else rules.default(),
        model=model_,
        counters=counters,
        analyzer=Analyzer(),  # unused: the worker's analyzer is the intake's
        authserv_id=a.authserv_id or settings.smtp.fqdn(),
        unscored="spam" if a.on_timeout == "spam" else "ham",
    )
