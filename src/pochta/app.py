"""The one place that builds pochta's services from settings, picks backends, and starts
and stops their background threads.

``build`` opens every service and starts no thread. ``Pochta.start`` starts the background
work of a server; only ``pochta serve`` calls it (the HTTP lifespan). CLI commands work in
the foreground and only close. ``Pochta.close`` stops and joins what ``start`` started, then
closes the services.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pochta.antispam.auth import replay
from pochta.antispam.auth.asyncdns import DnsAsyncResolver, SharedDns
from pochta.antispam.auth.authenticator import Authenticator
from pochta.antispam.auth.breaker import Breaker
from pochta.antispam.model import booster as model
from pochta.antispam.model.store import MODELS_DIR, LiveModel, ModelStore, Switched
from pochta.antispam.model.store.directory import DirectoryModelStore
from pochta.antispam.model.store.memory import MemoryModelStore
from pochta.antispam.rules import ruleset as rules
from pochta.antispam.shingles.shingler import Shingler
from pochta.antispam.tokens import TokenTable
from pochta.antispam.verdict import Analyzer, Scanner
from pochta.antispam.words import Words
from pochta.antispam.words.personal import Personal, PersonalRule
from pochta.blobs.evacuations import Evacuations
from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.blobs.nodes import DiskFactory
from pochta.blobs.nodes.client import NodeTimeouts, client_context
from pochta.blobs.pairs.sqlite import SQLitePairDB
from pochta.blobs.store import BlobStore
from pochta.blobs.valkyrie import (
    STATE_FILE,
    StateStore,
    Valkyrie,
    ValkyrieConfig,
    ValkyrieRunner,
    ValkyrieState,
)
from pochta.budget import Budget
from pochta.config import HttpSettings, ImapSettings, Settings, SmtpSettings
from pochta.cpupool import CpuPool, cores
from pochta.errors import ConfigError, InvalidInput
from pochta.executors import Executors
from pochta.guard.anvil import Gate, Limits
from pochta.guard.anvil.mapped import MappedConnectionTable
from pochta.guard.devices import Devices
from pochta.guard.known import KnownClients
from pochta.guard.known.redis import RedisKnownClients
from pochta.guard.known.sqlite import SqliteKnownClients
from pochta.guard.lock import Locks
from pochta.guard.lock.redis import RedisFence, RedisLockBackend
from pochta.guard.lock.sqlite import SqliteFence, SqliteLockBackend
from pochta.guard.logins import LoginGuard
from pochta.guard.passwords import Cost, Passwords
from pochta.guard.ratelimit import RateLimiter
from pochta.guard.ratelimit.redis import RedisRateLimitBackend
from pochta.guard.ratelimit.sqlite import SqliteRateLimitBackend
from pochta.health import HealthCheck
from pochta.history import Recorder, SQLiteHistory
from pochta.mailbox.deciding import postgres_pool as postgres_pool  # re-exported (cli.db)
from pochta.mailbox.deciding import primary_postgres_stores, worker_scanner
from pochta.mailbox.deciding import redis_client as _redis
from pochta.mailbox.deciding import secret as _secret
from pochta.mailbox.deciding import shingler as _shingler
from pochta.mailbox.deciding import word_store as _word_store
from pochta.mailbox.deciding import words_backend as words_backend  # re-exported
from pochta.mailbox.deletionjob import DeletionJob
from pochta.mailbox.index.sqlite import SQLiteIndex
from pochta.mailbox.intake import (
    POOL_MODULES,
    AnalysisSettings,
    Decider,
    Intake,
    close_pool_process,
    init_pool_process,
    make_analyzer,
)
from pochta.mailbox.lists import SenderListService
from pochta.mailbox.lists.sqlite import SQLiteSenderLists
from pochta.mailbox.queuedb import QueueStore
from pochta.mailbox.queuerunner import QueueRunner
from pochta.mailbox.service import Mailbox
from pochta.netaddr import parse_networks
from pochta.redisconn import SyncClient
from pochta.tls import ServerTLS
from pochta.types import (
    Activity,
    DiskSpec,
    Fence,
    FileDB,
    HistoryStore,
    KnownClientsBackend,
    Limit,
    LockBackend,
    MailIndex,
    PairDB,
    RateLimitBackend,
    Schedule,
    SenderLists,
    StorageSample,
)

if TYPE_CHECKING:
    from pochta.postgres.database import Postgres

log = logging.getLogger("pochta")

# The PostgreSQL stores (and psycopg) are imported where a setting asks for them: every
# `pochta` command builds the services, and most installations never load psycopg.


@dataclass
class Pochta:
    settings: Settings
    blobs: BlobStore
    mailbox: Mailbox
    locks: Locks
    shingles: Shingler
    scanner: Scanner
    intake: Intake
    deletion_job: DeletionJob
    history: Recorder
    evacuations: Evacuations
    budget: Budget  # the listeners' bytes in memory for clients, in all (memory_budget)
    executors: Executors  # the servers' thread pools for blocking calls (pochta.executors)
    health: HealthCheck  # what /healthz reports, checked in the background
    redis: SyncClient | None = None  # the one Redis client of guard and shingles, if they use it
    postgres: Postgres | None = None  # the [postgres] pool, when a store lives there
    fence: Fence | None = None  # where the single-run jobs' leaders admit their tokens
    tls: ServerTLS | None = None  # the listeners' certificate; None when [tls] has none
    models: ModelStore = field(default_factory=MemoryModelStore)  # model versions, live pointer
    live_model: LiveModel | None = None  # follows the live version (None: model_dir pins one)
    queue: QueueRunner | None = None  # the incoming queue (smtp.answer = "queued"), from start
    _valkyrie: Valkyrie | None = field(default=None, init=False, repr=False)
    _scrubbers: ValkyrieRunner | None = field(default=None, init=False, repr=False)
    _started: bool = field(default=False, init=False, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)

    @property
    def valkyrie(self) -> Valkyrie:
        """The disks' scrubber, opened on first use (its state is a SQLite file that most
        commands never need)."""
        if self._valkyrie is None:
            state: StateStore
            if self.settings.valkyrie.backend == "postgres":
                from pochta.blobs.valkyrie.state.postgres import PostgresValkyrieState

                assert self.postgres is not None
                state = PostgresValkyrieState(self.postgres.share())
            else:
                state = ValkyrieState(self.settings.data_dir.resolve() / STATE_FILE)
            self._valkyrie = Valkyrie(
                self.blobs,
                state,
                ValkyrieConfig.from_settings(self.settings.valkyrie),
                locks=self.locks,
            )
        return self._valkyrie

    def start(self) -> None:
        """Start the background work of a server (once): the worker processes that parse and
        analyze letters; the shingle counters' flusher; the deletion job, which first
        recovers what a crash left; and, when ``valkyrie.enabled``, Valkyrie, one thread per
        local disk. The deletion job and Valkyrie are single-run jobs: among every process
        sharing the locks one leads each (``pochta.guard.singleton``)."""
        if self._started:
            return
        self._started = True
        s = self.settings.smtp
        if s.enabled and s.answer == "queued":
            # this process's slot of the queue (a lock held while it runs): a server's only
            self.queue = QueueRunner(
                QueueStore(self.settings.data_dir.resolve() / "queue", inline=s.spool_threshold),
                deliveries=s.queue_deliveries,
                retry_first=s.queue_retry_seconds,
                retry_most=s.queue_retry_max_seconds,
                max_letters=s.queue_max_letters,
                max_bytes=s.queue_max_bytes,
                was_delivered=self.mailbox.was_queued,
                forget=self.mailbox.forget_queued,
                remember_seconds=s.queue_remember_days * 86400,
            )
            self.health.watch_queue(self.queue.watch, s.queue_stalled_seconds)
        self.health.start()  # one check now: /healthz is ready when the listeners are
        self.intake.start()
        self.shingles.start()
        if self.scanner.words is not None:
            self.scanner.words.start()
        self.deletion_job.start()
        self.history.start()  # samples the store's size, writes the hourly tallies
        if self.live_model is not None:
            self.live_model.start()  # reads the live pointer every model_check_seconds
        if self.settings.valkyrie.enabled:
            self._scrubbers = ValkyrieRunner(self.valkyrie, fence=self.fence)
            self._scrubbers.start()

    def close(self) -> None:
        """Stop what ``start`` started and join its threads, then close the services (once).
        The deletion job and Valkyrie stop first (they hold leases and use the stores);
        the shingle counters then write what is buffered; the locks release their leases;
        the mailbox settles the journal into the blob store, which closes last."""
        if self._closed:
            return
        self._closed = True
        self.health.stop()
        if self.live_model is not None:
            self.live_model.stop()
        self.intake.close()
        self.executors.close()  # the listeners have stopped: nothing new comes
        if self.queue is not None:
            self.queue.close()  # what was not delivered stays queued for the next start
        self.evacuations.stop()  # each stops at its next file; resumable
        self.deletion_job.stop()
        if self._scrubbers is not None:
            self._scrubbers.stop()
        if self._valkyrie is not None:
            self._valkyrie.close()
        self.shingles.close()  # writes what is buffered
        if self.scanner.words is not None:
            self.scanner.words.close()  # writes what is buffered
        self.history.close()  # writes the tallies buffered
        self.locks.close()
        if isinstance(self.fence, SqliteFence):
            self.fence.close()
        if self.mailbox.users.logins is not None:
            self.mailbox.users.logins.close()
        self.mailbox.close()
        self.blobs.close()
        if self.redis is not None:
            self.redis.close()
        self.models.close()
        if self.postgres is not None:
            self.postgres.close()


def build(settings: Settings, *, tls: ServerTLS | None = None) -> Pochta:
    """Open every service. ``tls``: the listeners' certificate (``server_tls``), for a server;
    commands do without."""
    data = settings.data_dir.resolve()
    try:
        data.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create data directory {data}: {exc.strerror}") from exc
    nodes = disk_factory(settings)  # the nodes' TLS files: checked before anything is opened
    redis_client = _redis(settings)  # first: wrong [redis] settings stop us before any open
    sync = settings.blobs.sync
    if settings.postgres.filedb_shards and settings.blobs.backend != "postgres":
        raise ConfigError(
            "postgres.filedb_shards is set but blobs.backend is not postgres: FileDB's"
            ' shards are PostgreSQL databases (set blobs.backend = "postgres")'
        )
    pg = _postgres(settings)
    filedb: FileDB
    pairdb: PairDB
    if pg is not None and settings.blobs.backend == "postgres":
        from pochta.blobs.filedb.postgres import PostgresFileDB
        from pochta.blobs.pairs.postgres import PostgresPairDB

        p = settings.postgres
        if p.filedb_shards:
            from pochta.blobs.filedb.sharded import ShardedFileDB

            try:
                if (
                    p.dsn not in p.filedb_shards
                    and pg.query("SELECT EXISTS (SELECT 1 FROM pochta.filedb_live)")[0][0]
                ):
                    raise ConfigError(
                        "postgres.filedb_shards is set, but FileDB records are in dsn's database"
                        " (an installation that ran without shards): moving them onto the"
                        " shards is not built"
                    )
                shards = _filedb_shards(settings)
            except BaseException:
                pg.close()
                raise
            filedb = ShardedFileDB(
                [
                    PostgresFileDB(shard, batch_max=p.batch_max, leaders=p.batch_leaders)
                    for shard in shards
                ]
            )
        else:
            filedb = PostgresFileDB(pg.share(), batch_max=p.batch_max, leaders=p.batch_leaders)
        pairdb = PostgresPairDB(pg.share())
    else:
        filedb = SQLiteFileDB(data / "filedb.sqlite3", synchronous=sync)
        pairdb = SQLitePairDB(data / "pairdb.sqlite3", synchronous=sync)
    blobs = BlobStore(
        filedb,
        pairdb,
        disk_factory=nodes,
        placement_root=settings.blobs.placement_root,
        free_refresh_seconds=settings.blobs.free_refresh_seconds,
    )
    if settings.blobs.default_pair and not pairdb.list():
        disks = data / "disks"
        specs = (DiskSpec("local", str(disks / "0")), DiskSpec("local", str(disks / "1")))
        with contextlib.suppress(InvalidInput):  # another process made it at the same moment
            blobs.add_pair(*specs)
    locks, limits, fence, known = _guard_backends(settings, redis_client)
    g = settings.guard
    pochta_locks = Locks(locks, ttl=g.lock_ttl)
    guard_secret = _secret(settings, g.key_secret, "guard-secret")
    remember_for = g.login_known_days * 86400
    logins = LoginGuard(
        RateLimiter(limits, guard_secret, tag="login"),
        KnownClients(known, guard_secret, remember_for=remember_for, tag="login"),
        per_ip=Limit("login-ip", g.login_ip_max, g.login_ip_period),
        per_client=Limit("login-client", g.login_client_max, g.login_client_period),
        per_account=Schedule(
            "login-account-slots",
            free=g.login_account_free,
            checks=g.login_account_checks,
            period=g.login_account_period,
            max_wait=g.login_max_wait,
        ),
        per_ip_success=Limit("login-ip-ok", g.login_ip_success_max, g.login_ip_success_period),
        devices=Devices(guard_secret, remember_for),
    )
    shingler = _shingler(settings, data, redis_client)
    models = model_store(settings, pg)
    scanner, analysis, live_model = _scanner(settings, shingler, data, models, pg, redis_client)
    index: MailIndex
    lists_store: SenderLists
    if pg is not None and settings.mailbox.backend == "postgres":
        from pochta.mailbox.index.postgres import PostgresIndex
        from pochta.mailbox.lists.postgres import PostgresSenderLists

        index = PostgresIndex(pg.share())
        lists_store = PostgresSenderLists(pg.share())
    else:
        sqlite_index = SQLiteIndex(data / "mailbox.sqlite3", synchronous=sync)
        index = sqlite_index
        lists_store = SQLiteSenderLists(sqlite_index.database)  # a table of the same file
    history_store: HistoryStore
    if history_backend(settings) == "postgres":
        from pochta.history.postgres import PostgresHistory

        assert pg is not None
        history_store = PostgresHistory(pg.share())
    else:
        history_store = SQLiteHistory(data / "history.sqlite3")
    history = Recorder(
        history_store,
        sample_seconds=settings.web.sample_seconds,
        keep_seconds=settings.web.history_days * 86400,
    )
    sender_lists = SenderListService(lists_store, max_entries=settings.mailbox.sender_list_max)
    mailbox = Mailbox(
        index,
        blobs,
        inline_limit=settings.mailbox.inline_limit,
        max_message_size=settings.smtp.max_message_size,
        session_ttl=settings.mailbox.session_ttl_seconds,
        pending_grace=settings.mailbox.pending_grace_seconds,
        logins=logins,
        locks=pochta_locks,
        shingler=shingler,
        scanner=scanner if settings.antispam.enabled else None,
        activity=history,
        lists=sender_lists,
        forget=[
            scanner.words.forget
            if scanner.words is not None
            else _forget_words(settings, data, pg, redis_client),
            sender_lists.forget,
        ],
        passwords=Passwords(
            Cost(
                settings.guard.password_time_cost,
                settings.guard.password_memory_kib,
                settings.guard.password_lanes,
            )
        ),
    )
    history.sampler = lambda: storage_sample(mailbox)
    h = settings.http
    executors = Executors.start(
        lookups=settings.smtp.lookup_threads, deliveries=settings.smtp.delivery_threads
    )
    deciding = decider(settings, scanner.model) if settings.antispam.enabled else None
    intake = _intake(settings, analysis, executors, scanner.authserv_id, history, deciding)
    if intake.decides:
        scanner.teacher = intake.teach
    if live_model is not None:
        live_model.on_switch = functools.partial(
            switch_model, scanner, intake, analysis, settings=settings
        )
    return Pochta(
        settings=settings,
        blobs=blobs,
        mailbox=mailbox,
        locks=pochta_locks,
        shingles=shingler,
        scanner=scanner,
        intake=intake,
        deletion_job=DeletionJob(mailbox.deletions, pochta_locks, fence=fence),
        history=history,
        evacuations=Evacuations(blobs, pochta_locks),
        budget=Budget(settings.memory_budget),
        executors=executors,
        health=HealthCheck(
            blobs.pairs, interval=h.health_interval_seconds, stale_after=h.health_stale_seconds
        ),
        redis=redis_client,
        postgres=pg,
        fence=fence,
        tls=tls,
        models=models,
        live_model=live_model,
    )


def storage_sample(mailbox: Mailbox) -> StorageSample:
    """The store's size now, as the admin pages chart it."""
    s = mailbox.stats()
    return StorageSample(
        time.time(),
        s["letters"],
        s["logical_bytes"],
        s["skeleton_bytes"] + s["blob_bytes"],
        s["physical_bytes"],
    )


