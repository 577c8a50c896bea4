"""The supervisor of ``serve --workers``: restarts, giving up, and a worker that does not stop
(real child processes; no pochta server in them)."""

from __future__ import annotations

import socket
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pochta.errors import InvalidInput
from pochta.server import supervisor
from pochta.server.supervisor import Supervisor, fds_arg, inherited


def listener() -> socket.socket:
    sock = socket.create_server(("127.0.0.1", 0))
    sock.set_inheritable(True)
    return sock


def worker(tmp_path: Path, body: str) -> list[str]:
    """A worker's command: the supervisor's handshake (``inherited``), its standard error into
    ``stderr.txt``, then ``body``."""
    script = tmp_path / "worker.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, signal, sys, time
            err = open(sys.argv[2], "a")
            os.dup2(err.fileno(), 2)
            from pochta.server.supervisor import inherited
            inherited(sys.argv[1])
            """
        )
        + textwrap.dedent(body)
    )
    return [sys.executable, str(script)]


def run(sup: Supervisor, stop_when: Path | None = None) -> tuple[int, float]:
    """Run the supervisor in this (main) thread until it stops by itself or, once
    ``stop_when`` exists (at most 30 s), until it is asked to stop; its code and time taken."""

    def stop() -> None:
        deadline = time.monotonic() + 30
        while stop_when is not None and not stop_when.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        sup.stop()

    timer = threading.Timer(0 if stop_when is not None else 30, stop)
    timer.daemon = True
    timer.start()
    started = time.monotonic()
    try:
        return sup.run(), time.monotonic() - started
    finally:
        timer.cancel()


def test_a_worker_that_does_not_stop_says_where_then_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor, "STOP_TIMEOUT", 1.0)
    stderr = tmp_path / "stderr.txt"
    command = worker(
        tmp_path,
        """
        import threading

        signal.signal(signal.SIGTERM, signal.SIG_IGN)

        def a_job_thread():
            time.sleep(120)

        threading.Thread(target=a_job_thread, daemon=True).start()
        open(sys.argv[3], "w").close()

        def stuck_in_its_shutdown():
            time.sleep(120)

        stuck_in_its_shutdown()
        """,
    )
    ready = tmp_path / "ready"
    with listener() as sock:
        sup = Supervisor(
            [{"http": sock}],
            lambda s: [*command, fds_arg(s), str(stderr), str(ready)],
        )
        code, took = run(sup, stop_when=ready)  # once it ignores SIGTERM
    assert code == 1  # killed: not a clean stop
    assert took < 30
    dump = stderr.read_text()
    assert "stuck_in_its_shutdown" in dump, dump
    assert "a_job_thread" in dump  # every thread's stack, not only the main one's


def test_a_worker_that_keeps_dying_at_start_stops_everything(tmp_path: Path) -> None:
    stderr = tmp_path / "stderr.txt"
    command = worker(tmp_path, "sys.exit(3)\n")
    with listener() as sock:
        sup = Supervisor([{"http": sock}], lambda s: [*command, fds_arg(s), str(stderr)])
        code, took = run(sup)
    assert code == 3
    assert took < 30


def test_a_worker_that_stops_cleanly_gives_0(tmp_path: Path) -> None:
    stderr = tmp_path / "stderr.txt"
    command = worker(
        tmp_path,
        """
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        open(sys.argv[3], "w").close()
        time.sleep(120)
        """,
    )
    ready = tmp_path / "ready"
    with listener() as sock:
        sup = Supervisor(
            [{"http": sock}], lambda s: [*command, fds_arg(s), str(stderr), str(ready)]
        )
        code, took = run(sup, stop_when=ready)
    assert code == 0
    assert took < 30
    assert "most recent call first" not in stderr.read_text()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("smtp=abc", "is not name=fd"),
        ("ftp=3", "is not name=fd"),
        ("", "an http socket is required"),
        ("http=987654", "descriptor 987654"),
    ],
)
def test_listen_fds_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        inherited(text)
