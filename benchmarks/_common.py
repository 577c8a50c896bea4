"""What every benchmark script shares: the machine it ran on, and its one JSON line."""

from __future__ import annotations

import datetime
import json
import os
import platform
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any


def _filesystem(path: Path) -> dict[str, str]:
    """Device, type, size and mount options of the filesystem holding ``path`` (Linux)."""
    try:
        line = subprocess.run(
            ["df", "--output=source,fstype,size,target", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()[1]
        device, fstype, kib, target = line.split(maxsplit=3)
    except (OSError, subprocess.CalledProcessError, IndexError, ValueError):
        return {}
    options = ""
    try:
        for mount in Path("/proc/mounts").read_text().splitlines():
            fields = mount.split()
            if len(fields) > 3 and fields[0] == device and fields[1] == target:
                options = fields[3]
    except OSError:
        pass
    return {
        "device": device,
        "type": fstype,
        "size_gib": str(round(int(kib) / 2**20)),
        "mount_options": options,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _ram_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def machine(where: Path) -> dict[str, Any]:
    """The facts a figure needs next to it: cores, RAM, disk, Python, SQLite, load."""
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "ram_gb": round(_ram_bytes() / 2**30, 1),
        "filesystem": {"path": str(where), **_filesystem(where)},
        "kernel": platform.release(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def emit(result: dict[str, Any]) -> None:
    """The script's one JSON object on stdout; progress goes to stderr."""
    result["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))
    return sorted_values[index]


def free_port() -> int:
    """A loopback port free now (bound to port 0, then closed): another process may take it
    before the caller binds it, so a caller that can should try again on a failed bind."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on TCP ``port`` (Linux: the socket's
    inode in /proc/net/tcp{,6} among the process's descriptors)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()  # sl local_address rem_address st ... inode (10th)
            if (
                len(fields) > 9
                and fields[3] == "0A"
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(f"socket:[{fields[9]}]")
    try:
        descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in descriptors:
        try:
            if os.readlink(fd) in inodes:
                return True
        except OSError:  # closed meanwhile
            continue
    return False


SMTP_PORTS = ("POCHTA_SMTP__PORT", "POCHTA_SMTP__LMTP_PORT")  # ServeProcess(ports=...)


class PortTaken(RuntimeError):
    """The server could not bind a port it was given: another process took it first."""


class ServeProcess:
    """``python -m pochta serve --port P --data D`` with ``env`` over this process's
    environment, its output in ``log``; returns once ``/healthz`` answers 200 (within
    ``wait`` seconds: a loaded 2-vCPU machine starts it slowly). ``src``: a pochta tree to run
    instead of the installed one (an A/B benchmark's other side). ``ports``: settings
    (environment names, e.g. ``POCHTA_SMTP__PORT``) that each take a free loopback port, as
    the HTTP port does.

    A free port is only free when it is chosen (``free_port``): a server that finds one of
    its ports taken at start ("cannot listen") is started again on new ports, up to ``tries``
    times; and the start counts only when ``/healthz`` answers on a socket this server holds
    (not another process's that took the port: it would answer 200 as well)."""

    def __init__(
        self,
        data: Path,
        log: Path,
        env: dict[str, str],
        *,
        src: Path | None = None,
        wait: float = 240.0,
        ports: tuple[str, ...] = (),
        tries: int = 5,
        args: tuple[str, ...] = (),
    ) -> None:
        full = {**os.environ, **env}
        self._args = args
        if src is not None:
            full["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(src), os.environ.get("PYTHONPATH", "")) if p
            )
        for attempt in range(1, tries + 1):
            self.port: int = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            chosen = {name: str(free_port()) for name in ports}
            try:
                self._start(data, log, {**full, **chosen}, wait)
                return
            except PortTaken as exc:
                note(f"pochta serve, try {attempt} of {tries}: {exc}; again on new ports")
        raise RuntimeError(f"pochta serve found a port taken {tries} times in a row")

    def _start(self, data: Path, log: Path, env: dict[str, str], wait: float) -> None:
        import time

        import httpx

        offset = log.stat().st_size if log.exists() else 0
        argv = ["serve", "--port", str(self.port), "--data", str(data), *self._args]
        with log.open("ab") as sink:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pochta", *argv],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                with log.open("rb") as f:
                    f.seek(offset)
                    said = f.read().decode(errors="replace")
                taken = [line for line in said.splitlines() if "cannot listen" in line]
                if taken and "in use" in taken[-1]:
                    raise PortTaken(taken[-1].strip())
                raise RuntimeError(f"pochta serve exited early:\n{said[-4000:]}")
            try:
                up = httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                up = False
            if up and listens(self.proc.pid, self.port):
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"pochta serve did not become healthy:\n{log.read_text()[-4000:]}")

    def cpu_seconds(self, tid: int | None = None) -> float:
        """user + system CPU time of the server (or of one of its threads) so far."""
        path = f"/proc/{self.proc.pid}" + (f"/task/{tid}" if tid is not None else "") + "/stat"
        try:
            fields = Path(path).read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def tree_cpu_seconds(self) -> float:
        """user + system CPU time so far of the server and of every process below it (the
        server processes of ``serve --processes N``, their workers) that is still running
        (Linux: /proc/<pid>/task/<tid>/children), and of those that ended and were waited for
        (their parents' cutime + cstime)."""
        total, todo, seen = 0.0, [self.proc.pid], set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                tasks = list(Path(f"/proc/{pid}/task").iterdir())
            except OSError:
                continue  # ended meanwhile
            # utime + stime, and cutime + cstime: children that ended and were waited for
            total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
            for task in tasks:
                try:
                    todo += [int(c) for c in (task / "children").read_text().split()]
                except OSError:
                    continue
        return total

    def stop(self) -> None:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
