"""pochta.redisconn against real servers on loopback: every [redis] mode (one server over TCP,
a unix socket, TLS, an ACL user; a Sentinel-watched master through a failover; a Cluster), the
script registry (NOSCRIPT after a flush), and the per-thread connections (given back when a
thread ends, never shared with a forked child, BLPOP under a short socket timeout)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import multiprocessing
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from pochta.antispam.shingles.counters import Ref
from pochta.antispam.shingles.counters.buckets import parse_window
from pochta.antispam.shingles.counters.redis import RedisStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.app import build
from pochta.config import RedisSettings, load_settings
from pochta.errors import ConfigError, GuardUnavailable, StorageError
from pochta.guard.alock import AsyncLocks
from pochta.guard.lock import Locks
from pochta.guard.lock.redis import AsyncRedisLockBackend, RedisLockBackend
from pochta.guard.ratelimit import RateLimiter
from pochta.guard.ratelimit.redis import RedisRateLimitBackend
from pochta.redisconn import AsyncScripts, Nodes, Script, Scripts, connect, connect_async
from pochta.types import Limit
from tests.servers import HOST, RedisCluster, RedisSentinelSet, RedisServer, free_port

pytestmark = pytest.mark.integration

SECRET = b"redisconn-secret-0123456789abcdef"
PASSWORD = "pw-0123456789-secret"

# KEYS[1] a counter; ARGV[1] how much to add; returns the new value
BUMP = Script("return redis.call('INCRBY', KEYS[1], ARGV[1])")


def works(client: redis.Redis | redis.RedisCluster, subject: str = "x") -> None:
    """A lock, a rate limit and the shingle counters on ``client``, as pochta uses them
    (``subject``: a rate-limit subject not charged before)."""
    with Locks(RedisLockBackend(client), ttl=5.0) as locks:
        with locks.acquire("job", timeout=2) as lease:
            assert locks.try_acquire("job") is None
        with locks.acquire("job", timeout=2) as again:
            assert again.token > lease.token
    limiter = RateLimiter(RedisRateLimitBackend(client), SECRET, tag="t")
    assert [limiter.hit((Limit("ip", 2, 60.0), subject)).allowed for _ in range(3)] == [
        True,
        True,
        False,
    ]
    counters = Counters(RedisStore(client, prefix=f"rc-{subject}"), buffered=False, cache_size=0)
    refs = [Ref(8, 0x1234), Ref(14, 0xFEDCBA9876543210)]
    counters.update(refs, "ham", 3)
    assert [v["24h"]["ham"] for v in counters.query(refs, [parse_window("24h")])] == [3, 3]
    counters.close()


# -- one server ----------------------------------------------------------------------------------
def test_an_acl_user_with_a_password(redis_factory: Callable[..., RedisServer]) -> None:
    server = redis_factory(
        "--user", "default", "off",
        "--user", "pochta", "on", f">{PASSWORD}", "~*", "&*", "+@all",
    )  # fmt: skip
    node = f"{HOST}:{server.port}"
    client = connect(RedisSettings(nodes=[node], username="pochta", password=PASSWORD), ping=True)  # type: ignore[arg-type]
    works(client)
    client.close()
    for wrong in (
        RedisSettings(nodes=[node], username="pochta", password="not-it"),  # type: ignore[arg-type]
        RedisSettings(nodes=[node]),
    ):
        with pytest.raises(ConfigError) as caught:
            connect(wrong, ping=True)
        message = caught.value.message
        assert message.startswith(f"cannot use Redis at {node} ([redis] settings): ")
        assert PASSWORD not in message and "not-it" not in message


def test_an_unreachable_redis_stops_pochta_at_start() -> None:
    node = f"{HOST}:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(ConfigError, match=rf"cannot use Redis at {node} \(\[redis\] settings\)"):
        connect(RedisSettings(nodes=[node], timeout=1.0), ping=True)
    assert time.monotonic() - started < 3.0  # one retry, no backoff


def test_a_unix_socket(redis_factory: Callable[..., RedisServer], tmp_path: Path) -> None:
    path = tmp_path / "redis.sock"
    redis_factory("--unixsocket", str(path), "--unixsocketperm", "700")
    client = connect(RedisSettings(nodes=[str(path)], db=3), ping=True)
    works(client)
    assert isinstance(client, redis.Redis) and client.dbsize() > 0
    with redis.Redis(unix_socket_path=str(path), db=0) as db0:
        assert db0.dbsize() == 0  # db = 3 was used
    client.close()


def _certificates(where: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate it signs for 127.0.0.1: (ca.pem, server.pem, server.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def cert(
        subject: str,
        key: ec.EllipticCurvePrivateKey,
        issuer: x509.Name,
        signer: ec.EllipticCurvePrivateKey,
        ca: bool,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))])
            builder = builder.add_extension(san, critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pochta test CA")])
    ca = cert("pochta test CA", ca_key, ca_name, ca_key, ca=True)
    server = cert(HOST, key, ca_name, ca_key, ca=False)
    paths = where / "ca.pem", where / "server.pem", where / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def test_tls(redis_factory: Callable[..., RedisServer], tmp_path: Path) -> None:
    ca, cert, key = _certificates(tmp_path)
    port = free_port()
    redis_factory(
        "--tls-port", str(port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
        "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no",
    )  # fmt: skip
    node = f"{HOST}:{port}"
    client = connect(RedisSettings(nodes=[node], tls=True, tls_ca_file=ca), ping=True)
    works(client)
    client.close()
    with pytest.raises(ConfigError, match="certificate verify failed"):  # not the system's CA
        connect(RedisSettings(nodes=[node], tls=True, timeout=1.0), ping=True)
    with pytest.raises(ConfigError, match=r"\[redis\] settings"):  # TLS port, plain client
        connect(RedisSettings(nodes=[node], timeout=1.0), ping=True)


# -- Sentinel ------------------------------------------------------------------------------------
@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[RedisSentinelSet]:
    with RedisSentinelSet.start(tmp_path / "sentinel") as found:
        yield found


def test_a_sentinel_watched_master_through_a_failover(sentinels: RedisSentinelSet) -> None:
    settings = RedisSettings(
        mode="sentinel", nodes=[f"{HOST}:{sentinels.sentinel.port}"], service=sentinels.service
    )
    client = connect(settings, ping=True)
    works(client)
    lost = threading.Event()
    locks = Locks(RedisLockBackend(client), ttl=6.0)  # longer than a failover on a busy host
    lease = locks.acquire("pair-7", on_lost=lambda _: lost.set())
    scripts = Scripts(client, StorageError)
    assert scripts.run(BUMP, ["n"], [1]) == 1
    assert isinstance(client, redis.Redis)
    client.wait(1, 2000)  # the replica has it all
    sentinels.failover()  # the old master now answers writes with READONLY
    assert sentinels.master_port() == sentinels.replica.port
    assert scripts.run(BUMP, ["n"], [1]) == 2  # this thread's connection moved to the new master
    moved = time.monotonic()
    deadline = moved + 5.0
    while lease.valid_until < moved + 5.9 and time.monotonic() < deadline:
        time.sleep(0.05)  # until the renewer (every ttl / 3) extended it on the new master
    assert lease.valid_until > moved + 5.9  # renewed after the failover
    assert lease.is_held() and not lost.is_set()
    lease.release()
    with locks.acquire("pair-7", timeout=2) as again:
        assert again.token > lease.token
    locks.close()
    works(client, "after-failover")

    async def also_async() -> None:
        aclient = connect_async(settings)
        async_locks = AsyncLocks(AsyncRedisLockBackend(aclient))
        async with async_locks.hold("job", timeout=2) as held:
            assert held.is_held()
        await async_locks.close()
        assert await AsyncScripts(aclient).run(BUMP, ["n"], [1]) == 3
        await aclient.aclose()

    asyncio.run(also_async())
    client.close()


# -- Cluster -------------------------------------------------------------------------------------
def test_a_cluster_from_settings(redis_cluster: RedisCluster) -> None:
    redis_cluster.wait_healthy()
    nodes = [f"{HOST}:{n.port}" for n in redis_cluster.live()[:2]]
    client = connect(RedisSettings(mode="cluster", nodes=nodes), ping=True)
    works(client)
    backend = RedisLockBackend(client)
    names = [f"renew-{i}" for i in range(12)]  # spread over the three masters
    for name in names[:-1]:
        assert backend.try_acquire(name, "me", 5.0).token is not None
    # one pipeline per node; each answer in its place (the last name is not held)
    assert backend.extend([(name, "me", 5.0) for name in names]) == [True] * 11 + [False]
    client.close()


# -- scripts and connections ---------------------------------------------------------------------
def test_scripts_are_sent_again_after_a_flush(redis_client: redis.Redis) -> None:
    direct, command_path = Scripts(redis_client), Scripts(redis_client, direct=False)
    for scripts in (direct, command_path):
        redis_client.script_flush()
        assert scripts.run(BUMP, ["a"], [1]) in (1, 2)
        redis_client.script_flush()
        assert scripts.run_many([(BUMP, ["b"], [1]), (BUMP, ["b"], [2])])[1] in (3, 6)
    redis_client.script_flush()
    ((reply,),) = Nodes.scatter([(redis_client, [(BUMP, ["c"], [5])])])
    assert reply == 5

    async def main() -> None:
        options = redis_client.connection_pool.connection_kwargs
        aclient = redis.asyncio.Redis(host=options["host"], port=options["port"])
        scripts = AsyncScripts(aclient)
        redis_client.script_flush()
        assert await scripts.run(BUMP, ["d"], [1]) == 1
        redis_client.script_flush()
        assert await scripts.run_many([(BUMP, ["d"], [1]), (BUMP, ["e"], [1])]) == [2, 1]
        await aclient.aclose()

    asyncio.run(main())
    assert direct.run(Script("return 'x'"), [], []) == b"x"
    with pytest.raises(redis.ResponseError):  # a script error is a bug: raised as it is
        direct.run(Script("return redis.call('NOSUCHCOMMAND')"), [], [])
    assert direct.run(BUMP, ["a"], [0]) in (1, 2)  # the connection is still in step


def _clients(client: redis.Redis) -> int:
    return int(client.info("clients")["connected_clients"])


def test_a_thread_gives_its_connection_back_when_it_ends(redis_server: RedisServer) -> None:
    observer = redis_server.client()
    scripts = Scripts(redis_server.client())
    before = _clients(observer)
    for i in range(30):  # one thread after another: each one's connection is the next one's
        thread = threading.Thread(target=scripts.run, args=(BUMP, [f"t{i}"], [1]))
        thread.start()
        thread.join()
    assert _clients(observer) <= before + 2
    scripts.close()
    observer.close()


def _in_child(scripts: Scripts, out: multiprocessing.Queue[object]) -> None:
    out.put(scripts.run(BUMP, ["forked"], [10]))


def test_a_forked_child_opens_its_own_connection(redis_client: redis.Redis) -> None:
    scripts = Scripts(redis_client)
    assert scripts.run(BUMP, ["forked"], [1]) == 1
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[object] = ctx.Queue()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        child = ctx.Process(target=_in_child, args=(scripts, out))
        child.start()
    assert out.get(timeout=20) == 11
    child.join(20)
    assert child.exitcode == 0
    assert scripts.run(BUMP, ["forked"], [100]) == 111  # the parent's connection is intact


def test_blpop_stays_under_a_short_socket_timeout(redis_server: RedisServer) -> None:
    client = redis_server.client(socket_timeout=0.4)
    scripts = Scripts(client, GuardUnavailable)
    started = time.monotonic()
    assert scripts.blpop("nobody-pushes", 10) is False  # blocks 0.2 s at most, no timeout
    assert time.monotonic() - started < 0.4
    client.rpush("pushed", "1")
    assert scripts.blpop("pushed", 10) is True

    async def main() -> None:
        aclient = redis.asyncio.Redis(host=HOST, port=redis_server.port, socket_timeout=0.4)
        assert await AsyncScripts(aclient).blpop("nobody-pushes", 10) is False
        await aclient.aclose()

    asyncio.run(main())
    scripts.close()
    client.close()


def test_a_dead_server_is_the_callers_error(redis_factory: Callable[..., RedisServer]) -> None:
    server = redis_factory()
    client = connect(RedisSettings(nodes=[f"{HOST}:{server.port}"], timeout=0.5))
    scripts = Scripts(client, GuardUnavailable)
    assert scripts.run(BUMP, ["k"], [1]) == 1
    server.kill()
    started = time.monotonic()
    with pytest.raises(GuardUnavailable, match="redis: "):
        scripts.run(BUMP, ["k"], [1])
    with pytest.raises(GuardUnavailable):
        scripts.run_many([(BUMP, ["k"], [1])] * 3)
    with pytest.raises(GuardUnavailable):
        scripts.blpop("k", 1)
    assert time.monotonic() - started < 3.0
    server._spawn()  # back (empty): the next call reconnects
    assert scripts.run(BUMP, ["k"], [1]) == 1
    client.close()


# -- app.py --------------------------------------------------------------------------------------
def test_the_app_builds_one_client_for_guard_and_shingles(
    redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no pochta.toml
    data = tmp_path / "data"
    settings = load_settings(
        data_dir=data,
        guard={"backend": "redis"},
        shingles={"backend": "redis", "key_prefix": "app"},
        redis={"nodes": [f"{HOST}:{redis_server.port}"]},
        antispam={"pool_processes": 0},
    )
    pochta = build(settings)
    try:
        assert pochta.redis is not None
        backend = pochta.locks.backend
        assert isinstance(backend, RedisLockBackend) and backend.io.client is pochta.redis
        store = pochta.shingles.counters.store
        assert isinstance(store, RedisStore) and store.client is pochta.redis
        with pochta.locks.acquire("app-job", timeout=1) as lease:
            assert pochta.redis.exists("pochta:lock:{app-job}") == 1
        assert lease.token > 0
    finally:
        pochta.close()
    gone = {"nodes": [f"{HOST}:{free_port()}"], "timeout": 0.5}
    for where in ("guard", "shingles"):
        with pytest.raises(ConfigError, match=r"cannot use Redis at .* \(\[redis\] settings\)"):
            build(load_settings(data_dir=data, redis=gone, **{where: {"backend": "redis"}}))
    unused = build(load_settings(data_dir=data, redis=gone))  # nobody uses Redis: not reached
    assert unused.redis is None
    unused.close()


def test_closing_gives_back_every_threads_connection(redis_client: redis.Redis) -> None:
    """After close() (from any thread) a thread that calls again gets a connection of its
    own, never the one the pool has since handed to another thread."""
    scripts = Scripts(redis_client)
    go = threading.Event()
    seen: list[tuple[object, float]] = []

    def worker() -> None:
        seen.append((scripts.run(BUMP, ["w"], [1]), 0.0))
        go.wait(10)
        started = time.monotonic()
        seen.append((scripts.run(BUMP, ["w"], [1]), time.monotonic() - started))

    thread = threading.Thread(target=worker)
    thread.start()
    while not seen:
        time.sleep(0.01)
    scripts.close()  # the worker's connection goes back to the pool...
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(scripts.blpop("nobody", 1.0)))
    waiter.start()  # ...and this thread takes it from there, blocked in BLPOP on it
    time.sleep(0.2)
    go.set()
    thread.join(10)
    waiter.join(10)
    (first, _), (second, took) = seen
    assert (first, second) == (1, 2) and took < 0.5  # not queued behind the BLPOP
    assert woken == [False]
