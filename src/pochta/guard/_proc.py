"""This process's id and unique owner strings, without a system call per use (a lock cycle
needs both; ``os.getpid`` and ``os.urandom`` are each a system call). Renewed after fork.
And whether another process of this host still lives (:func:`gone`)."""

from __future__ import annotations

import itertools
import os


class _Process:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.prefix = os.urandom(9).hex()  # 72 random bits per process
        self.serial = itertools.count(1)  # next() is atomic under the GIL
        self.started = _start_time(self.pid)  # with the pid, names this process for good


def pid() -> int:
    return _current.pid


def started() -> int:
    """When this process started (clock ticks after boot; -1 unknown): a pid and its start
    time name one process, as a pid alone does not once it is reused."""
    return _current.started


def namespace() -> int:
    """The pid namespace this process sees (its inode; 0 unknown): a pid means the same
    process to two processes only when they share it."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _start_time(pid: int) -> int:
    state, start = _stat(pid)
    return start if state else -1


def _stat(pid: int) -> tuple[str, int]:
    """(state, start time) of ``pid`` from /proc; ("", 0) when there is no such process.
    OSError for anything else (no /proc, no permission)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        # /proc mounted hidepid=invisible hides the living processes of other users too: only
        # the kernel's own answer says there is no such process
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "", 0
        except PermissionError:
            pass  # it lives, as another user
        raise
    fields = data[data.rfind(b")") + 2 :].split()  # the name may hold spaces and ")"
    return fields[0].decode(), int(fields[19])


def gone(pid: int, started: int) -> bool:
    """True when the process ``pid`` that started at ``started`` no longer runs (exited,
    killed, a zombie, or its pid now names another process). False when it runs, or when
    that cannot be told: only a sure answer may free what it held."""
    if pid <= 0 or started < 0:
        return False
    try:
        state, start = _stat(pid)
    except (OSError, ValueError, IndexError):
        return False
    return not state or state in ("Z", "X", "x") or start != started


def new_owner() -> str:
    """A string no other lease, in any process or on any host, will be given."""
    return f"{_current.prefix}.{next(_current.serial)}"


_current = _Process()


def _after_fork() -> None:
    global _current
    _current = _Process()


os.register_at_fork(after_in_child=_after_fork)
