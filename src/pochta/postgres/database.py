"""One PostgreSQL database behind a psycopg_pool connection pool, shared by pochta's stores.

Connections are in autocommit mode: a single statement (a FileDB step is one function call)
is its own transaction; ``transaction`` runs several statements as one, retried when the
server rolled it back for a deadlock or a serialization failure (nothing of it was written,
so running it again is safe). Any other failure is a ``StorageError`` naming the server
(host, port, database, user) and never the DSN itself, which may hold a password.

Several servers, one of them the primary (PostgreSQL under Patroni, README's "Several
machines"): the DSN names them all with ``target_session_attrs=read-write``, and each new
connection goes to whichever takes writes. When the primary is lost, the pool's connections
break; a failed reconnection is given up after ``RECONNECT_TIMEOUT`` (psycopg_pool's backoff
would otherwise wait 1, 2, 4, 8... s between tries and find the promoted standby late) and,
while callers wait for a connection, a new one starts at once. A step whose answer was lost
(the connection broke after the statement was sent: it may or may not have been committed)
is for its caller to settle; ``until_answered`` runs a step that is safe to run again until
it gets an answer, for up to ``failover_timeout`` seconds.

A server that is frozen rather than gone (SIGSTOP, a paused VM: its kernel still answers TCP,
so ``network_timeout`` does not fire) would keep a step waiting for as long as it is frozen:
each use of a pooled connection (a statement, or a transaction) has ``answer_timeout``
seconds, after which ``pochta.postgres.deadline`` shuts its socket down. The step fails as a
lost answer would (the server may still run it when it wakes), and the connection is
discarded.

Several stores share one pool: each ``share()`` is matched by one ``close()``, and the last
close closes the pool.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from pochta.errors import ConfigError, StorageError
from pochta.postgres.deadline import Watchdog

log = logging.getLogger("pochta.postgres")

T = TypeVar("T")
SynchronousCommit = Literal["on", "remote_apply", "remote_write", "local", "off"]

RETRIES = 5  # a transaction the server rolled back (deadlock, serialization) runs again
RECONNECT_TIMEOUT = 2.0  # seconds the pool retries one failed reconnection before a new one
LOST_ANSWER_PAUSE = 0.2  # seconds between tries of a step whose answer was lost


@dataclass(frozen=True, slots=True)
class PoolSettings:
    min_size: int = 1
    max_size: int = 10
    connect_timeout: float = 10.0  # seconds to open one connection
    pool_timeout: float = 30.0  # seconds to wait for a free connection
    statement_timeout: float = 30.0  # seconds one statement may run; 0: no limit
    synchronous_commit: SynchronousCommit = "on"
    failover_timeout: float = 30.0  # seconds a step whose answer was lost is tried again
    network_timeout: float = 10.0  # seconds a silent server is waited for (TCP); 0: the kernel's
    answer_timeout: float = 60.0  # seconds one use of a connection may take; 0: no limit


def network_options(dsn_parts: dict[str, Any], timeout: float) -> dict[str, str]:
    """libpq's TCP options that bound how long a connection waits for a server that has gone
    silent (its machine lost, or a firewall dropping packets: no reset ever comes):
    ``tcp_user_timeout`` (what was sent unacknowledged for ``timeout`` seconds breaks the
    connection) and keepalives (an idle connection, or one waiting for an answer, is probed
    after ``timeout / 2`` seconds, then broken within ``tcp_user_timeout``). Without them the
    kernel waits about 15 minutes for a lost statement and 2 hours for an idle connection.
    The DSN's own values win; ``timeout`` 0: none added."""
    if timeout <= 0:
        return {}
    wanted = {
        "keepalives": "1",
        "keepalives_idle": str(max(1, round(timeout / 2))),
        "keepalives_interval": str(max(1, round(timeout / 4))),
        "keepalives_count": "3",
        "tcp_user_timeout": str(max(1, round(timeout * 1000))),
    }
    return {k: v for k, v in wanted.items() if k not in dsn_parts}


