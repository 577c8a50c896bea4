"""Real Redis for tests: one ``redis-server``, or a Redis Cluster of 3 masters with 1 replica
each, on free loopback ports in a temporary directory, stopped afterwards.

The helpers work outside pytest too (the benchmarks use them); the fixtures at the bottom are
registered in ``tests/conftest.py``. Nothing here listens on or contacts anything but
127.0.0.1.

    with RedisServer.start(Path(tmp)) as server:
        client = server.client()
        server.restart()                    # same port, empty (no persistence)
    with RedisCluster.start(Path(tmp)) as cluster:
        client = cluster.client()
        killed = cluster.kill_master("some-key")    # SIGKILL; returns after the failover
        cluster.restart(killed)                     # it comes back as a replica
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

import pytest
import redis

HOST = "127.0.0.1"
REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")

_running: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_running):
        with contextlib.suppress(OSError):
            proc.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _ping(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            reply = s.recv(64)  # +PONG, or -NOAUTH from a server that wants a password
            return reply.startswith(b"+PONG") or reply.startswith(b"-NOAUTH")
    except OSError:
        return False


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout} s waiting for {what}")
        time.sleep(0.05)


T = TypeVar("T")


def on_free_port(make: Callable[[int], T], port: int | None = None, attempts: int = 3) -> T:
    """``make(port)`` on a free port (``port`` when given); tried again on another when the
    server did not start (RuntimeError): a free port can be taken before the server binds it."""
    for attempt in range(attempts):
        try:
            return make(port or free_port())
        except RuntimeError:
            if port is not None or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


class LoopbackServer:
    """What a test server process shares: spawned, waited for until it answers (or its log's
    tail in the error), stopped (SIGTERM, SIGKILL when it lingers), killed at exit if a test
    did not stop it. Subclasses are dataclasses with ``port``, ``proc`` and a ``log`` path."""

    what: ClassVar[str] = "server"
    port: int
    proc: subprocess.Popen[bytes] | None

    @property
    def log(self) -> Path:
        raise NotImplementedError

    def _launch(self, args: Sequence[str], ready: Callable[[], bool], timeout: float) -> None:
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _running.add(self.proc)
        deadline = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                tail = self.log.read_text()[-2000:] if self.log.exists() else ""
                raise RuntimeError(f"{self.what} on port {self.port} did not start:\n{tail}")
            time.sleep(0.02)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                if sig == signal.SIGTERM:
                    proc.send_signal(signal.SIGCONT)  # a paused server cannot exit
                proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _running.discard(proc)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass
class RedisServer(LoopbackServer):
    """One redis-server process on ``127.0.0.1:port`` with its files in ``dir``."""

    what: ClassVar[str] = "redis-server"

    port: int
    dir: Path
    extra: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    conf: Path | None = None  # a config file (it comes first on redis-server's command line)

    @classmethod
    def start(
        cls,
        dir: Path,
        *,
        extra: Sequence[str] = (),
        port: int | None = None,
        conf: Path | None = None,
    ) -> RedisServer:
        if REDIS_SERVER is None:
            raise RuntimeError("redis-server is not on PATH")
        dir.mkdir(parents=True, exist_ok=True)

        def make(free: int) -> RedisServer:
            server = cls(free, dir, tuple(extra), conf=conf)
            server._spawn()
            return server

        return on_free_port(make, port)

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    @property
    def log(self) -> Path:
        return self.dir / f"redis-{self.port}.log"

    def _spawn(self, timeout: float = 10.0) -> None:
        assert REDIS_SERVER is not None
        args = [
            REDIS_SERVER,
            *([str(self.conf)] if self.conf is not None else []),
            "--port", str(self.port),
            "--bind", HOST,
            "--dir", str(self.dir),
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--logfile", str(self.log),
            *self.extra,
        ]  # fmt: skip
        self._launch(args, lambda: _ping(self.port), timeout)

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, **kwargs)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no save."""
        self.stop(signal.SIGKILL)

    def restart(self, downtime: float = 0.0) -> None:
        """Stop and start again on the same port and files (without persistence: empty)."""
        self.stop()
        time.sleep(downtime)
        self._spawn()

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)


def _cluster_node_args(dir: Path, port: int, bus: int, node_timeout_ms: int) -> list[str]:
    return [
        "--cluster-enabled", "yes",
        "--cluster-config-file", str(dir / f"nodes-{port}.conf"),
        "--cluster-node-timeout", str(node_timeout_ms),
        "--cluster-port", str(bus),
        "--cluster-announce-ip", HOST,
        "--cluster-require-full-coverage", "yes",
        "--repl-diskless-sync-delay", "0",  # replicas sync at once, not 5 s later
    ]  # fmt: skip


