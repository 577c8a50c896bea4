"""``pochta serve --processes N``: N server processes on one machine behind the same ports.
(The prose below calls them workers; the option was ``--workers`` before issue 31.)

The parent binds every listener (HTTP, SMTP, LMTP) once per worker, each socket with
SO_REUSEPORT, then starts N ordinary ``pochta serve`` processes, each handed its own sockets
(``--listen-fds``). Each worker is a whole server: the HTTP app, the SMTP/LMTP listeners, its
analysis processes, its background jobs (the single-run ones elect one leader among all the
workers through pochta's locks: ``pochta.guard.singleton``).

Why sockets bound by the parent, and why one per worker with SO_REUSEPORT:

- the parent binds before any worker starts, so a port that is taken is one clear error, and
  no stray process can join the group later (a socket of another user cannot);
- the kernel spreads new connections over the workers' sockets by their addresses' hash. One
  shared socket would go mostly to whichever worker wakes first: asyncio accepts every
  connection waiting in one go, so a burst of clients lands on one process;
- the parent keeps every socket open, so a worker that dies loses nothing queued on its
  socket: its replacement, started with the same sockets, accepts them.

Why fresh processes rather than fork: the parent has imported CatBoost (which starts a thread
of its own) and opened nothing else; a forked child would inherit a half-copied native
runtime. A fresh ``python -m pochta serve`` costs a second or two of imports, once.

The parent only supervises: SIGTERM / SIGINT go to every worker (each stops cleanly), a worker
that dies is restarted, and a worker that keeps dying within seconds of its start (three
times in a row) stops everything with its exit code.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pochta.errors import ConfigError, InvalidInput

log = logging.getLogger("pochta.serve")

QUICK_DEATH = 10.0  # seconds: a worker dying this soon after its start counts towards giving up
GIVE_UP_AFTER = 3  # quick deaths in a row
STOP_TIMEOUT = 30.0  # seconds the workers get to stop before they are killed
DUMP_SIGNAL = signal.SIGUSR1
"""Sent to a worker that did not stop in time, just before it is killed: the worker writes
every thread's stack to its standard error (``faulthandler``), so the log says where it hung."""
DUMP_WAIT = 1.0  # seconds the worker gets to write its stacks


@dataclass(frozen=True, slots=True)
class Address:
    """One listener: ``name`` (http, smtp, lmtp) on ``host:port``; ``setting`` names the
    setting to change when the port cannot be had."""

    name: str
    host: str
    port: int
    setting: str


LISTENERS = ("http", "smtp", "lmtp", "imap", "imaps")
"""The listeners a server process of ``serve --processes`` may be handed."""


def bind(address: Address, *, reuse_port: bool) -> socket.socket:
    """A listening socket (SO_REUSEADDR, and SO_REUSEPORT when asked), or a ConfigError in
    one line when the address is taken or cannot be had."""
    try:
        family = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server(
            (address.host, address.port), family=family, backlog=2048, reuse_port=reuse_port
        )
    except OSError as exc:
        gai = isinstance(exc, socket.gaierror)
        reason = os.strerror(exc.errno) if exc.errno and not gai else str(exc)
        raise ConfigError(
            f"cannot listen for {address.name.upper()} on {address.host}:{address.port}:"
            f" {reason} (set {address.setting})"
        ) from None


def bind_all(addresses: Sequence[Address], processes: int) -> list[dict[str, socket.socket]]:
    """``processes`` sets of listening sockets, one socket per address in each. Each address
    is first bound once without SO_REUSEPORT: that fails when anything listens there, even
    another group of SO_REUSEPORT sockets (which would otherwise let us join it silently)."""
    for address in addresses:
        bind(address, reuse_port=False).close()
    sets: list[dict[str, socket.socket]] = []
    try:
        for _ in range(processes):
            sets.append({a.name: bind(a, reuse_port=True) for a in addresses})
    except BaseException:
        for sockets in sets:
            for sock in sockets.values():
                sock.close()
        raise
    return sets


def fds_arg(sockets: Mapping[str, socket.socket]) -> str:
    """``http=3,smtp=4``: what a worker's ``--listen-fds`` says."""
    return ",".join(
        [f"parent={os.getpid()}", *(f"{name}={sock.fileno()}" for name, sock in sockets.items())]
    )