def _postgres_stores(settings: Settings, *, followers: bool = True) -> list[str]:
    """The stores whose ``backend`` setting says postgres (``followers``: with the learned
    words and the history, whose ``auto`` follows the others)."""
    backends = primary_postgres_stores(settings)
    if followers:
        backends += [
            name
            for name, backend in (
                ("antispam.model_store", settings.antispam.model_store),
                ("antispam.learned_words_backend", words_backend(settings)),
                ("web.history_backend", history_backend(settings)),
            )
            if backend == "postgres"
        ]
    return backends


def history_backend(settings: Settings) -> Literal["sqlite", "postgres"]:
    """Where the admin pages' history lives (``web.history_backend``; ``auto``: in PostgreSQL
    when another store is, so that the pages show every loader's events)."""
    chosen = settings.web.history_backend
    if chosen != "auto":
        return chosen
    return "postgres" if _postgres_stores(settings, followers=False) else "sqlite"


def _postgres(settings: Settings) -> Postgres | None:
    """The pool every store kept in PostgreSQL shares, when one is (its schema migrated on
    start when ``postgres.migrate_on_start``, else checked); None when none is."""
    users = _postgres_stores(settings)
    if not users:
        return None
    if settings.postgres.dsn is None:
        raise ConfigError(
            f"postgres.dsn is not set, and {', '.join(users)} ="
            " postgres: give the database as [postgres] dsn or POCHTA_POSTGRES__DSN"
        )
    from pochta.postgres import migrate

    pg = postgres_pool(settings)
    try:
        if settings.postgres.migrate_on_start:
            migrate.upgrade(pg)
        else:
            migrate.check(pg)
    except BaseException:
        pg.close()
        raise
    return pg