@dataclass
class RedisCluster:
    """A Redis Cluster on loopback: ``masters`` masters with ``replicas`` replicas each."""

    dir: Path
    nodes: list[RedisServer] = field(default_factory=list)

    @classmethod
    def start(
        cls, dir: Path, *, masters: int = 3, replicas: int = 1, node_timeout_ms: int = 1000
    ) -> RedisCluster:
        if REDIS_CLI is None:
            raise RuntimeError("redis-cli is not on PATH")
        cluster = cls(dir)
        try:
            for _ in range(masters * (1 + replicas)):
                port, bus = free_port(), free_port()
                extra = _cluster_node_args(dir, port, bus, node_timeout_ms)
                cluster.nodes.append(RedisServer.start(dir, extra=extra, port=port))
            addresses = [f"{HOST}:{node.port}" for node in cluster.nodes]
            create = ["--cluster", "create", *addresses, "--cluster-replicas", str(replicas)]
            subprocess.run(
                [REDIS_CLI, *create, "--cluster-yes"],
                check=True,
                capture_output=True,
                timeout=60,
            )
            cluster.wait_healthy()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def live(self) -> list[RedisServer]:
        return [node for node in self.nodes if node.alive()]

    def client(self, **kwargs: Any) -> redis.RedisCluster:
        nodes = [redis.cluster.ClusterNode(HOST, node.port) for node in self.live()]
        return redis.RedisCluster(startup_nodes=nodes, **kwargs)

    def _admin(self, node: RedisServer) -> redis.Redis:
        return node.client(socket_timeout=2, decode_responses=True)

    @staticmethod
    def _info(admin: redis.Redis) -> dict[str, str]:
        reply = admin.execute_command("CLUSTER INFO")
        if isinstance(reply, dict):
            return {str(k): str(v) for k, v in reply.items()}
        return dict(line.split(":", 1) for line in str(reply).split() if ":" in line)

    @staticmethod
    def _ranges(admin: redis.Redis) -> list[tuple[int, int, int]]:
        """(first slot, last slot, master port) as ``admin`` sees them."""
        reply = admin.execute_command("CLUSTER SLOTS")
        if isinstance(reply, dict):  # some redis-py versions parse it
            return [(s, e, int(info["primary"][1])) for (s, e), info in reply.items()]
        return [(int(r[0]), int(r[1]), int(r[2][1])) for r in reply]

    def slot_owners(self) -> dict[int, int]:
        """Port of the master serving each slot range (by first slot), as a live node sees it."""
        with self._admin(self.live()[0]) as admin:
            return {start: port for start, _, port in self._ranges(admin)}

    def master_of(self, key: str) -> RedisServer:
        with self._admin(self.live()[0]) as admin:
            slot = int(admin.execute_command("CLUSTER KEYSLOT", key))
            ranges = self._ranges(admin)
        for start, end, port in ranges:
            if start <= slot <= end:
                return next(node for node in self.nodes if node.port == port)
        raise LookupError(f"no master serves slot {slot}")

    def healthy(self) -> bool:
        """Every live node says the cluster is ok, all slots are served by live masters, and
        every replica is in sync with its master."""
        live = {node.port for node in self.live()}
        try:
            for node in self.live():
                with self._admin(node) as admin:
                    info = self._info(admin)
                    if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
                        return False
                    replication = admin.info("replication")
                    if replication["role"] == "slave" and (
                        replication.get("master_link_status") != "up"
                        or int(replication.get("master_port", 0)) not in live
                    ):
                        return False
            return all(port in live for port in self.slot_owners().values())
        except (redis.RedisError, OSError, KeyError, IndexError):
            return False

    def wait_healthy(self, timeout: float = 30.0) -> None:
        wait_until(self.healthy, timeout, "a healthy cluster")

    def kill_master(self, key: str = "", timeout: float = 30.0) -> RedisServer:
        """SIGKILL the master serving ``key``'s slot; return once a replica has taken over."""
        victim = self.master_of(key)
        victim.kill()

        def failed_over() -> bool:
            try:
                if victim.port in self.slot_owners().values():
                    return False
                for node in self.live():
                    with self._admin(node) as admin:
                        if self._info(admin).get("cluster_state") != "ok":
                            return False
                return True
            except (redis.RedisError, OSError):
                return False

        wait_until(failed_over, timeout, f"a replica to replace master {victim.port}")
        return victim

    def restart(self, node: RedisServer, timeout: float = 30.0) -> None:
        """Start a stopped node again with its cluster config: it rejoins as a replica."""
        node._spawn()
        self.wait_healthy(timeout)

    def flush(self) -> None:
        for node in self.live():
            with self._admin(node) as admin, contextlib.suppress(redis.ReadOnlyError):
                if admin.info("replication")["role"] == "master":
                    admin.flushall()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop(signal.SIGKILL)

    def __enter__(self) -> RedisCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass
class RedisSentinelSet:
    """A master, one replica and one sentinel (quorum 1) watching them as ``service``."""

    dir: Path
    master: RedisServer
    replica: RedisServer
    sentinel: RedisServer
    service: str = "pochta"

    @classmethod
    def start(cls, dir: Path, service: str = "pochta") -> RedisSentinelSet:
        master = RedisServer.start(dir / "master", extra=("--repl-diskless-sync-delay", "0"))
        servers = [master]
        try:
            replica = RedisServer.start(
                dir / "replica", extra=("--replicaof", HOST, str(master.port))
            )
            servers.append(replica)

            def in_sync() -> bool:
                try:
                    with replica.client(socket_timeout=2, decode_responses=True) as node:
                        return node.info("replication").get("master_link_status") == "up"
                except (redis.RedisError, OSError):
                    return False

            wait_until(in_sync, 30, "the replica to sync")  # the sentinel's first look finds it
            port = free_port()
            (dir / "sentinel").mkdir(parents=True, exist_ok=True)
            conf = dir / "sentinel" / "sentinel.conf"  # the sentinel rewrites it
            conf.write_text(
                f"sentinel monitor {service} {HOST} {master.port} 1\n"
                f"sentinel down-after-milliseconds {service} 1000\n"
                f"sentinel failover-timeout {service} 10000\n"
            )
            sentinel = RedisServer.start(
                dir / "sentinel", port=port, conf=conf, extra=("--sentinel",)
            )
            servers.append(sentinel)
            found = cls(dir, master, replica, sentinel, service)
            wait_until(found.replica_known, 30, "the sentinel to know the replica")
        except BaseException:
            for server in servers:
                server.stop(signal.SIGKILL)
            raise
        return found

    def _sentinel(self) -> redis.Redis:
        return self.sentinel.client(socket_timeout=2, decode_responses=True)

    def master_port(self) -> int:
        """The master's port as clients learn it (SENTINEL MASTER: it changes once the
        failover is over, a little after GET-MASTER-ADDR-BY-NAME does)."""
        with self._sentinel() as admin:
            state = admin.execute_command("SENTINEL", "MASTER", self.service)
            if isinstance(state, list):
                state = dict(zip(state[::2], state[1::2], strict=True))
            return int(state["port"])

    def replica_known(self) -> bool:
        """The sentinel sees a replica in sync, so a failover can pick it."""
        try:
            with self._sentinel() as admin:
                replicas = admin.execute_command("SENTINEL", "REPLICAS", self.service)
        except (redis.RedisError, OSError):
            return False
        for replica in replicas:
            if isinstance(replica, list):
                replica = dict(zip(replica[::2], replica[1::2], strict=True))
            info: dict[str, str] = replica
            if "s_down" not in info.get("flags", "") and info.get("master-link-status") == "ok":
                return True
        return False

    def failover(self, timeout: float = 30.0) -> None:
        """Promote the replica (SENTINEL FAILOVER); return once the sentinel names it and the
        old master follows it, answering writes with READONLY. (The sentinel would turn the
        old master into a replica on its next look, up to 10 s later; this does it at once.)"""
        old = self.master_port()
        with self._sentinel() as admin:
            admin.execute_command("SENTINEL", "FAILOVER", self.service)
        wait_until(lambda: self.master_port() != old, timeout, "the sentinel's failover")
        with self.master.client(socket_timeout=2) as node:
            node.execute_command("REPLICAOF", HOST, str(self.master_port()))

    def stop(self) -> None:
        for server in (self.sentinel, self.replica, self.master):
            server.stop(signal.SIGKILL)

    def __enter__(self) -> RedisSentinelSet:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# -- pytest fixtures (registered in tests/conftest.py) ------------------------------------------
def _need(binary: str | None, name: str) -> None:
    if binary is None:
        pytest.skip(f"{name} is not on PATH")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the whole session; use ``redis_client`` for a flushed client."""
    _need(REDIS_SERVER, "redis-server")
    with RedisServer.start(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A client of the session's redis-server, emptied first."""
    if not redis_server.alive():
        redis_server._spawn()
    client = redis_server.client()
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def redis_factory(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Starts redis-servers of one's own (to restart or kill), stopped at teardown."""
    _need(REDIS_SERVER, "redis-server")
    started: list[RedisServer] = []

    def start(*extra: str) -> RedisServer:
        server = RedisServer.start(tmp_path / f"redis-{len(started)}", extra=extra)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop(signal.SIGKILL)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A 3-master, 1-replica-each Redis Cluster for the session. A test that kills a master
    restarts it (``cluster.restart``) before it ends."""
    _need(REDIS_SERVER, "redis-server")
    _need(REDIS_CLI, "redis-cli")
    with RedisCluster.start(tmp_path_factory.mktemp("redis-cluster")) as cluster:
        yield cluster


@pytest.fixture
def redis_cluster_client(redis_cluster: RedisCluster) -> Iterator[redis.RedisCluster]:
    """A client of the session's cluster, emptied first."""
    redis_cluster.wait_healthy()
    redis_cluster.flush()
    client = redis_cluster.client()
    yield client
    client.close()
