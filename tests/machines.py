"""README's "Several machines" recipe, run on this machine: three hosts as network namespaces
(tests/netns.py) plus an admin/client host and a stranger, each process started with
``ip netns exec``.

    db       10.77.0.1   PostgreSQL, a Redis Cluster master and the replica of node2's (with
                         ``failover``: Patroni and its PostgreSQL, an etcd member)
    db2      10.77.0.4   with ``failover`` only: Patroni and the synchronous standby, an etcd member
    node1    10.77.0.2   nginx WebDAV node (disk1, disk2), a Valkyrie per disk, a loader, a master
                         and the replica of db's (with ``failover``: the third etcd member)
    node2    10.77.0.3   the same
    admin    10.77.0.9   the pochta commands (db upgrade, pairs add, fsck), pg_dump, the SMTP
                         clients and HTTP readers (threads of this process that entered it)
    stranger 10.77.0.66  a host of the same network that is none of pochta's: no certificate

TLS end to end, as README says: one CA for the installation (``pochta tls ca``), and on every
host ``/etc/pochta/tls`` (here ``<dir>/<host>/tls``) with the CA's certificate and the host's
own certificate and key (``pochta tls cert``), which serve its listeners (SMTP STARTTLS, IMAP
STARTTLS and IMAPS, HTTPS, PostgreSQL, Redis, nginx) and identify it to the storage nodes.

The loaders' and storage hosts' TOML files are README's own blocks (:func:`recipe`), with only
the password and the host's certificate directory filled in; the test's own settings (fewer
analysis processes, short leases) are ``POCHTA_*`` variables. Used by
tests/integration/test_several_machines.py and scripts/several-machines.

    with Machines.start(tmp_path) as m:
        m.pochta("user", "add", ...)        # on the admin host
        m.loaders["node1"].stop(signal.SIGKILL)
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis
from redis import Redis as RedisClient  # the field `redis` hides the module in the class

from tests import netns
from tests.nginx import NGINX, children, node_config
from tests.patroni import PatroniCluster
from tests.pgserver import PASSWORD, SUPERUSER, _run_as, bindir
from tests.tlsfiles import TestCA, TLSFiles

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SUBNET = "10.77.0"
DB, DB2, NODE1, NODE2, ADMIN, STRANGER = "db", "db2", "node1", "node2", "admin", "stranger"
ADDRESSES = {DB: 1, NODE1: 2, NODE2: 3, ADMIN: 9, STRANGER: 66}
DB2_OCTET = 4  # the standby's host: made with ``failover`` only
# README's loaders name both database hosts; with one PostgreSQL, the first alone
BOTH_DBS = f"{SUBNET}.1:5432,{SUBNET}.{DB2_OCTET}:5432"
PG_PORT, REDIS_PORT, NODE_PORT, HTTP_PORT, SMTP_PORT = 5432, 6379, 8080, 8025, 25
REPLICA_PORT = 6380  # each host's second redis-server: a replica of another host's master
REDIS_HOSTS = (DB, NODE1, NODE2)  # a master each at first (REDIS_PORT)
REPLICA_OF = {DB: NODE2, NODE1: DB, NODE2: NODE1}  # host -> whose master its replica copies
IMAP_PORT, IMAPS_PORT = 143, 993
DISKS = ("disk1", "disk2")
TLS_DIR = "/etc/pochta/tls"  # README's: each host's ca.pem, cert.pem, key.pem
REDIS_PASSWORD = "several-machines-redis-password-cdef"
SECRETS = {  # README: the same on every machine, in the environment
    "POCHTA_SERVICE_TOKEN": "several-machines-service-token-0123",
    "POCHTA_GUARD__KEY_SECRET": "several-machines-guard-secret-4567",
    "POCHTA_WEB__SECRET": "several-machines-web-secret-89ab",
    "POCHTA_ANTISPAM__LEARNED_WORDS_KEY": "several-machines-words-key-4d2e",
    "POCHTA_REDIS__PASSWORD": REDIS_PASSWORD,
}
TEST_SETTINGS = {  # this machine has two cores and the test a few minutes
    "POCHTA_ANTISPAM__POOL_PROCESSES": "0",
    "POCHTA_GUARD__LOCK_TTL": "3",
    "POCHTA_MAILBOX__PENDING_GRACE_SECONDS": "20",
    "POCHTA_LOG_LEVEL": "info",
    "POCHTA_SMTP__HOSTNAME": "mx.pochta.test",
    "POCHTA_BLOBS__FREE_REFRESH_SECONDS": "2",
    "POCHTA_BLOBS__NODE_READ_TIMEOUT": "5",
}


# -- README's recipe ------------------------------------------------------------------------
def recipe(readme: Path = README) -> dict[str, str]:
    """The TOML blocks of README's "Several machines" section, by the host kind their first
    line names: ``loader`` and ``storage``."""
    text = readme.read_text()
    start = text.index("\n## Several machines\n")
    end = text.index("\n## ", start + 1)
    blocks: dict[str, str] = {}
    for block in re.findall(r"```toml\n(.*?)```", text[start:end], flags=re.S):
        first = block.splitlines()[0]
        kind = "loader" if "loader" in first else "storage" if "storage host" in first else ""
        if not kind or kind in blocks:
            raise AssertionError(f"README's Several machines: an unexpected TOML block {first!r}")
        blocks[kind] = block
    if set(blocks) != {"loader", "storage"}:
        raise AssertionError(f"README's Several machines has TOML blocks for {sorted(blocks)}")
    for block in blocks.values():
        tomllib.loads(block)  # a syntax error is found here, with its line
    return blocks


def recipe_pairs(readme: Path = README) -> list[tuple[str, str]]:
    """The ``pochta pairs add URL URL`` lines of README's "Several machines" section."""
    text = readme.read_text()
    start = text.index("\n## Several machines\n")
    section = text[start : text.index("\n## ", start + 1)]
    return [
        (a, b) for a, b in re.findall(r"^pochta pairs add (https?\S+) (https?\S+)$", section, re.M)
    ]