def _filedb_shards(settings: Settings) -> list[Postgres]:
    """A pool on each of ``postgres.filedb_shards``, its schema checked (or migrated on
    start) as the main database's is; all closed again when one fails."""
    from pochta.postgres import migrate

    pools: list[Postgres] = []
    shards = settings.postgres.filedb_shards
    try:
        for i, dsn in enumerate(shards):
            pools.append(pool := postgres_pool(settings, dsn))
            if settings.postgres.migrate_on_start:
                migrate.upgrade(pool)
            else:
                migrate.check(pool)
            pool.execute(
                "INSERT INTO pochta.filedb_shard (shard, shards) VALUES (%s, %s)"
                " ON CONFLICT (one) DO NOTHING",
                (i, len(shards)),
            )
            ((was, of),) = pool.query("SELECT shard, shards FROM pochta.filedb_shard")
            if (was, of) != (i, len(shards)):
                raise ConfigError(
                    f"postgres.filedb_shards: {pool.where} is FileDB shard {was} of {of}, but"
                    f" the list makes it shard {i} of {len(shards)}: the number and order of"
                    " the shards fix where each record lives; give the list as it was"
                    " (moving records between shards is not built)"
                )
    except BaseException:
        for pool in pools:
            pool.close()
        raise
    return pools


