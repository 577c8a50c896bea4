"""The one place that builds pochta's services from settings, picks backends, and starts
and stops their background threads.

``build`` opens every service and starts no thread. ``Pochta.start`` starts the background
work of a server; only ``pochta serve`` calls it (the HTTP lifespan). CLI commands work in
the foreground and only close. ``Pochta.close`` stops and joins what ``start`` started, then
closes the services.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from pochta.antispam.model import booster as model
from pochta.antispam.rules import ruleset as rules
from pochta.antispam.shingles.counters import CounterStore
from pochta.antispam.shingles.counters.redis import RedisStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.counters.sqlite import SQLiteStore
from pochta.antispam.shingles.shingler import Shingler
from pochta.antispam.tokens import TokenTable
from pochta.antispam.verdict import Analyzer, Scanner
from pochta.blobs.filedb.sqlite import SQLiteFileDB
from pochta.blobs.pairs import SQLitePairDB
from pochta.blobs.store import BlobStore
from pochta.blobs.valkyrie import Valkyrie, ValkyrieConfig, ValkyrieRunner
from pochta.config import Settings
from pochta.errors import ConfigError, InvalidInput
from pochta.guard.backends import redis_client
from pochta.guard.backends.redislock import RedisLockBackend
from pochta.guard.backends.redisrate import RedisRateLimitBackend
from pochta.guard.backends.sqlitelock import SqliteLockBackend
from pochta.guard.backends.sqliterate import SqliteRateLimitBackend
from pochta.guard.lock import Locks
from pochta.guard.logins import LoginGuard
from pochta.guard.ratelimit import RateLimiter
from pochta.mailbox.intake import Intake, init_worker, make_analyzer
from pochta.mailbox.service import Mailbox
from pochta.mailbox.sqlite import SQLiteIndex
from pochta.mailbox.worker import DeletionWorker
from pochta.server.tls import ServerTLS
from pochta.types import DiskSpec, Limit, LockBackend, RateLimitBackend
from pochta.workers import WorkerPool, cores


@dataclass
class Pochta:
    settings: Settings
    blobs: BlobStore
    mailbox: Mailbox
    locks: Locks
    shingles: Shingler
    scanner: Scanner
    intake: Intake
    deletions: DeletionWorker
    tls: ServerTLS | None = None  # the listeners' certificate; None when [tls] has none
    _valkyrie: Valkyrie | None = field(default=None, init=False, repr=False)
    _scrubbers: ValkyrieRunner | None = field(default=None, init=False, repr=False)
    _started: bool = field(default=False, init=False, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)

    @property
    def valkyrie(self) -> Valkyrie:
        """The disks' scrubber, opened on first use (its state is a SQLite file that most
        commands never need)."""
        if self._valkyrie is None:
            self._valkyrie = Valkyrie.open(
                self.blobs,
                self.settings.data_dir.resolve(),
                ValkyrieConfig.from_settings(self.settings.valkyrie),
                locks=self.locks,
            )
        return self._valkyrie

    def start(self) -> None:
        """Start the background work of a server (once): the worker processes that parse and
        analyze letters; the shingle counters' flusher; the deletion worker, which first
        recovers what a crash left; and, when ``valkyrie.enabled``, Valkyrie, one thread per
        disk."""
        if self._started:
            return
        self._started = True
        self.intake.start()
        self.shingles.start()
        self.deletions.start()
        if self.settings.valkyrie.enabled:
            self._scrubbers = ValkyrieRunner(self.valkyrie)
            self._scrubbers.start()

    def close(self) -> None:
        """Stop what ``start`` started and join its threads, then close the services (once).
        The deletion worker and Valkyrie stop first (they hold leases and use the stores);
        the shingle counters then write what is buffered; the locks release their leases;
        the mailbox settles the journal into the blob store, which closes last."""
        if self._closed:
            return
        self._closed = True
        self.intake.close()
        self.deletions.stop()
        if self._scrubbers is not None:
            self._scrubbers.stop()
        if self._valkyrie is not None:
            self._valkyrie.close()
        self.shingles.close()  # writes what is buffered
        self.locks.close()
        self.mailbox.close()
        self.blobs.close()


def build(settings: Settings, *, tls: ServerTLS | None = None) -> Pochta:
    """Open every service. ``tls``: the listeners' certificate (``server_tls``), for a server;
    commands do without."""
    data = settings.data_dir.resolve()
    try:
        data.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create data directory {data}: {exc.strerror}") from exc
    sync = settings.blobs.sync
    filedb = SQLiteFileDB(data / "filedb.sqlite3", synchronous=sync)
    pairdb = SQLitePairDB(data / "pairdb.sqlite3", synchronous=sync)
    blobs = BlobStore(
        filedb,
        pairdb,
        placement_root=settings.blobs.placement_root,
        free_refresh_seconds=settings.blobs.free_refresh_seconds,
    )
    if settings.blobs.default_pair and not pairdb.list():
        disks = data / "disks"
        specs = (DiskSpec("local", str(disks / "0")), DiskSpec("local", str(disks / "1")))
        with contextlib.suppress(InvalidInput):  # another process made it at the same moment
            blobs.add_pair(*specs)
    locks, limits = _guard_backends(settings)
    g = settings.guard
    pochta_locks = Locks(locks, ttl=g.lock_ttl)
    logins = LoginGuard(
        RateLimiter(limits, _secret(settings, g.key_secret, "guard-secret"), tag="login"),
        per_ip=Limit("login-ip", g.login_ip_max, g.login_ip_period),
        per_account=Limit("login-account", g.login_account_max, g.login_account_period),
        per_ip_success=Limit("login-ip-ok", g.login_ip_success_max, g.login_ip_success_period),
    )
    shingler = _shingler(settings, data)
    scanner = _scanner(settings, shingler)
    index = SQLiteIndex(data / "mailbox.sqlite3", synchronous=sync)
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
    )
    return Pochta(
        settings=settings,
        blobs=blobs,
        mailbox=mailbox,
        locks=pochta_locks,
        shingles=shingler,
        scanner=scanner,
        intake=_intake(settings, scanner.analyzer),
        deletions=DeletionWorker(mailbox.deletions),
        tls=tls,
    )


def server_tls(settings: Settings) -> ServerTLS | None:
    """The listeners' certificate from ``[tls]`` (None: TLS is off); ConfigError when the
    files cannot be used."""
    return ServerTLS.from_settings(settings.tls)


def _shingler(settings: Settings, data: Path) -> Shingler:
    s = settings.shingles
    store: CounterStore
    if s.backend == "redis":
        store = RedisStore.connect(
            s.redis_url, s.cluster_nodes, prefix=s.key_prefix, timeout=s.timeout
        )
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


def _scanner(settings: Settings, shingler: Shingler) -> Scanner:
    a = settings.antispam
    rules_ = rules.load(a.rules_file) if a.rules_file is not None else rules.default()
    model_ = model.load(a.model_dir) if a.use_model else None
    if a.use_model and a.model_dir is not None and model_ is None:
        raise ConfigError(f"antispam.model_dir {a.model_dir} holds no model.cbm + model.json")
    return Scanner(
        rules_=rules_,
        model=model_,
        counters=shingler.counters,
        analyzer=analyzer(settings, model_.tokens if model_ is not None else None),
        authserv_id=a.authserv_id or settings.smtp.fqdn(),
    )


def analyzer(settings: Settings, tokens: TokenTable | None = None) -> Analyzer:
    """The analysis half of the verdict, as each worker process builds it; ``tokens``: the
    model's token table (the words' statistic the model reads)."""
    return make_analyzer(settings.antispam.dns, settings.antispam.budget_seconds, tokens)


def _intake(settings: Settings, analyzer: Analyzer) -> Intake:
    """Parsing and analysis in ``antispam.workers`` processes (default: one per core; 0: in
    the server's own threads). Nothing starts before ``Pochta.start``."""
    a = settings.antispam
    processes = cores() if a.workers is None else a.workers
    pool = None
    if processes:
        pool = WorkerPool(
            processes,
            initializer=init_worker,
            initargs=(a.dns, a.budget_seconds, analyzer.tokens),
            max_pending=max(64, 8 * processes),
            name="pochta-letters",
        )
    return Intake(
        analyzer, pool, inline_limit=settings.mailbox.inline_limit, deadline=a.deadline_seconds
    )


def _guard_backends(settings: Settings) -> tuple[LockBackend, RateLimitBackend]:
    g = settings.guard
    if g.backend == "redis":
        client = redis_client(g.redis_url, cluster=g.redis_cluster, timeout=g.redis_timeout)
        return RedisLockBackend(client), RedisRateLimitBackend(client)
    data = settings.data_dir.resolve()
    return SqliteLockBackend(data / "guard-locks.sqlite3"), SqliteRateLimitBackend(
        data / "guard-limits.sqlite3"
    )


def _secret(settings: Settings, given: SecretStr | None, name: str) -> str:
    """A secret from settings, else kept in ``<data_dir>/<name>`` (created once, mode 0600)."""
    if given is not None:
        value = given.get_secret_value()
        if len(value) < 16:
            raise ConfigError(f"{name.replace('-', '_')} must be at least 16 characters long")
        return value
    path = settings.data_dir / name
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    value = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    return value


def service_token(settings: Settings) -> str:
    """The blob API's bearer token: from settings, else kept in ``<data>/service-token``
    (created once, mode 0600)."""
    if settings.service_token is not None:
        token = settings.service_token.get_secret_value()
        if len(token) < 16:
            raise ConfigError("service_token must be at least 16 characters long")
        return token
    path = settings.data_dir / "service-token"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def token_file(settings: Settings) -> Path:
    return settings.data_dir / "service-token"