def describe(dsn: str) -> str:
    """The server a DSN names, fit for messages and logs: ``user@host:port/dbname``,
    without the password or any other parameter."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "postgres (unparsable dsn)"
    hosts = str(parts.get("host") or parts.get("hostaddr") or "localhost").split(",")
    ports = str(parts.get("port") or "5432").split(",")
    if len(ports) < len(hosts):  # one port for every host, or one each
        ports = [ports[0]] * len(hosts)
    where = ",".join(f"{h}:{p}" for h, p in zip(hosts, ports, strict=False))
    user = str(parts.get("user") or "")
    db = str(parts.get("dbname") or user or "")
    return f"postgres {user + '@' if user else ''}{where}/{db}"


def _reason(exc: BaseException) -> str:
    """The first line of psycopg's message (``Postgres._reason`` also masks the password,
    should a message ever quote it)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class _Pool(ConnectionPool[psycopg.Connection[Any]]):
    """psycopg_pool's pool, whose check of an idle connection (``check()``, after an error)
    has a deadline too: a frozen server would keep it waiting."""

    def __init__(self, *args: Any, deadlines: Watchdog, check_deadline: float, **kw: Any) -> None:
        self.pochta_deadlines = deadlines
        self.pochta_check_deadline = check_deadline
        super().__init__(*args, **kw)

    def check_connection(self, conn: psycopg.Connection[Any]) -> None:  # type: ignore[override]
        # past the deadline the connection is closed: check() finds it broken, opens another
        with self.pochta_deadlines.watching(conn, self.pochta_check_deadline):
            ConnectionPool.check_connection(conn)