def model_store(settings: Settings, pg: Postgres | None) -> ModelStore:
    """Where model versions and the live pointer are kept (``antispam.model_store``)."""
    if pg is not None and settings.antispam.model_store in ("auto", "postgres"):
        from pochta.antispam.model.store.postgres import PostgresModelStore

        return PostgresModelStore(pg.share())
    return DirectoryModelStore(settings.data_dir.resolve() / MODELS_DIR)


def disk_factory(settings: Settings) -> DiskFactory:
    """Opens the disks of the pairs: local directories, and WebDAV nodes with the timeouts,
    pool size and TLS files of ``[blobs]`` (read here, once: ConfigError when they cannot be
    used; the BlobStore closes the factory)."""
    b = settings.blobs
    timeouts = NodeTimeouts(b.node_connect_timeout, b.node_read_timeout, b.node_pool_size)
    tls = None
    if b.node_ca_file is not None or b.node_cert_file is not None:
        tls = client_context(b.node_ca_file, b.node_cert_file, b.node_key_file)
    return DiskFactory(timeouts, free_max_age=b.node_free_max_age, tls=tls)


def server_tls(settings: Settings) -> ServerTLS | None:
    """The listeners' certificate from ``[tls]`` (None: TLS is off); ConfigError when the
    files cannot be used."""
    return ServerTLS.from_settings(settings.tls)


