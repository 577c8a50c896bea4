"""Real nginx WebDAV storage nodes for tests and benchmarks: Debian's nginx with its dav module,
a config generated here, on a free loopback port, run as the current user with its pid, logs
and temporary files in its own directory; stopped afterwards.

    with NginxNode.start(tmp / "node-a", served=tmp / "a") as node:
        spec = node.disk("disk")            # DiskSpec("http://127.0.0.1:PORT", "disk")
        node.stop(); node.start_again()     # same port, same files

    files = TestCA.create(tmp / "ca").issue(tmp / "tls", ["127.0.0.1"])   # tests/tlsfiles.py
    node = NginxNode.start(tmp / "node-b", tls=files)   # https://127.0.0.1:PORT, and only
                                                        # clients with a certificate of that CA

The helpers work outside pytest too (the benchmarks use them); the fixtures at the bottom are
registered in ``tests/conftest.py``.
"""

from __future__ import annotations

import atexit
import contextlib
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pochta.types import DiskSpec
from tests.tlsfiles import TLSFiles

HOST = "127.0.0.1"
NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/sbin/nginx") if os.access(p, os.X_OK)), None
)

_running: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_running):
        workers = children(proc.pid)
        with contextlib.suppress(OSError):
            proc.kill()
        _kill_workers(proc.pid, workers)


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (an nginx master's workers; none when it is gone)."""
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _kill_workers(master: int, pids: list[int]) -> None:
    """SIGKILL to workers a master left behind: a master killed outright (SIGKILL) cannot stop
    them, and they would keep serving its port (a host that crashes loses them too). Only
    processes that are still this master's workers, now orphans (a pid may have been reused
    once a worker ended)."""
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid not in (master, 1) or b"nginx" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def node_config(
    *,
    port: int,
    served: Path,
    home: Path,
    workers: int = 1,
    host: str = HOST,
    allow: str | None = None,
    tls: TLSFiles | None = None,
) -> str:
    """An nginx config for one storage node: every directory under ``served`` is a disk at
    ``http://host:port/<name>``. The same directives as README's example, with every path of
    nginx's own inside ``home``; ``allow``: the only network that may connect (a CIDR);
    ``tls``: HTTPS with this certificate, and only clients with a certificate signed by its CA
    (``https://host:port/<name>``)."""
    access = f"allow {allow};\n        deny all;" if allow else ""
    listen = f"{host}:{port}"
    if tls is not None:
        listen += f""" ssl;
        ssl_certificate {tls.cert};
        ssl_certificate_key {tls.key};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_client_certificate {tls.ca};
        ssl_verify_client on"""
    user = ""
    if os.geteuid() == 0:  # root's workers would become "nobody": stay the current user
        user = f"user {pwd.getpwuid(os.getuid()).pw_name} {grp.getgrgid(os.getgid()).gr_name};"
    return f"""
daemon off;
master_process on;
worker_processes {workers};
{user}
pid {home}/nginx.pid;
error_log {home}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    types {{ }}
    default_type application/octet-stream;
    client_body_temp_path {served}/.nginx-body;
    proxy_temp_path {home}/proxy;
    fastcgi_temp_path {home}/fastcgi;
    uwsgi_temp_path {home}/uwsgi;
    scgi_temp_path {home}/scgi;
    keepalive_requests 100000;
    keepalive_timeout 75s;
    server {{
        listen {listen};
        {access}
        root {served};
        location / {{
            dav_methods PUT DELETE MOVE;
            create_full_put_path on;
            dav_access user:rw;
            client_max_body_size 0;
            client_body_buffer_size 1m;
            autoindex on;
            autoindex_format json;
        }}
    }}
}}
"""


def _answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class NginxNode:
    """One nginx on ``127.0.0.1:port`` serving the directories under ``served``."""

    port: int
    served: Path
    home: Path
    workers: int = 1
    tls: TLSFiles | None = None
    proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(
        cls,
        home: Path,
        *,
        served: Path | None = None,
        workers: int = 1,
        tls: TLSFiles | None = None,
    ) -> NginxNode:
        if NGINX is None:
            raise RuntimeError("nginx is not installed")
        home.mkdir(parents=True, exist_ok=True)
        served = served or home / "served"
        served.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):  # a free port can be taken before nginx binds it
            node = cls(free_port(), served, home, workers, tls)
            try:
                node._spawn()
                return node
            except RuntimeError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{HOST}:{self.port}"

    def disk(self, name: str) -> DiskSpec:
        """The disk ``served/name`` (created here) as pochta names it."""
        (self.served / name).mkdir(parents=True, exist_ok=True)
        return DiskSpec(self.url, name)

    def _spawn(self, timeout: float = 10.0) -> None:
        assert NGINX is not None
        conf = self.home / "nginx.conf"
        conf.write_text(
            node_config(
                port=self.port,
                served=self.served,
                home=self.home,
                workers=self.workers,
                tls=self.tls,
            )
        )
        log = self.home / "error.log"
        args = [NGINX, "-c", str(conf), "-p", str(self.home), "-e", str(log)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _running.add(self.proc)
        deadline = time.monotonic() + timeout
        while not _answers(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                tail = log.read_text()[-2000:] if log.exists() else ""
                raise RuntimeError(f"nginx on port {self.port} did not start:\n{tail}")
            time.sleep(0.01)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        """Stop nginx (SIGTERM: a fast shutdown); its port then refuses connections."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        workers = children(proc.pid) if proc.poll() is None else []
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                for pid in workers:  # paused ones must run to hear their master
                    os.kill(pid, signal.SIGCONT)
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _kill_workers(proc.pid, workers)
        if proc.stderr is not None:
            proc.stderr.close()
        _running.discard(proc)

    def start_again(self) -> None:
        self._spawn()

    def pause(self) -> None:
        """SIGSTOP master and workers: connections are accepted by the kernel, never answered."""
        for pid in self.pids():
            os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self.pids():
            os.kill(pid, signal.SIGCONT)

    def pids(self) -> list[int]:
        """The master's and its workers' process ids."""
        assert self.proc is not None
        return [self.proc.pid, *children(self.proc.pid)]

    def __enter__(self) -> NginxNode:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# -- pytest fixtures (registered in tests/conftest.py) ------------------------------------------
@pytest.fixture
def nginx_factory(tmp_path: Path) -> Iterator[Callable[..., NginxNode]]:
    """Starts nginx storage nodes (``served``: the directory whose subdirectories are its
    disks; default ``tmp_path/node-N/served``; ``tls``: HTTPS with client certificates),
    stopped at teardown."""
    if NGINX is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx)")
    started: list[NginxNode] = []

    def start(
        served: Path | None = None, workers: int = 1, tls: TLSFiles | None = None
    ) -> NginxNode:
        node = NginxNode.start(
            tmp_path / f"node-{len(started)}", served=served, workers=workers, tls=tls
        )
        started.append(node)
        return node

    yield start
    for node in started:
        node.stop(signal.SIGKILL)