class Postgres:
    """A pool of connections to one database. ``Postgres.connect`` opens it and checks that
    the server answers (a wrong password or an unreachable server is one clear error)."""

    def __init__(self, dsn: str, settings: PoolSettings | None = None) -> None:
        try:
            parts = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError:  # its message may quote the password: not shown
            raise ConfigError(
                "postgres.dsn is not a valid libpq connection string or postgresql:// URI"
            ) from None
        self._secret = str(parts.get("password") or "")
        self.settings = settings or PoolSettings()
        self.where = describe(dsn)
        self._users = 1
        self._users_lock = threading.Lock()
        s = self.settings
        # the DSN with the TCP options added (a secret too: never logged)
        self._conninfo = make_conninfo(dsn, **network_options(parts, s.network_timeout))
        self._watchdog = Watchdog()
        self._pool = _Pool(
            self._conninfo,
            deadlines=self._watchdog,
            # an empty statement: any live server answers it faster than it opens a connection
            check_deadline=min(s.answer_timeout, s.connect_timeout) if s.answer_timeout else 0,
            min_size=s.min_size,
            max_size=max(s.max_size, s.min_size),
            timeout=s.pool_timeout,
            kwargs={"autocommit": True, "connect_timeout": max(1, round(s.connect_timeout))},
            configure=self._configure,
            reconnect_timeout=RECONNECT_TIMEOUT,
            reconnect_failed=self._reconnect_again,
            open=False,
            name="pochta",
        )
        self._dsn = dsn

    @classmethod
    def connect(cls, dsn: str, settings: PoolSettings | None = None) -> Postgres:
        db = cls(dsn, settings)
        db.check()
        db._pool.open(wait=True, timeout=db.settings.connect_timeout)
        return db

    def check(self) -> None:
        """Open one connection by hand: its error (refused, wrong password, no such
        database) says more than the pool's timeout would."""
        try:
            conn = psycopg.connect(
                self._conninfo, connect_timeout=max(1, round(self.settings.connect_timeout))
            )
        except psycopg.Error as exc:
            raise StorageError(f"cannot connect to {self.where}: {self._reason(exc)}") from None
        conn.close()

    def _reason(self, exc: BaseException) -> str:
        """``_reason``, and should a message ever quote the password, without it."""
        text = _reason(exc)
        return text.replace(self._secret, "***") if self._secret else text

    def _reconnect_again(self, pool: ConnectionPool[psycopg.Connection[Any]]) -> None:
        """A reconnection was given up after ``RECONNECT_TIMEOUT``: while callers wait for a
        connection, start another now (a standby promoted meanwhile takes it) rather than
        when the next caller comes. With nobody waiting, the next caller starts one."""
        if pool.get_stats().get("requests_waiting", 0) > 0:
            with contextlib.suppress(PoolClosed):
                pool.check()

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        s = self.settings
        with self._watchdog.watching(conn, s.answer_timeout):  # closed: the pool opens another
            conn.execute(
                "SELECT set_config('statement_timeout', %s, false),"
                " set_config('synchronous_commit', %s, false),"
                " set_config('application_name', 'pochta', false)",
                (f"{round(s.statement_timeout * 1000)}", s.synchronous_commit),
            )

    # -- sharing -------------------------------------------------------------------------
    def share(self) -> Postgres:
        """One more user of this pool; each user calls ``close`` once."""
        with self._users_lock:
            if self._users == 0:
                raise StorageError(f"{self.where}: the pool is closed")
            self._users += 1
        return self

    @property
    def dsn(self) -> str:
        """The DSN as given (it may hold a password: never log it)."""
        return self._dsn

    @property
    def closed(self) -> bool:
        with self._users_lock:
            return self._users == 0

    def close(self) -> None:
        with self._users_lock:
            if self._users == 0:
                return
            self._users -= 1
            last = self._users == 0
        if last:
            self._pool.close()
            self._watchdog.close()

    # -- use -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def connection(self, *, deadline: bool = True) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (autocommit), to be given back within ``answer_timeout``
        seconds: then its socket is shut down (its statement fails, or the next one), and
        it is closed, never reused. ``deadline=False``: no limit (a migration, a stream
        read at its consumer's pace). psycopg's errors become StorageError; pochta's own
        errors raised inside pass through."""
        watch = None
        try:
            with self._pool.connection() as conn:
                limit = self.settings.answer_timeout if deadline else 0.0
                with self._watchdog.watching(conn, limit) as watch:  # closed: not pooled again
                    yield conn
        except PoolTimeout:
            raise StorageError(
                f"{self.where}: no connection within {self.settings.pool_timeout:g} s"
            ) from None
        except PoolClosed:
            raise StorageError(f"{self.where}: the pool is closed") from None
        except psycopg.errors.UndefinedTable as exc:
            raise ConfigError(
                f"{self.where}: {self._reason(exc)}: the schema is missing; run `pochta db upgrade`"
            ) from None
        except psycopg.OperationalError as exc:
            if watch is not None and watch.fired:
                # a frozen server: its idle connections would not answer a check either
                raise StorageError(
                    f"{self.where}: no answer within {self.settings.answer_timeout:g} s"
                    " (postgres.answer_timeout): the connection is dropped"
                ) from exc
            # the server went away (a restart, a crash): the pool drops this connection; test
            # the idle ones too, so that the next callers get live connections, not errors
            with contextlib.suppress(psycopg.Error, PoolClosed):
                self._pool.check()
            raise StorageError(f"{self.where}: {self._reason(exc)}") from exc
        except psycopg.Error as exc:
            raise StorageError(f"{self.where}: {self._reason(exc)}") from exc

    def query(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        with self.connection() as conn:
            return conn.execute(sql, params).fetchall()

    def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> int:
        """One statement on its own (autocommit); how many rows it changed."""
        with self.connection() as conn:
            return conn.execute(sql, params).rowcount

    def transaction(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``fn`` in one transaction; again (up to RETRIES times) when the server rolled
        it back for a deadlock or a serialization failure."""
        for attempt in range(RETRIES):
            try:
                with self.connection() as conn, conn.transaction():
                    return fn(conn)
            except StorageError as exc:
                if not retryable(exc.__cause__) or attempt == RETRIES - 1:
                    raise
                log.debug("%s: retrying a transaction: %s", self.where, exc.message)
        raise AssertionError("unreachable")

    def until_answered(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``fn`` on a pooled connection, and again on a new one while its answer is lost
        (``lost``: the connection broke, the server shut down or is a standby now), for up
        to ``failover_timeout`` seconds: long enough for a standby to be promoted. Only for
        a step that is safe to run twice; StorageError when no answer came in time."""
        deadline = time.monotonic() + self.settings.failover_timeout
        while True:
            try:
                with self.connection() as conn:
                    return fn(conn)
            except StorageError as exc:
                if not lost(exc.__cause__) or time.monotonic() >= deadline:
                    raise
                log.info("%s: an answer was lost, trying again: %s", self.where, exc.message)
            time.sleep(LOST_ANSWER_PAUSE)


# the server went away or stopped being the primary: what was sent may or may not have been
# committed, and another server (a promoted standby) may answer soon
_LOST_STATES = frozenset({"57P01", "57P02", "57P03", "25006"})  # shut down, crashed, starting;
# read-only: the server was demoted under a connection opened while it was the primary


def lost(exc: BaseException | None) -> bool:
    """``exc`` says the answer was lost, or that no server takes writes right now: the
    connection broke (no SQLSTATE: the server died, or the network), a class 08 connection
    error, the server shutting down or starting, or a read-only server."""
    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate
    if state is None:
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith("08") or state in _LOST_STATES


def retryable(exc: BaseException | None) -> bool:
    """The server rolled the whole transaction back and asks for it to be run again."""
    return isinstance(exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure)