def inherited(text: str) -> dict[str, socket.socket]:
    """The listening sockets a worker was handed (``--listen-fds``), after arranging to stop
    with the parent it names; InvalidInput when the text or a descriptor is not one."""
    sockets: dict[str, socket.socket] = {}
    for part in filter(None, text.split(",")):
        name, _, fd = part.partition("=")
        if name == "parent" and fd.isdigit():
            die_with_parent(int(fd))
            # what the parent asks of a worker it is about to kill: every thread's stack on
            # standard error, so the log says where the worker hung
            faulthandler.register(DUMP_SIGNAL, all_threads=True)
            continue
        if not fd.isdigit() or name not in LISTENERS:
            raise InvalidInput(f"--listen-fds: {part!r} is not name=fd ({', '.join(LISTENERS)})")
        try:
            sock = socket.socket(fileno=int(fd))
        except OSError as exc:
            raise InvalidInput(f"--listen-fds: descriptor {fd}: {exc.strerror}") from None
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) != 1:
            sock.detach()
            raise InvalidInput(f"--listen-fds: descriptor {fd} is not a listening socket")
        sockets[name] = sock
    if "http" not in sockets:
        raise InvalidInput("--listen-fds: an http socket is required")
    return sockets


PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """In a worker: SIGTERM when the supervising parent dies, even by SIGKILL (Linux's
    PR_SET_PDEATHSIG), so that no worker outlives it holding the ports; a parent already
    gone means stopping now."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


@dataclass
class _ServerProcess:
    index: int
    sockets: dict[str, socket.socket]
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    quick_deaths: int = 0


class Supervisor:
    """Starts one worker per socket set with ``command(sockets)`` and keeps them running
    until SIGTERM / SIGINT. ``run`` returns the exit code."""

    def __init__(
        self,
        sets: list[dict[str, socket.socket]],
        command: Callable[[dict[str, socket.socket]], list[str]],
        *,
        poll: float = 0.2,
        on_exit: Callable[[int], None] | None = None,
    ) -> None:
        self.processes = [_ServerProcess(i, sockets) for i, sockets in enumerate(sets)]
        self._command = command
        self._poll = poll
        self._on_exit = on_exit  # called with the pid of a worker that exited
        self._stop = threading.Event()
        self.exit_code = 0

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self.processes if w.proc is not None]

    def _start(self, worker: _ServerProcess) -> None:
        fds = [s.fileno() for s in worker.sockets.values()]
        worker.proc = subprocess.Popen(self._command(worker.sockets), pass_fds=fds)
        worker.started = time.monotonic()
        log.info("worker %d started (pid %d)", worker.index, worker.proc.pid)

    def stop(self, *_: object) -> None:
        self._stop.set()

    def hangup(self, *_: object) -> None:
        """SIGHUP goes on to every worker (each reloads its certificate)."""
        for worker in self.processes:
            if worker.proc is not None and worker.proc.poll() is None:
                with contextlib.suppress(OSError):
                    worker.proc.send_signal(signal.SIGHUP)

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self.stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self.hangup)
        try:
            for worker in self.processes:
                self._start(worker)
            while not self._stop.wait(self._poll):
                for worker in self.processes:
                    self._check(worker)
            self._stop_all()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for worker in self.processes:
                for sock in worker.sockets.values():
                    sock.close()
        return self.exit_code

    def _check(self, worker: _ServerProcess) -> None:
        assert worker.proc is not None
        code = worker.proc.poll()
        if code is None or self._stop.is_set():
            return
        quick = time.monotonic() - worker.started < QUICK_DEATH
        worker.quick_deaths = worker.quick_deaths + 1 if quick else 0
        log.warning("worker %d (pid %d) exited with %d", worker.index, worker.proc.pid, code)
        if self._on_exit is not None:
            self._on_exit(worker.proc.pid)
        if worker.quick_deaths >= GIVE_UP_AFTER:
            log.error("worker %d keeps dying at start; stopping every worker", worker.index)
            self.exit_code = code if code > 0 else 1
            self._stop.set()
            return
        self._start(worker)

    def _stop_all(self) -> None:
        live = [w.proc for w in self.processes if w.proc is not None and w.proc.poll() is None]
        for proc in live:
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for proc in live:
            try:
                code = proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error(
                    "worker pid %d did not stop in %.0f s; its threads' stacks follow, then it "
                    "is killed",
                    proc.pid,
                    STOP_TIMEOUT,
                )
                with contextlib.suppress(OSError):
                    proc.send_signal(DUMP_SIGNAL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(DUMP_WAIT)
                proc.kill()
                code = proc.wait()
            if code != 0 and self.exit_code == 0:
                self.exit_code = 1