def connection_gate(settings: Settings) -> Gate:
    """The connection limits of a server (``[connections]`` and each protocol's
    ``max_connection*`` settings; LMTP has SMTP's), counted in ``<data_dir>/connections``
    with every other process of this server (``serve --processes``); the caller closes it."""
    c = settings.connections

    def limits(s: SmtpSettings | ImapSettings | HttpSettings) -> Limits:
        return Limits(
            per_ip=s.max_connections_per_ip,
            rate_per_ip=s.max_connection_rate_per_ip,
            per_network=s.max_connections_per_network,
            rate_per_network=s.max_connection_rate_per_network,
            total=s.max_connections,
            rate_total=s.max_connection_rate,
        )

    secret = _secret(settings, settings.guard.key_secret, "guard-secret").encode()
    table = MappedConnectionTable(settings.data_dir.resolve() / "connections")
    smtp = limits(settings.smtp)
    return Gate(
        table,
        {"smtp": smtp, "lmtp": smtp, "imap": limits(settings.imap), "http": limits(settings.http)},
        secret=secret,
        trusted=parse_networks(c.trusted_networks),
        period=c.rate_period,
        ipv4_prefix=c.ipv4_prefix,
        ipv6_prefix=c.ipv6_prefix,
        clock=time.monotonic,  # the same in every process of the host (CLOCK_MONOTONIC)
    )


