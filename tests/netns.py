"""Hosts for tests as Linux network namespaces on this machine: a private network of several
"machines", each with its own address, ports and loopback, joined by a bridge that lives in a
namespace of its own (nothing is added to this machine's own network).

    with Network.create("10.77.0") as net:         # namespaces pochta-<pid>-*
        a = net.add_host("a", 1)                    # 10.77.0.1 on eth0, lo up
        proc = a.popen(["redis-server", "--bind", a.address])   # ip netns exec ...
        a.call(lambda: socket.create_connection((a.address, 6379)))  # from inside a
        with a.threads(4) as pool: ...              # a pool whose threads live in a

Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2; :func:`unavailable` says why a
network cannot be made here. Every namespace is named ``pochta-<pid>-<name>``; ``remove()``
kills what runs inside (``ip netns pids``) and deletes them, also at exit, and namespaces
left by a run whose process is gone are removed when the next network is made.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

IP = shutil.which("ip") or next(
    (p for p in ("/usr/sbin/ip", "/sbin/ip") if os.access(p, os.X_OK)), None
)
PREFIX = "pochta-"
CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
NETNS_DIR = Path("/run/netns")

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
T = TypeVar("T")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert IP is not None
    done = subprocess.run([IP, *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def unavailable() -> str | None:
    """Why network namespaces cannot be made here (None: they can). Tries one."""
    if IP is None:
        return "iproute2 is not installed (`ip` not found; Debian: apt-get install iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    done = _ip("netns", "add", probe, check=False)
    if done.returncode != 0:
        return f"cannot make a network namespace: {done.stderr.strip()}"
    try:
        veth = _ip(
            "-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1", check=False
        )
        if veth.returncode != 0:
            return f"cannot make a veth pair in a namespace: {veth.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the thread that started it dies."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _enter(name: str) -> None:
    """Move the calling thread into the network namespace ``name``: sockets it opens from now
    on are that host's."""
    fd = os.open(NETNS_DIR / name, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {name}: {os.strerror(err)}")
    finally:
        os.close(fd)


def _pids(name: str) -> list[int]:
    done = _ip("netns", "pids", name, check=False)
    return [int(p) for p in done.stdout.split() if p.isdigit()]


def _kill_inside(name: str) -> None:
    """SIGKILL every process of namespace ``name`` (all started by this run), until none is."""
    for _ in range(50):
        pids = _pids(name)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _remove_stale() -> None:
    """Namespaces ``pochta-<pid>-*`` of a run whose process is gone (killed before its exit
    handlers ran): what runs inside is killed and they are deleted."""
    if not NETNS_DIR.is_dir():
        return
    for path in NETNS_DIR.iterdir():
        parts = path.name.split("-")
        if len(parts) < 3 or parts[0] + "-" != PREFIX or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid == os.getpid() or Path(f"/proc/{pid}").exists():
            continue
        _kill_inside(path.name)
        _ip("netns", "del", path.name, check=False)


@dataclass
class Host:
    """One namespace with ``address`` on its ``eth0``."""

    name: str  # the namespace's name
    address: str

    def command(self, args: Sequence[str]) -> list[str]:
        assert IP is not None
        return [IP, "netns", "exec", self.name, *args]

    def popen(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start ``args`` inside (``ip netns exec`` execs it: the pid is the program's). It
        is SIGKILLed if the thread that started it dies first (a run cut short without its
        exit handlers; a program that changes its user, such as PostgreSQL's, loses this,
        and is killed with its namespace by the next run)."""
        kwargs.setdefault("preexec_fn", _die_with_parent)
        return subprocess.Popen(self.command(args), **kwargs)

    def run(self, args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.command(args), **kwargs)

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` in a new thread that lives in this host: its sockets are the host's."""
        result: list[T] = []
        error: list[BaseException] = []

        def inside() -> None:
            try:
                _enter(self.name)
                result.append(fn())
            except BaseException as exc:
                error.append(exc)

        thread = threading.Thread(target=inside, name=f"in-{self.name}")
        thread.start()
        thread.join()
        if error:
            raise error[0]
        return result[0]

    def threads(self, n: int) -> ThreadPoolExecutor:
        """A pool of ``n`` threads that live in this host."""
        return ThreadPoolExecutor(n, initializer=_enter, initargs=(self.name,))

    def pids(self) -> list[int]:
        return _pids(self.name)


@dataclass(eq=False)
class Network:
    """A /24 (``subnet`` is its first three octets) of hosts joined by a bridge."""

    subnet: str
    tag: str
    hosts: dict[str, Host] = field(default_factory=dict)
    switch: str = ""

    @classmethod
    def create(cls, subnet: str = "10.77.0") -> Network:
        _remove_stale()
        net = cls(subnet, f"{PREFIX}{os.getpid()}-{next(_numbers)}")
        _live.add(net)
        try:
            net.switch = f"{net.tag}-sw"
            _ip("netns", "add", net.switch)
            _ip("-n", net.switch, "link", "set", "lo", "up")
            _ip("-n", net.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", net.switch, "link", "set", "br0", "up")
        except BaseException:
            net.remove()
            raise
        return net

    def add_host(self, name: str, last_octet: int) -> Host:
        host = Host(f"{self.tag}-{name}", f"{self.subnet}.{last_octet}")
        _ip("netns", "add", host.name)
        self.hosts[name] = host
        port = f"p{len(self.hosts)}"
        # the veth pair is born in the two namespaces: nothing appears in this machine's own
        _ip(
            "link", "add", "eth0", "netns", host.name, "type", "veth",
            "peer", "name", port, "netns", self.switch,
        )  # fmt: skip
        _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
        _ip("-n", host.name, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", host.name, "link", "set", "eth0", "up")
        _ip("-n", host.name, "link", "set", "lo", "up")
        return host

    def remove(self) -> None:
        """Kill everything running in the hosts, delete every namespace. Idempotent."""
        for name in [h.name for h in self.hosts.values()] + ([self.switch] if self.switch else []):
            _kill_inside(name)
            _ip("netns", "del", name, check=False)
        self.hosts.clear()
        self.switch = ""
        _live.discard(self)

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()


_numbers = iter(range(1, 1_000_000))
_live: set[Network] = set()


@atexit.register
def _remove_all() -> None:
    for net in list(_live):
        net.remove()


@contextlib.contextmanager
def network(subnet: str = "10.77.0") -> Iterator[Network]:
    net = Network.create(subnet)
    try:
        yield net
    finally:
        net.remove()