def settings_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, **SECRETS, **TEST_SETTINGS, **(extra or {})}


def dsn(
    dbname: str = "pochta", ca: Path | None = None, hosts: str = f"{SUBNET}.1:{PG_PORT}"
) -> str:
    """The admin host's way to PostgreSQL: over TLS, the server's certificate checked against
    the installation's CA (``ca``: the admin host's ca.pem; None: without TLS, which the
    server refuses). ``hosts``: ``address:port,...``; with several, the one that takes
    writes (``target_session_attrs=read-write``)."""
    url = f"postgresql://{SUPERUSER}:{PASSWORD}@{hosts}/{dbname}?connect_timeout=10"
    if "," in hosts:
        url += "&target_session_attrs=read-write"
    if ca is None:
        return url + "&sslmode=disable"
    return url + f"&sslmode=verify-full&sslrootcert={ca}"


# -- processes ------------------------------------------------------------------------------
def _tcp_open(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass(eq=False)
class Process:
    """A long-running program on ``host``, its output in ``log``; ``ready`` is asked until it
    says yes (from the admin host's side: over the network)."""

    name: str
    host: netns.Host
    args: list[str]
    log: Path
    ready: Callable[[], bool]
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> None:
        with self.log.open("ab") as sink:
            self.proc = self.host.popen(
                self.args, stdout=sink, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT
            )
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            assert self.proc is not None
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:]
                self.stop(signal.SIGKILL)
                raise RuntimeError(f"{self.name} on {self.host.address} did not start:\n{tail}")
            time.sleep(0.1)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
        """``sig`` to the program (SIGKILL: to its children too, as a crash would)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            kids = children(proc.pid) if sig == signal.SIGKILL else []
            with contextlib.suppress(OSError):
                proc.send_signal(sig)
            for pid in kids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _pochta_args(*args: str) -> list[str]:
    return [sys.executable, "-m", "pochta", *args]


@dataclass(eq=False)
class Machines:
    dir: Path
    net: netns.Network
    hosts: dict[str, netns.Host] = field(default_factory=dict)
    postgres: Process | None = None
    redis: list[Process] = field(default_factory=list)
    nodes: dict[str, Process] = field(default_factory=dict)
    valkyries: list[Process] = field(default_factory=list)
    loaders: dict[str, Process] = field(default_factory=dict)
    pg_dir: Path | None = None
    ca: TestCA | None = None
    failover: bool = False  # PostgreSQL as a Patroni cluster: a primary, a synchronous standby
    patroni: PatroniCluster | None = None
    archive: bool = False  # with ``failover``: Patroni's servers archive WAL (a backup drill)

    # -- building it ------------------------------------------------------------------------
    @classmethod
    def start(cls, dir: Path, *, failover: bool = False, archive: bool = False) -> Machines:
        """Every host and server of the recipe, ready to take mail (users not added yet).
        ``failover``: PostgreSQL on two hosts under Patroni (tests/patroni.py), not one;
        ``archive`` (with ``failover``): its servers archive WAL (``PatroniCluster.archive``)."""
        for what, found in (("nginx", NGINX), ("redis-server", shutil.which("redis-server"))):
            if found is None:
                raise RuntimeError(f"{what} is not installed")
        if bindir() is None:
            raise RuntimeError("PostgreSQL's initdb is not installed (Debian: postgresql)")
        dir.mkdir(parents=True, exist_ok=True)
        machines = cls(dir, netns.Network.create(SUBNET), failover=failover, archive=archive)
        try:
            machines._build()
        except BaseException:
            machines.stop()
            raise
        return machines

    def _build(self) -> None:
        addresses = {**ADDRESSES, **({DB2: DB2_OCTET} if self.failover else {})}
        for name, octet in addresses.items():
            self.hosts[name] = self.net.add_host(name, octet)
        self.ca = TestCA.create(self.dir / "ca", "pochta several-machines CA")
        for name in self.hosts:  # pochta tls cert, for each of its hosts
            if name == STRANGER:
                continue
            self.ca.issue(self.tls_dir(name), [self.address(name)])
        blocks = recipe()
        for name in (NODE1, NODE2, ADMIN):
            self.toml(name).write_text(self._fill(blocks["loader"], name))
        for name in (NODE1, NODE2):
            self.toml(name, storage=True).write_text(self._fill(blocks["storage"], name))
        self.loader_toml = self.toml(ADMIN)
        if self.failover:
            self._start_patroni()
        else:
            self._start_postgres()
        self._start_redis()
        self.pochta("db", "upgrade")
        self.pochta("init")  # the admin host's own data directory
        for name in (NODE1, NODE2):
            self._start_node(name)
        for a, b in recipe_pairs():  # README's, as they are
            self.pochta("pairs", "add", a, b)
        for name in (NODE1, NODE2):
            self.pochta("init", host=name)  # the storage host's own data directory
            for disk in DISKS:
                self._start_valkyrie(name, disk)
        for v in self.valkyries:
            v.wait_ready()
        for name in (NODE1, NODE2):
            self._start_loader(name, wait=False)
        for loader in self.loaders.values():
            loader.wait_ready(180)

    def address(self, name: str) -> str:
        return self.hosts[name].address

    def tls_dir(self, name: str) -> Path:
        """Host ``name``'s ``/etc/pochta/tls``."""
        return self.dir / name / "tls"

    def tls(self, name: str) -> TLSFiles:
        d = self.tls_dir(name)
        return TLSFiles(d / "ca.pem", d / "cert.pem", d / "key.pem")

    def client_tls(self) -> ssl.SSLContext:
        """What the admin host's clients (SMTP, IMAP, HTTPS) verify servers with."""
        return ssl.create_default_context(cafile=self.tls(ADMIN).ca)

    def toml(self, name: str, *, storage: bool = False) -> Path:
        """Host ``name``'s pochta.toml: a loader's (and the admin host's), or a storage
        host's (for its Valkyries)."""
        return self.dir / name / ("storage.toml" if storage else "pochta.toml")

    def _fill(self, block: str, name: str) -> str:
        """README's block as host ``name`` has it: the password, its certificates' place
        (and with one PostgreSQL, only its host)."""
        block = block.replace("PASSWORD", PASSWORD).replace(TLS_DIR, str(self.tls_dir(name)))
        return block if self.failover else block.replace(BOTH_DBS, f"{SUBNET}.1:5432")

    def pg_hosts(self) -> str:
        """``address:port,...`` of the PostgreSQL servers; under Patroni, the primary first:
        libpq tries no further host after a server's FATAL, and a database just created on
        the primary may not be replayed on the standby yet (``synchronous_commit = on`` waits
        for the standby's flush, not its replay)."""
        if self.patroni is None:
            return f"{SUBNET}.1:{PG_PORT}"
        first = self.patroni.leader()
        names = sorted(self.patroni.pg_hosts, key=lambda n: n != first)
        return ",".join(f"{self.address(n)}:{PG_PORT}" for n in names)

    def dsn(self, dbname: str = "pochta") -> str:
        """The admin host's DSN: over TLS, to whichever server takes writes."""
        return dsn(dbname, self.tls(ADMIN).ca, self.pg_hosts())

    def node_url(self, name: str) -> str:
        return f"https://{self.address(name)}:{NODE_PORT}"

    def served(self, name: str) -> Path:
        """The directory behind storage node ``name``'s nginx: one subdirectory per disk."""
        return self.dir / name / "served"

    def admin(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` on the admin host (its sockets are the admin host's)."""
        return self.hosts[ADMIN].call(fn)

    def _answers(self, address: str, port: int) -> Callable[[], bool]:
        """Whether ``address:port`` takes a connection from the admin host."""
        return lambda: bool(self.admin(lambda: _tcp_open(address, port)))

    def _start_postgres(self) -> None:
        pg = bindir()
        assert pg is not None
        user = _run_as()  # root: postgres (or nobody); PostgreSQL refuses to run as root
        base = Path(tempfile.mkdtemp(prefix="pochta-pg-"))  # the server's user reaches it
        self.pg_dir = base
        base.chmod(0o755)
        if user is not None:
            import pwd

            pw = pwd.getpwnam(user)
            os.chown(base, pw.pw_uid, pw.pw_gid)
        pwfile = base / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if user is not None:
            os.chown(pwfile, pw.pw_uid, -1)
        data = base / "data"
        subprocess.run(
            [
                str(pg / "initdb"), "-D", str(data), "-U", SUPERUSER, "--pwfile", str(pwfile),
                "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync",
            ],
            user=user, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        pwfile.unlink()
        hba = data / "pg_hba.conf"  # README: the subnet may connect, over TLS only
        kept = [line for line in hba.read_text().splitlines() if not line.startswith("host")]
        hba.write_text(
            "\n".join([*kept, f"hostssl all {SUPERUSER} {SUBNET}.0/24 scram-sha-256", ""])
        )
        tls = self.tls(DB)  # the server's key must be its user's alone
        for src, dst, mode in (
            (tls.cert, data / "server.crt", 0o644),
            (tls.key, data / "server.key", 0o600),
        ):
            shutil.copyfile(src, dst)
            dst.chmod(mode)
            if user is not None:
                os.chown(dst, pw.pw_uid, pw.pw_gid)
        host = self.hosts[DB]
        options = {
            "listen_addresses": host.address,
            "port": str(PG_PORT),
            "unix_socket_directories": "",
            "max_connections": "200",
            "fsync": "off",  # a test: a killed server still loses nothing, a power loss would
            "full_page_writes": "off",
            "ssl": "on",  # README: ssl = on, with the db host's certificate
            "ssl_cert_file": str(data / "server.crt"),
            "ssl_key_file": str(data / "server.key"),
        }
        run_as = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"] if user else []
        args = [*run_as, str(pg / "postgres"), "-D", str(data)]
        args += [a for k, v in options.items() for a in ("-c", f"{k}={v}")]

        def ready() -> bool:
            def connect() -> bool:
                try:
                    with psycopg.connect(dsn("postgres", self.tls(ADMIN).ca), connect_timeout=2):
                        return True
                except psycopg.OperationalError:
                    return False

            return bool(self.admin(connect))

        self.postgres = Process("postgres", host, args, base / "server.log", ready)
        self.postgres.start()
        self.admin(lambda: self._sql("postgres", "CREATE DATABASE pochta"))

    def _start_patroni(self) -> None:
        """etcd on db, db2 and node1; Patroni on db (the first primary) and db2."""
        self.patroni = PatroniCluster(
            self.dir / "patroni", self.hosts, (DB, DB2), (DB, DB2, NODE1), self.tls,
            self.admin, self.tls(ADMIN).ca, SUBNET, archive=self.archive,
        )  # fmt: skip
        self.patroni.dir.mkdir(parents=True, exist_ok=True)
        self.patroni.start()
        self.admin(lambda: self._sql("postgres", "CREATE DATABASE pochta"))

    def _sql(self, dbname: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Runs on the calling thread: call it through :meth:`admin`."""
        with psycopg.connect(self.dsn(dbname), autocommit=True) as conn:
            cur = conn.execute(sql.encode(), params)
            return cur.fetchall() if cur.description else []

    def sql(self, sql: str, params: Sequence[Any] = (), dbname: str = "pochta") -> Any:
        return self.admin(lambda: self._sql(dbname, sql, params))

    def _redis_server(self, name: str, port: int) -> Process:
        home = self.dir / "redis"
        host = self.hosts[name]
        tls = self.tls(name)
        args = [
            "redis-server",
            "--port", "0",  # README: TLS only, the cluster bus and replication too
            "--tls-port", str(port),
            "--tls-cert-file", str(tls.cert),
            "--tls-key-file", str(tls.key),
            "--tls-ca-cert-file", str(tls.ca),
            "--tls-cluster", "yes",
            "--tls-replication", "yes",
            "--tls-auth-clients", "no",  # clients show the password, not a certificate
            "--requirepass", REDIS_PASSWORD,
            "--masterauth", REDIS_PASSWORD,
            "--bind", host.address,
            "--protected-mode", "no",
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(home / f"nodes-{name}-{port}.conf"),
            "--cluster-node-timeout", "2000",
            "--cluster-announce-ip", host.address,
            "--save", "",
            "--appendonly", "no",
            "--dir", str(home),
            "--daemonize", "no",
        ]  # fmt: skip
        return Process(
            f"redis {name}:{port}",
            host,
            args,
            home / f"{name}-{port}.log",
            self._answers(host.address, port),
        )

    def _start_redis(self) -> None:
        """README's Redis Cluster: a master on each of db, node1 and node2 and, on each, a
        replica of another host's master (``REPLICA_OF``), so that a lost master's replica
        takes over its slots. ``self.redis``: the three masters first, then the replicas."""
        (self.dir / "redis").mkdir(exist_ok=True)
        for port in (REDIS_PORT, REPLICA_PORT):
            for name in REDIS_HOSTS:
                proc = self._redis_server(name, port)
                proc.start()
                self.redis.append(proc)
        cli = ["redis-cli", "--tls", "--cacert", str(self.tls(DB).ca), "--cluster"]
        env = {**os.environ, "REDISCLI_AUTH": REDIS_PASSWORD}
        masters = [f"{self.address(n)}:{REDIS_PORT}" for n in REDIS_HOSTS]
        self.hosts[DB].run(
            [*cli, "create", *masters, "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=60, env=env,
        )  # fmt: skip
        for name in REDIS_HOSTS:
            of = REPLICA_OF[name]

            def myid(of: str = of) -> str:
                with self.redis_client(of) as r:
                    found = r.execute_command("CLUSTER MYID")
                    return found.decode() if isinstance(found, bytes) else str(found)

            self.hosts[DB].run(
                [*cli, "add-node", f"{self.address(name)}:{REPLICA_PORT}",
                 f"{self.address(of)}:{REDIS_PORT}", "--cluster-slave",
                 "--cluster-master-id", self.admin(myid)],
                check=True, capture_output=True, timeout=60, env=env,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while not self.admin(self.redis_healthy):
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not become healthy")
            time.sleep(0.2)

    def redis_servers(self) -> dict[tuple[str, int], Process]:
        """Every redis-server by (address, port)."""
        out = {}
        for proc in self.redis:
            port = int(proc.args[proc.args.index("--tls-port") + 1])
            out[(proc.host.address, port)] = proc
        return out

    def redis_slots(self) -> list[tuple[int, int, tuple[str, int], list[tuple[str, int]]]]:
        """``CLUSTER SLOTS`` as the first server that answers sees it (call on the admin host):
        (first slot, last slot, its master, its replicas) by (address, port)."""
        for address, port in self.redis_servers():
            try:
                with self.redis_client_at(address, port) as r:
                    ranges = r.execute_command("CLUSTER SLOTS")
            except (redis.RedisError, OSError):
                continue
            out = []
            for start, end, master, *replicas in ranges:

                def at(node: Any) -> tuple[str, int]:
                    host = node[0].decode() if isinstance(node[0], bytes) else str(node[0])
                    return host, int(node[1])

                out.append((int(start), int(end), at(master), [at(r) for r in replicas]))
            return out
        raise RuntimeError("no redis-server answers")

    def redis_healthy(self) -> bool:
        """Every server runs and says ``cluster_state:ok``, and every slot has a master and a
        replica (call on the admin host)."""
        for (address, port), proc in self.redis_servers().items():
            if not proc.alive():
                return False
            try:
                with self.redis_client_at(address, port) as r:
                    info = r.execute_command("CLUSTER INFO")
                    if isinstance(info, dict):
                        state = info.get("cluster_state", info.get(b"cluster_state"))
                    else:
                        text = info.decode() if isinstance(info, bytes) else str(info)
                        state = "ok" if "cluster_state:ok" in text else "fail"
                    if state not in ("ok", b"ok"):
                        return False
            except (redis.RedisError, OSError):
                return False
        try:
            ranges = self.redis_slots()
        except RuntimeError:
            return False
        covered = sum(end - start + 1 for start, end, _, _ in ranges)
        return covered == 16384 and all(replicas for _, _, _, replicas in ranges)

    def redis_client(self, name: str, *, tls: bool = True) -> RedisClient:
        """A client of host ``name``'s first Redis from the admin host's side (call it there)."""
        if not tls:
            return redis.Redis(
                self.address(name), REDIS_PORT, password=REDIS_PASSWORD, socket_timeout=2
            )
        return self.redis_client_at(self.address(name), REDIS_PORT)

    def redis_client_at(self, address: str, port: int) -> RedisClient:
        return redis.Redis(
            address, port, password=REDIS_PASSWORD, socket_timeout=2,
            ssl=True, ssl_ca_certs=str(self.tls(ADMIN).ca),
        )  # fmt: skip

    def _start_node(self, name: str) -> None:
        host = self.hosts[name]
        home = self.dir / name / "nginx"
        home.mkdir(parents=True, exist_ok=True)
        served = self.served(name)
        for disk in DISKS:
            (served / disk).mkdir(parents=True, exist_ok=True)
        conf = home / "nginx.conf"
        conf.write_text(
            node_config(
                port=NODE_PORT, served=served, home=home, host=host.address,
                allow=f"{SUBNET}.0/24", tls=self.tls(name),
            )
        )  # fmt: skip
        assert NGINX is not None
        args = [NGINX, "-c", str(conf), "-p", str(home), "-e", str(home / "error.log")]
        address = host.address
        self.nodes[name] = Process(
            f"nginx {name}",
            host,
            args,
            home / "nginx.out",
            self._answers(address, NODE_PORT),
        )
        self.nodes[name].start()

    def _start_valkyrie(self, name: str, disk: str) -> None:
        directory = self.served(name) / disk
        report = directory / ".pochta-free"
        proc = Process(
            f"valkyrie {name}/{disk}",
            self.hosts[name],
            _pochta_args(
                "valkyrie", "run", "--disk", str(directory),
                "--config", str(self.toml(name, storage=True)),
                "--data", str(self.dir / name / "valkyrie"),
            ),
            self.dir / name / f"valkyrie-{disk}.log",
            report.is_file,
            env=settings_env(),
        )  # fmt: skip
        with proc.log.open("ab") as sink:  # started now, waited for together
            proc.proc = proc.host.popen(
                proc.args, stdout=sink, stderr=subprocess.STDOUT, env=proc.env, cwd=ROOT
            )
        self.valkyries.append(proc)

    def _start_loader(
        self, name: str, *, wait: bool = True, env: dict[str, str] | None = None
    ) -> None:
        host = self.hosts[name]
        url = f"https://{host.address}:{HTTP_PORT}/healthz"

        def ready() -> bool:
            def ask() -> bool:
                try:
                    return httpx.get(url, timeout=2, verify=self.client_tls()).status_code == 200
                except httpx.HTTPError:
                    return False

            return bool(self.admin(ask))

        proc = Process(
            f"loader {name}",
            host,
            _pochta_args(
                "serve", "--config", str(self.toml(name)), "--data", str(self.dir / name / "data")
            ),
            self.dir / name / "serve.log",
            ready,
            env=settings_env(env),
        )
        self.loaders[name] = proc
        if wait:
            proc.start(180)
        else:
            with proc.log.open("ab") as sink:
                proc.proc = host.popen(
                    proc.args, stdout=sink, stderr=subprocess.STDOUT, env=proc.env, cwd=ROOT
                )

    def restart_loaders(self, env: dict[str, str] | None = None) -> None:
        """Stop both loaders (SIGTERM) and start them again, with more ``POCHTA_*``."""
        for name in (NODE1, NODE2):
            self.loaders[name].stop()
            self._start_loader(name, wait=False, env=env)
        for loader in self.loaders.values():
            loader.wait_ready(180)

    # -- using it ---------------------------------------------------------------------------
    def pochta(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        input: bytes | None = None,
        check: bool = True,
        timeout: float = 300,
        host: str = ADMIN,
    ) -> subprocess.CompletedProcess[bytes]:
        """A ``pochta`` command on ``host`` (the admin host; a storage host gets the storage
        hosts' file, any other the loaders')."""
        toml = self.toml(host, storage=host in (NODE1, NODE2))
        data = self.dir / host / ("valkyrie" if host in (NODE1, NODE2) else "data")
        done = self.hosts[host].run(
            _pochta_args(*args, "--config", str(toml), "--data", str(data)),
            env=settings_env(env),
            input=input,
            capture_output=True,
            cwd=ROOT,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"pochta {' '.join(args)}: exit {done.returncode}\n"
                f"{done.stdout.decode(errors='replace')}\n{done.stderr.decode(errors='replace')}"
            )
        return done

    def pg_tool(self, tool: str, *args: str) -> subprocess.CompletedProcess[bytes]:
        """pg_dump / pg_restore on the admin host (a client of the db host)."""
        pg = bindir()
        assert pg is not None
        done = self.hosts[ADMIN].run(
            [str(pg / tool), *args], capture_output=True, timeout=300, cwd=self.dir
        )
        if done.returncode != 0:
            raise RuntimeError(f"{tool}: exit {done.returncode}\n{done.stderr.decode()}")
        return done

    def stop_node(self, name: str) -> None:
        """A storage node's nginx killed (SIGKILL, master and workers): its port refuses."""
        self.nodes[name].stop(signal.SIGKILL)

    def start_node(self, name: str) -> None:
        self.nodes[name].start()

    def logs(self) -> str:
        """The tail of every process's log, for a failure's message."""
        parts = []
        every = [
            self.postgres, *self.redis, *self.nodes.values(), *self.valkyries,
            *self.loaders.values(),
        ]  # fmt: skip
        for proc in every:
            if proc is not None and proc.log.exists():
                tail = proc.log.read_text(errors="replace")[-1500:]
                parts.append(f"--- {proc.name} ---\n{tail}")
        if self.patroni is not None:
            parts.append(self.patroni.logs())
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop everything and delete the namespaces (what lingers is killed with them)."""
        for proc in [*self.loaders.values(), *self.valkyries]:
            proc.stop(signal.SIGTERM, timeout=15)
        for proc in self.nodes.values():
            proc.stop(signal.SIGTERM, timeout=10)
        for proc in self.redis:
            proc.stop(signal.SIGKILL)
        if self.postgres is not None:
            self.postgres.stop(signal.SIGINT)
        if self.patroni is not None:
            self.patroni.stop()
        self.net.remove()
        if self.pg_dir is not None:
            shutil.rmtree(self.pg_dir, ignore_errors=True)

    def __enter__(self) -> Machines:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
