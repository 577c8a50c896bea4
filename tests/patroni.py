"""PostgreSQL that fails over, for the several-machines recipe (tests/machines.py): three
etcd members and two PostgreSQL servers managed by Patroni (Debian's ``etcd-server``; see
below for which ``patroni``), each on a namespace host of its own, everything over TLS with
the installation's CA (etcd's clients and peers, Patroni's REST API, PostgreSQL, its
replication).

    cluster = PatroniCluster(dir, ca_dir_of, hosts, etcd_hosts, admin)
    cluster.start()                     # etcd, then Patroni; waits for a leader and a sync standby
    cluster.leader()                    # "db" (the host whose PostgreSQL is primary)
    cluster.kill("db")                  # the host's Patroni and PostgreSQL SIGKILLed (and its etcd)
    cluster.wait_leader(not_="db")      # the standby promoted

``synchronous_mode: true`` with ``synchronous_commit = on``: a commit returns only once the
synchronous standby has flushed it, and Patroni promotes only that standby, so a failover
loses no committed transaction. ``ttl``, ``loop_wait`` and ``retry_timeout`` are short (a
failover within seconds); README's recipe keeps them.

Which Patroni: ``$SEVERAL_MACHINES_PATRONI`` if set, else the one installed next to this
Python (the ``test`` extra's, from PyPI: ``>=3.0.3,<3.2``) when it is at least ``FIXED`` and
``postgres`` can run it, else Debian's (``fixed()`` says which kind runs). Before 3.0.3 a leader
whose loop was held past ``ttl`` (its PostgreSQL frozen, Patroni awake) writes the leader key
back without a compare when it resumes (patroni/patroni PR #2689) and undoes a promotion made
meanwhile, with what was committed on the promoted server. From 3.2 ``ttl`` is at least 20 s.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import pwd
import shutil
import signal
import ssl
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests import netns
from tests.pgserver import PASSWORD, SUPERUSER, _run_as, bindir
from tests.tlsfiles import TLSFiles

ETCD = shutil.which("etcd")
# the first Patroni whose etcd3 leader-key update is a compare-and-set (PR #2689)
FIXED = (3, 0, 3)
PG_PORT, REST_PORT, ETCD_CLIENT, ETCD_PEER = 5432, 8008, 2379, 2380
SCOPE = "pochta"
REPLICATOR, REPLICATOR_PASSWORD = "replicator", "several-machines-replication-7a1c"
# README's failover settings: the leader key lives ``TTL`` s without its holder's renewal;
# Patroni's loop runs every ``LOOP_WAIT`` s; a DCS or PostgreSQL call is retried for
# ``RETRY_TIMEOUT`` s before the leader demotes itself (loop_wait + 2 * retry_timeout <= ttl)
TTL, LOOP_WAIT, RETRY_TIMEOUT = 8, 1, 3


def version_of(exe: str) -> tuple[int, ...] | None:
    """``exe --version`` ("patroni 4.1.5") as numbers; None when it does not run or say."""
    try:
        out = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.split()
    if len(words) < 2 or words[0] != "patroni":
        return None
    numbers = []
    for part in words[1].split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, part))  # "0rc1": 0
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers) or None


def _runs_as_server(script: Path) -> bool:
    """Whether the user the servers run as (``postgres`` under root) reaches ``script`` and its
    interpreter: every directory above both is searchable by others (a venv made from a
    root's pyenv, under a 0700 /root, is not)."""
    if _run_as() is None:
        return True
    with contextlib.suppress(OSError):
        line = script.read_bytes().split(b"\n", 1)[0]
        paths = [script.resolve()]
        if line.startswith(b"#!") and line[2:].split():
            paths.append(Path(os.fsdecode(line[2:].split()[0])).resolve())
        reached = [d for path in paths for d in (path, *path.parents)]
        return all(d.stat().st_mode & stat.S_IXOTH for d in reached)
    return False


@functools.cache
def chosen() -> tuple[str, tuple[int, ...] | None] | None:
    """The Patroni the cluster runs and its version (None: none installed):
    ``$SEVERAL_MACHINES_PATRONI``; else this Python's (a virtual environment's bin: the
    ``test`` extra's) if it is at least ``FIXED`` and the servers' user can run it; else the
    one on PATH (Debian's ``patroni``)."""
    named = os.environ.get("SEVERAL_MACHINES_PATRONI")
    if named:
        return named, version_of(named)
    beside = Path(sys.executable).parent / "patroni"  # not resolved: the venv's bin
    if beside.is_file() and os.access(beside, os.X_OK) and _runs_as_server(beside):
        found = version_of(str(beside))
        if found is not None and found >= FIXED:
            return str(beside), found
    # the first on PATH that the servers' user can run: with the venv activated (as CI does)
    # PATH finds the venv's own first, which a venv made from root's pyenv keeps from them
    found_on_path = [
        Path(d) / "patroni" for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if d
    ]
    usable = [p for p in found_on_path if p.is_file() and os.access(p, os.X_OK)]
    if not usable:
        return None
    on_path = next((p for p in usable if _runs_as_server(p)), usable[0])
    return str(on_path), version_of(str(on_path))


def fixed() -> bool:
    """Whether the chosen Patroni checks the leader key before writing it (>= 3.0.3)."""
    got = chosen()
    return got is not None and got[1] is not None and got[1] >= FIXED


def describe() -> str:
    """``"patroni 4.1.5 (/path/bin/patroni)"``, for logs and summaries."""
    got = chosen()
    if got is None:
        return "no patroni"
    exe, ver = got
    return f"patroni {'.'.join(map(str, ver)) if ver else '?'} ({exe})"


def missing() -> str | None:
    """What is not installed for a cluster (None: all is)."""
    if chosen() is None:
        return "patroni is not installed (pip install 'patroni[etcd3,psycopg3]' or Debian's)"
    if ETCD is None:
        return "etcd-server (etcd) is not installed"
    return None


def _owned(path: Path, user: str | None, mode: int | None = None) -> None:
    if mode is not None:
        path.chmod(mode)
    if user is not None:
        pw = pwd.getpwnam(user)
        os.chown(path, pw.pw_uid, pw.pw_gid)


@dataclass(eq=False)
class Member:
    """One program of the cluster on its host, started with ``ip netns exec``."""

    name: str
    host: netns.Host
    args: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as sink:
            self.proc = self.host.popen(self.args, stdout=sink, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(OSError):
            proc.send_signal(sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(eq=False)
class PatroniCluster:
    """etcd on ``etcd_hosts``, Patroni with PostgreSQL on ``pg_hosts`` (names of hosts of
    ``hosts``); ``tls(name)`` is a host's certificate files; ``admin`` runs a callable on
    the host the checks come from."""

    dir: Path
    hosts: dict[str, netns.Host]
    pg_hosts: Sequence[str]
    etcd_hosts: Sequence[str]
    tls: Callable[[str], TLSFiles]
    admin: Callable[[Callable[[], Any]], Any]
    admin_ca: Path
    subnet: str
    etcd: dict[str, Member] = field(default_factory=dict)
    patroni: dict[str, Member] = field(default_factory=dict)
    base: Path | None = None  # the servers' files, where their user reaches them
    # WAL archiving (``pochta backup``'s drill): each server's archive_command copies its
    # segments into ``wal_archive()``, which the admin host reads. The hosts share this
    # machine's filesystem; in production it is another machine or object storage
    archive: bool = False

    # -- building it ------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> None:
        why = missing()
        if why is not None:
            raise RuntimeError(why)
        user = _run_as()
        self.base = Path(tempfile.mkdtemp(prefix="pochta-patroni-"))
        _owned(self.base, user, 0o755)
        if self.archive:
            self.wal_archive().mkdir()
            _owned(self.wal_archive(), user, 0o755)
        peers = ",".join(
            f"{n}=https://{self.hosts[n].address}:{ETCD_PEER}" for n in self.etcd_hosts
        )
        for name in self.etcd_hosts:
            self.etcd[name] = self._etcd(name, peers)
            self.etcd[name].start()
        self._check_runs(self.pg_hosts[0], user)
        for name in self.pg_hosts:
            self.patroni[name] = self._patroni(name, user)
        # the first starts alone and bootstraps; the other then copies it (pg_basebackup)
        first, *others = self.pg_hosts
        self.patroni[first].start()
        self.wait_leader(timeout=timeout)
        for name in others:
            self.patroni[name].start()
        self.wait_sync(timeout=timeout)

    def wal_archive(self) -> Path:
        """Where archive_command copies WAL (with ``archive``)."""
        assert self.base is not None
        return self.base / "wal-archive"

    def _archiving(self) -> tuple[dict[str, Any], list[str]]:
        """With ``archive``: the servers' archiving parameters (README, Backups: the primary
        archives; a standby, with ``on``, does not until it is promoted) and the pg_hba line
        that lets ``pochta backup create`` (pg_basebackup, as the superuser) in."""
        if not self.archive:
            return {}, []
        wal = self.wal_archive()
        parameters = {
            "archive_mode": "on",
            "archive_command": f"test ! -f {wal}/%f && cp %p {wal}/%f",
        }
        return parameters, [f"hostssl replication {SUPERUSER} {self.subnet}.0/24 scram-sha-256"]

    def _check_runs(self, name: str, user: str | None) -> None:
        """The chosen Patroni runs as ``user`` on host ``name``: a virtual environment's
        interpreter under a directory that user cannot reach (a root's pyenv) fails here, said,
        rather than as a cluster with no leader."""
        got = chosen()
        assert got is not None
        run_as = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"] if user else []
        done = self.hosts[name].run(
            [*run_as, got[0], "--version"], capture_output=True, text=True, timeout=60
        )
        if done.returncode != 0 or not done.stdout.startswith("patroni "):
            raise RuntimeError(
                f"{describe()} does not run as {user or 'this user'} on {name}:"
                f" {(done.stderr or done.stdout).strip()[-300:]} (set SEVERAL_MACHINES_PATRONI to a"
                " patroni that user can run, e.g. in a venv made from /usr/bin/python3)"
            )

    def _etcd(self, name: str, peers: str) -> Member:
        host = self.hosts[name]
        tls = self.tls(name)
        assert self.base is not None
        data = self.base / f"etcd-{name}"
        a = host.address
        args = [
            str(ETCD), "--name", name, "--data-dir", str(data),
            "--listen-client-urls", f"https://{a}:{ETCD_CLIENT}",
            "--advertise-client-urls", f"https://{a}:{ETCD_CLIENT}",
            "--listen-peer-urls", f"https://{a}:{ETCD_PEER}",
            "--initial-advertise-peer-urls", f"https://{a}:{ETCD_PEER}",
            "--initial-cluster", peers, "--initial-cluster-state", "new",
            "--initial-cluster-token", SCOPE,
            "--cert-file", str(tls.cert), "--key-file", str(tls.key),
            "--trusted-ca-file", str(tls.ca), "--client-cert-auth",
            "--peer-cert-file", str(tls.cert), "--peer-key-file", str(tls.key),
            "--peer-trusted-ca-file", str(tls.ca), "--peer-client-cert-auth",
            "--heartbeat-interval", "100", "--election-timeout", "1000",
        ]  # fmt: skip
        return Member(f"etcd {name}", host, args, self.dir / f"etcd-{name}.log")

    def _patroni(self, name: str, user: str | None) -> Member:
        assert self.base is not None
        host = self.hosts[name]
        home = self.base / name
        home.mkdir()
        _owned(home, user, 0o700)
        tls = self.tls(name)  # copies its user can read; the key its alone
        files = {}
        for src, mode in ((tls.ca, 0o644), (tls.cert, 0o644), (tls.key, 0o600)):
            dst = home / src.name
            shutil.copyfile(src, dst)
            _owned(dst, user, mode)
            files[src.name] = str(dst)
        ca, cert, key = files["ca.pem"], files["cert.pem"], files["key.pem"]
        pg = bindir()
        assert pg is not None
        a = host.address
        client_tls = {"sslmode": "verify-full", "sslrootcert": ca}
        archiving, backup_hba = self._archiving()
        config: dict[str, Any] = {
            "scope": SCOPE,
            "name": name,
            "log": {"level": "INFO"},
            "restapi": {
                "listen": f"{a}:{REST_PORT}",
                "connect_address": f"{a}:{REST_PORT}",
                "certfile": cert,
                "keyfile": key,
                "cafile": ca,
                # a client certificate of the CA for every request that changes anything
                # (switchover, restart, reinitialize); reads (GET /cluster) need none
                "verify_client": "optional",
            },
            "etcd3": {
                "hosts": [f"{self.hosts[n].address}:{ETCD_CLIENT}" for n in self.etcd_hosts],
                "protocol": "https",
                "cacert": ca,
                "cert": cert,
                "key": key,
            },
            "bootstrap": {
                "dcs": {
                    "ttl": TTL,
                    "loop_wait": LOOP_WAIT,
                    "retry_timeout": RETRY_TIMEOUT,
                    "maximum_lag_on_failover": 1 << 20,
                    "synchronous_mode": True,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "parameters": {
                            "synchronous_commit": "on",
                            "wal_level": "replica",
                            "hot_standby": "on",
                            "wal_log_hints": "on",
                            "max_wal_senders": 10,
                            "max_replication_slots": 10,
                            "max_connections": 200,
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, {"auth": "scram-sha-256"}],
            },
            "postgresql": {
                "listen": f"{a}:{PG_PORT}",
                "connect_address": f"{a}:{PG_PORT}",
                "data_dir": str(home / "data"),
                "bin_dir": str(pg),
                "pgpass": str(home / "pgpass"),
                "use_unix_socket": True,
                "authentication": {
                    "superuser": {"username": SUPERUSER, "password": PASSWORD, **client_tls},
                    "replication": {
                        "username": REPLICATOR,
                        "password": REPLICATOR_PASSWORD,
                        **client_tls,
                    },
                    "rewind": {"username": SUPERUSER, "password": PASSWORD, **client_tls},
                },
                "parameters": {
                    "unix_socket_directories": str(home),
                    "ssl": "on",
                    "ssl_cert_file": cert,
                    "ssl_key_file": key,
                    "ssl_ca_file": ca,
                    # a test: a killed server still loses nothing, a power loss would
                    "fsync": "off",
                    "full_page_writes": "on",
                    **archiving,
                },
                "pg_hba": [
                    "local all all scram-sha-256",  # Patroni's own, with its password
                    f"hostssl replication {REPLICATOR} {self.subnet}.0/24 scram-sha-256",
                    f"hostssl all {SUPERUSER} {self.subnet}.0/24 scram-sha-256",
                    *backup_hba,
                ],
            },
        }
        path = home / "patroni.yml"
        path.write_text(json.dumps(config, indent=1))  # JSON is YAML
        _owned(path, user, 0o600)
        run_as = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"] if user else []
        env_home = ["env", f"HOME={home}"]
        got = chosen()
        assert got is not None
        return Member(
            f"patroni {name}", host, [*run_as, *env_home, got[0], str(path)],
            self.dir / f"patroni-{name}.log",
        )  # fmt: skip

    # -- asking it --------------------------------------------------------------------------
    def cluster(self) -> dict[str, Any] | None:
        """Patroni's view (``GET /cluster``) from any member that answers, on the admin host."""

        def ask() -> dict[str, Any] | None:
            verify = ssl.create_default_context(cafile=self.admin_ca)
            for name in self.pg_hosts:
                url = f"https://{self.hosts[name].address}:{REST_PORT}/cluster"
                try:
                    r = httpx.get(url, timeout=2, verify=verify)
                    if r.status_code == 200:
                        found: dict[str, Any] = r.json()
                        return found
                except (httpx.HTTPError, ValueError):
                    continue
            return None

        got: dict[str, Any] | None = self.admin(ask)
        return got

    def leader(self) -> str | None:
        """The member whose PostgreSQL is the running primary (None: none now)."""
        found = self.cluster()
        for m in (found or {}).get("members", []):
            if m.get("role") == "leader" and m.get("state") == "running":
                return str(m["name"])
        return None

    def sync_standby(self) -> str | None:
        found = self.cluster()
        for m in (found or {}).get("members", []):
            if m.get("role") == "sync_standby" and m.get("state") in ("running", "streaming"):
                return str(m["name"])
        return None

    def _wait(self, what: str, check: Callable[[], str | None], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while (got := check()) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Patroni: no {what} within {timeout:g} s\n{self.logs()}")
            time.sleep(0.2)
        return got

    def wait_leader(self, not_: str | None = None, timeout: float = 60.0) -> str:
        def check() -> str | None:
            got = self.leader()
            return got if got is not None and got != not_ else None

        return self._wait("leader" + (f" other than {not_}" if not_ else ""), check, timeout)

    def wait_sync(self, timeout: float = 60.0) -> str:
        return self._wait("synchronous standby", self.sync_standby, timeout)

    # -- faults -----------------------------------------------------------------------------
    def kill(self, name: str, *, etcd: bool = True) -> None:
        """Host ``name`` lost: its Patroni and PostgreSQL (and etcd member) SIGKILLed, as a
        crash or a power loss would stop them."""
        postgres = self._postgres_pids(name)
        self.patroni[name].kill(signal.SIGKILL)
        for pid in postgres:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if etcd and name in self.etcd:
            self.etcd[name].kill(signal.SIGKILL)

    def restart(self, name: str) -> None:
        """The lost host back: its etcd member and Patroni (which rejoins as a replica)."""
        if name in self.etcd and not self.etcd[name].alive():
            self.etcd[name].start()
        if not self.patroni[name].alive():
            self.patroni[name].start()

    def _postgres_pids(self, name: str) -> list[int]:
        """The PostgreSQL processes of host ``name`` (their command line names its data)."""
        assert self.base is not None
        data = str(self.base / name / "data")
        pids = []
        for pid in self.hosts[name].pids():
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if any(data.encode() == part for part in cmd) or b"postgres:" in cmd[0]:
                    pids.append(pid)
        return pids

    def logs(self) -> str:
        parts = []
        for m in [*self.etcd.values(), *self.patroni.values()]:
            if m.log.exists():
                parts.append(f"--- {m.name} ---\n{m.log.read_text(errors='replace')[-2000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Everything SIGKILLed (a test's end: nothing to keep; SIGTERM would wait for each
        PostgreSQL's shutdown)."""
        for m in self.patroni.values():
            m.kill(signal.SIGKILL)
        for name in self.pg_hosts:
            for pid in self._postgres_pids(name):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for m in self.etcd.values():
            m.kill(signal.SIGKILL)
        if self.base is not None:
            shutil.rmtree(self.base, ignore_errors=True)