def _scanner(
    settings: Settings,
    shingler: Shingler,
    data: Path,
    models: ModelStore,
    pg: Postgres | None = None,
    redis_client: SyncClient | None = None,
) -> tuple[Scanner, AnalysisSettings, LiveModel | None]:
    """The scanner, what each worker's analyzer is built from (the same as its own), and,
    unless ``model_dir`` pins a model, what follows the live version in ``models``."""
    a = settings.antispam
    rules_ = rules.load(a.rules_file) if a.rules_file is not None else rules.default()
    model_ = model.load(a.model_dir) if a.use_model else None
    if a.use_model and a.model_dir is not None and model_ is None:
        raise ConfigError(f"antispam.model_dir {a.model_dir} holds no model.cbm + model.json")
    live_model = None
    if a.use_model and a.model_dir is None:
        live_model = LiveModel(  # on_switch: set by build, once the intake exists
            models, model_, lambda switched: None, interval=a.model_check_seconds
        )
        model_ = live_model.initial()
    tokens = model_.tokens if model_ is not None else None
    words = None
    key = b""
    if a.learn_words and tokens is not None:
        key = _secret(settings, a.learned_words_key, "words-key").encode()[:64]  # blake2b: <= 64
        words = Words(
            _word_store(settings, data, pg, redis_client),
            shipped=tokens,
            key=key,
            flush_interval=a.learned_words_flush_seconds,
            max_words=a.learned_words_max,
            max_words_per_owner=a.learned_words_per_account_max,
        )
    config = analysis_settings(settings, tokens, key)
    scanner = Scanner(
        words=words,
        learn_from_verdicts=a.learn_words_from_verdicts,
        rules_=rules_,
        model=model_,
        counters=shingler.counters,
        analyzer=make_analyzer(config),
        authserv_id=a.authserv_id or settings.smtp.fqdn(),
        unscored="spam" if a.on_timeout == "spam" else "ham",
        personal=(
            Personal(
                words,
                PersonalRule(
                    a.personal_min_spam, a.personal_min_ham, a.personal_weight, a.personal_bound
                ),
            )
            if words is not None and a.personal_words
            else None
        ),
    )
    return scanner, config, live_model


