"""Real PostgreSQL for tests and benchmarks: Debian's server binaries (initdb + pg_ctl), a
cluster of our own in a temporary directory, on a free loopback port, stopped afterwards.
Never the machine's shared instance: no Unix socket, only 127.0.0.1:<free port>.

    with PostgresServer.start(Path(tmp)) as server:
        dsn = server.dsn("postgres")
        server.create_database("t1", template="pochta_template")
        server.kill()                 # SIGKILL the postmaster: a crash
        server.start_again()          # crash recovery, same port and files

PostgreSQL refuses to run as root; as root (CI), the cluster belongs to the ``postgres``
user the Debian package creates (or ``nobody``), and its directory is made for that user.
The fixtures at the bottom are registered in ``tests/conftest.py``: one server per test
session, one fresh database per test, copied from a template that was migrated once
(CREATE DATABASE ... TEMPLATE takes a few tens of milliseconds).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import glob
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from tests.servers import HOST, free_port, wait_until

PASSWORD = "pochta-test-secret-8f2c"
SUPERUSER = "pochta"
TEMPLATE = "pochta_template"


def bindir() -> Path | None:
    """Where initdb and pg_ctl are: ``pg_config --bindir`` when it has them, else the
    newest /usr/lib/postgresql/*/bin (Debian keeps the server binaries off PATH)."""
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
            if out and Path(out, "initdb").is_file() and Path(out, "pg_ctl").is_file():
                return Path(out)

    def version(initdb: str) -> int:
        name = Path(initdb).parent.parent.name
        return int(name) if name.isdigit() else 0

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _run_as() -> str | None:
    """The user to run the server as: None for a normal user, a system user for root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("running as root and there is no postgres or nobody user to run as")


_running: set[subprocess.Popen[bytes]] = set()


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ValueError):
            for line in status.read_text().splitlines():
                if line.startswith("PPid:") and int(line.split()[1]) == pid:
                    found.append(int(status.parent.name))
                    break
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped holds nothing any more)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return "Z" not in line.split()[1]
    except OSError:
        return False
    return False


_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL it when the thread that started it dies, so that
    a test run cut short (pytest-timeout ends the process without atexit) leaves no server
    behind. Loaded before the fork; nothing is allocated here."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_running):
        with contextlib.suppress(OSError):
            proc.kill()


@dataclass
class PostgresServer:
    """One PostgreSQL cluster in ``dir`` serving 127.0.0.1:``port``. ``durable=False`` (the
    tests) turns fsync off: a killed server still loses nothing (the OS has the pages), only
    a power loss would. Benchmarks start it durable."""

    dir: Path
    port: int
    bin: Path
    durable: bool = False
    user: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    _names: Iterator[int] = field(default_factory=itertools.count)

    @classmethod
    def start(cls, dir: Path | None = None, *, durable: bool = False) -> PostgresServer:
        found = bindir()
        if found is None:
            raise RuntimeError("PostgreSQL's initdb is not installed (Debian: postgresql)")
        user = _run_as()
        # the server's user must reach its files: not under pytest's private (0700) tmp
        base = Path(tempfile.mkdtemp(prefix="pochta-pg-", dir=dir if user is None else None))
        base.chmod(0o755)
        if user is not None:
            pw = pwd.getpwnam(user)
            os.chown(base, pw.pw_uid, pw.pw_gid)
        server = cls(base, 0, found, durable, user)
        pwfile = base / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if user is not None:
            os.chown(pwfile, pwd.getpwnam(user).pw_uid, -1)
        initdb = [
            str(found / "initdb"),
            "-D", str(server.data),
            "-U", SUPERUSER,
            "--pwfile", str(pwfile),
            "--auth", "scram-sha-256",
            "-E", "UTF8",
            "--locale", "C",
            "--no-sync",
        ]  # fmt: skip
        subprocess.run(
            initdb,
            user=user,
            check=True,
            capture_output=True,
            timeout=120,
        )
        pwfile.unlink()
        for attempt in range(3):  # a free port can be taken before the server binds it
            server.port = free_port()
            try:
                server._spawn()
                return server
            except RuntimeError:
                if attempt == 2:
                    server.remove()
                    raise
        raise AssertionError("unreachable")

    @property
    def data(self) -> Path:
        return self.dir / "data"

    @property
    def log(self) -> Path:
        return self.dir / "server.log"

    def dsn(self, dbname: str = "postgres") -> str:
        return (
            f"host={HOST} port={self.port} user={SUPERUSER} password={PASSWORD}"
            f" dbname={dbname} connect_timeout=10"
        )

    def _options(self) -> list[str]:
        opts = {
            "listen_addresses": HOST,
            "port": str(self.port),
            "unix_socket_directories": "",
            "max_connections": "200",
            "shared_buffers": "128MB",
            "log_min_messages": "warning",
        }
        if not self.durable:
            opts |= {"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"}
        return [a for k, v in opts.items() for a in ("-c", f"{k}={v}")]

    def _spawn(self, timeout: float = 30.0) -> None:
        args = [str(self.bin / "postgres"), "-D", str(self.data), *self._options()]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                args,
                user=self.user,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,  # started from the main thread
            )
        _running.add(self.proc)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"postgres on port {self.port} did not start:\n{tail}")
            time.sleep(0.05)

    def _ready(self) -> bool:
        try:
            with psycopg.connect(self.dsn(), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.dsn(dbname), autocommit=True)

    def create_database(self, name: str | None = None, template: str | None = None) -> str:
        """A new database (named ``name``, else t<N>), copied from ``template`` if given."""
        name = name or f"t{next(self._names)}"
        with self.connect() as conn:
            sql = f'CREATE DATABASE "{name}"'
            if template is not None:
                sql += f' TEMPLATE "{template}" STRATEGY FILE_COPY'
            conn.execute(sql.encode())
        return name

    def drop_database(self, name: str) -> None:
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30.0) -> None:
        """SIGINT: PostgreSQL's fast shutdown; SIGKILL: a crash (recovery at next start)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        backends = _children(proc.pid)
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _running.discard(proc)
        # the backends notice their postmaster's death and exit; a new postmaster cannot
        # start while they still hold the old shared memory
        wait_until(lambda: not any(_alive(pid) for pid in backends), 30, "postgres backends")

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The postmaster and every backend stopped (SIGSTOP) for the ``with`` block: open
        connections stay open and nothing answers, as on a stalled machine; SIGCONT after."""
        assert self.proc is not None
        pids = [self.proc.pid, *_children(self.proc.pid)]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)

    def start_again(self) -> None:
        self._spawn()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()


def migrated_template(server: PostgresServer, name: str = TEMPLATE) -> str:
    """A database holding pochta's whole schema (``pochta db upgrade``), to copy from."""
    from pochta.postgres.database import PoolSettings, Postgres
    from pochta.postgres.migrate import upgrade

    server.create_database(name)
    db = Postgres.connect(server.dsn(name), PoolSettings(min_size=1, max_size=1))
    try:
        upgrade(db)
    finally:
        db.close()
    return name


# -- pytest fixtures (registered in tests/conftest.py) ------------------------------------------
@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL cluster for the whole session, with a migrated template database."""
    if bindir() is None:
        pytest.skip("PostgreSQL's initdb is not installed (Debian package postgresql)")
    with PostgresServer.start() as server:
        migrated_template(server)
        yield server


NewDatabase = Callable[[], str]


@pytest.fixture
def new_postgres_db(postgres_server: PostgresServer) -> Iterator[NewDatabase]:
    """Makes fresh migrated databases (a DSN each), dropped at teardown."""
    made: list[str] = []

    def make() -> str:
        name = postgres_server.create_database(template=TEMPLATE)
        made.append(name)
        return postgres_server.dsn(name)

    yield make
    for name in made:
        with contextlib.suppress(psycopg.Error):
            postgres_server.drop_database(name)


@pytest.fixture
def postgres_dsn(new_postgres_db: NewDatabase) -> str:
    """The DSN of a fresh database holding pochta's migrated schema, for this test alone."""
    return new_postgres_db()
