"""An anchor for blob uploads: OpenStack Swift's object server (Debian's ``swift-object``).

:class:`SwiftObjectServer` starts ``swift-object-server`` on a free loopback port with one device
(a directory under a private temporary directory), Swift's defaults otherwise: ``workers =
auto`` (one per CPU), logging at INFO (to syslog, which drops the lines when no daemon runs), and
its durable write path: each object is written to a temporary file, ``fdatasync``ed, renamed
into its hash directory, and that directory fsynced before the 201. One copy: a Swift cluster
would send three through its proxy; pochta writes two (a pair).

A PUT goes straight to the object server, as a proxy would send it:
``PUT /<device>/<partition>/<account>/<container>/<object>`` with ``X-Timestamp``,
``Content-Type`` and ``Content-Length`` (no container update is asked for). The hash path
suffix and prefix come from the package's ``/etc/swift/swift.conf`` (which Swift requires).

    with SwiftObjectServer() as swift:
        client.put(swift.url + swift.path("a" * 64), content=data, headers=swift.headers(data))
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from anchors import free_port

SERVER = "/usr/bin/swift-object-server"
DEVICE = "sdb1"
PARTITIONS = 1024  # objects spread over partition directories, as a ring would place them


def available() -> bool:
    return Path(SERVER).exists() and Path("/etc/swift/swift.conf").exists()


class SwiftObjectServer:
    def __init__(self, parent: Path | None = None, startup_timeout: float = 30.0) -> None:
        self.parent = parent
        self.startup_timeout = startup_timeout
        self.port = 0
        self.url = ""
        self.dir = Path()
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        self.dir = Path(tempfile.mkdtemp(prefix="pochta-anchor-swift-", dir=self.parent))
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _start(self) -> None:
        (self.dir / "srv" / DEVICE).mkdir(parents=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        conf = self.dir / "object-server.conf"
        conf.write_text(
            "[DEFAULT]\n"
            "bind_ip = 127.0.0.1\n"
            f"bind_port = {self.port}\n"
            f"devices = {self.dir / 'srv'}\n"
            "mount_check = false\n"
            f"user = {pwd.getpwuid(os.getuid()).pw_name}\n"
            "[pipeline:main]\n"
            "pipeline = object-server\n"
            "[app:object-server]\n"
            "use = egg:swift#object\n"
        )
        log = self.dir / "server.log"
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [SERVER, str(conf)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"swift-object-server exited:\n{log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"swift-object-server did not listen:\n{log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.2)

    @staticmethod
    def path(key: str) -> str:
        """Where an object of this name goes (its partition from the name, as a ring would)."""
        return f"/{DEVICE}/{int(key[:8], 16) % PARTITIONS}/AUTH_bench/blobs/{key}"

    @staticmethod
    def headers(size: int) -> dict[str, str]:
        return {
            "X-Timestamp": f"{time.time():016.5f}",
            "Content-Type": "application/octet-stream",
            "Content-Length": str(size),
        }

    def cpu_seconds(self) -> float:
        """user + system CPU of the server and its workers so far."""
        if self.proc is None:
            return 0.0
        total, tick = 0.0, os.sysconf("SC_CLK_TCK")
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # the master and its forked workers: one session (start_new_session)
            if int(fields[3]) == self.proc.pid or stat.parent.name == str(self.proc.pid):
                total += (int(fields[11]) + int(fields[12])) / tick
        return total

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        if self.dir != Path():
            shutil.rmtree(self.dir, ignore_errors=True)