def decider(settings: Settings, model_: model.Model | None) -> Decider:
    """What builds each worker process's scanner (picklable: the settings and the model
    without its CatBoost booster)."""
    light = model_.for_workers() if model_ is not None else None
    return functools.partial(worker_scanner, settings, light)


def switch_model(
    scanner: Scanner,
    intake: Intake,
    config: AnalysisSettings,
    switched: Switched,
    settings: Settings | None = None,
) -> None:
    """A newly promoted model in this loader: the scanner's model, the shipped word table the
    learned words are read with, the analyzers' token table (the server's own, and every
    worker process's: the pool restarts each worker with the new table, after its task). Each
    attribute is replaced whole, so a letter being scored reads the old or the new one; a
    letter analyzed by a worker not yet restarted has the old table's word score."""
    new = switched.model
    config = dataclasses.replace(config, tokens=new.tokens if new is not None else None)
    if scanner.words is not None:  # first: keyed and ranked before the analyzers read it
        scanner.words.use(config.tokens)
    scanner.analyzer = make_analyzer(config)
    intake.analyzer = make_analyzer(config, deferred=True)
    if intake.pool is not None:
        deciding = settings is not None and intake.decides
        initargs = (config, decider(settings, new)) if deciding and settings else (config,)
        intake.pool.reinitialize(initargs)
    scanner.model = new
    log.info("model switched to %s", switched.version or "the shipped one")


def _forget_words(
    settings: Settings, data: Path, pg: Postgres | None, redis_client: SyncClient | None
) -> Callable[[int], None]:
    """What forgets an account's learned words in a loader that does not learn (learn_words
    off, or no model): what the account taught before is still its data. The store is opened
    for the call (an embedded file only when there is one)."""

    def forget(owner: int) -> None:
        if words_backend(settings) == "sqlite" and not (data / "words.sqlite3").exists():
            return
        store = _word_store(settings, data, pg, redis_client, warn=False)
        try:
            store.forget(owner)
        finally:
            store.close()

    return forget


def analysis_settings(
    settings: Settings, tokens: TokenTable | None = None, word_key: bytes = b""
) -> AnalysisSettings:
    """What each process's analyzer is built from; ``tokens``: the model's token table (the
    words' statistic the model reads); ``word_key``: the learned words' hash key."""
    a = settings.antispam
    return AnalysisSettings(
        a.dns,
        a.budget_seconds,
        tokens,
        a.dns_server,
        a.dns_timeout,
        a.dns_lifetime,
        word_key,
        tuple(a.trusted_forwarders),
    )


def analyzer(settings: Settings, tokens: TokenTable | None = None) -> Analyzer:
    """An analyzer built as the workers build theirs (without the learned words' key)."""
    return make_analyzer(analysis_settings(settings, tokens))


def authenticator(settings: Settings, checks: Executor | None) -> Authenticator | None:
    """SPF, DKIM and DMARC of received letters, asked by the server itself over one shared,
    cached DNS (``antispam.dns = "system"``); None when DNS checks are off. ``checks``: the
    pool whose threads run SPF's and DMARC's runs (``Executors.checks``; None: the event
    loop itself, for tests)."""
    a = settings.antispam
    if a.dns != "system":
        return None
    upstream = DnsAsyncResolver(
        nameservers=[a.dns_server] if a.dns_server else None, cache_size=a.dns_cache_size
    )
    dns = SharedDns(
        upstream,
        timeout=a.dns_timeout,
        max_in_flight=a.dns_max_in_flight,
        max_per_zone=a.dns_max_in_flight_per_zone,
        breaker=Breaker(pause=a.dns_down_seconds),
    )
    run = replay.in_executor(checks) if checks is not None else None
    return Authenticator(dns, lifetime=a.dns_lifetime, run=run)


def _intake(
    settings: Settings,
    analysis: AnalysisSettings,
    executors: Executors,
    authserv_id: str,
    activity: Activity,
    deciding: Decider | None = None,
) -> Intake:
    """Parsing and analysis in ``antispam.pool_processes`` processes (default: one per core; 0: in
    the server's own threads), authentication by the server. Nothing starts before
    ``Pochta.start``. ``authserv_id``: the letters delivered lose the Authentication-Results
    fields that carry it; ``activity`` hears of the letters that could not be scored.
    ``deciding``: each worker builds its scanner with it, and decides and counts there."""
    a = settings.antispam
    processes = cores() if a.pool_processes is None else a.pool_processes
    pool = None
    if processes:
        pool = CpuPool(
            processes,
            initializer=init_pool_process,
            initargs=(analysis,) if deciding is None else (analysis, deciding),
            max_pending=max(64, 8 * processes),
            name="pochta-letters",
            finalizer=close_pool_process,
            preload=POOL_MODULES,
        )
    return Intake(
        make_analyzer(analysis, deferred=True),
        pool,
        inline_limit=settings.mailbox.inline_limit,
        deadline=a.deadline_seconds,
        authserv_id=authserv_id,
        on_timeout=a.on_timeout,
        activity=activity,
        auth=authenticator(settings, executors.checks),
        local=executors.local,
        decides=deciding is not None,
    )


def _guard_backends(
    settings: Settings, redis_client: SyncClient | None
) -> tuple[LockBackend, RateLimitBackend, Fence, KnownClientsBackend]:
    if settings.guard.backend == "redis":
        assert redis_client is not None
        return (
            RedisLockBackend(redis_client),
            RedisRateLimitBackend(redis_client),
            RedisFence(redis_client),
            RedisKnownClients(redis_client),
        )
    data = settings.data_dir.resolve()
    return (
        SqliteLockBackend(data / "guard-locks.sqlite3"),
        SqliteRateLimitBackend(data / "guard-limits.sqlite3"),
        SqliteFence(data / "guard-locks.sqlite3"),
        SqliteKnownClients(data / "guard-known.sqlite3"),
    )


def service_token(settings: Settings) -> str:
    """The blob API's bearer token: from settings, else kept in ``<data>/service-token``
    (created once, mode 0600)."""
    return _secret(settings, settings.service_token, "service-token")


def web_secret(settings: Settings) -> str:
    """The key of the web pages' CSRF tokens: from settings, else kept in
    ``<data>/web-secret`` (created once, mode 0600)."""
    return _secret(settings, settings.web.secret, "web-secret")


def token_file(settings: Settings) -> Path:
    return settings.data_dir / "service-token"
