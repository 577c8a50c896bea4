"""Memory of ``pochta serve`` under IMAP's memory attacks (issue 27), and a normal client's
latency meanwhile.

A real ``python -m pochta serve`` (embedded defaults, a fresh data directory, two users) runs
on free loopback ports. First the normal client alone (``baseline``: each of its logins
computes an argon2 hash, 64 MiB for the time it takes), then two attacks, one after the other:

- ``login``: ``--connections`` connections (default 4) each send one LOGIN that carries 8
  LITERAL+ literals of 40 MB, as fast as they can (no password needed): the issue's attack;
- ``append``: ``--appenders`` connections (default 4), logged in before the figures are
  reset (each login's argon2 hash takes 64 MiB while it runs, up to
  ``guard.password_checks_at_once`` of them: that is the login's cost, measured by
  ``baseline``), each APPEND one letter of
  ``smtp.max_message_size`` bytes (a base64 attachment of random bytes) with LITERAL+ at once.

- ``guesses`` (not IMAP's literals: what a login costs): ``--connections`` strangers (from
  127.0.0.2 and up) each try 3 wrong passwords for an address that has no mailbox, at once;
  each try computes an argon2 hash (a dummy one for an unknown address) of 64 MiB.

Meanwhile a normal client (127.0.0.1) logs in, SELECTs and FETCHes a letter, logs out, again
and again (every ``--pause`` seconds).

``--tls``: every client (attackers and the normal one) speaks IMAPS, to a server with a
certificate of a CA made for the run: what TLS adds to what a connection holds (the TLS
layer's own buffers, before the session's bounds apply). ``--phases`` runs some phases only.
Reported per attack: the server process's idle and peak resident set (``VmHWM``, reset
before each attack through ``/proc/<pid>/clear_refs``), the whole process tree's (the server
and its worker processes, summed every 50 ms: a peak between two samples is missed), their
growth, what the attackers managed to send and what they were answered, and the normal
client's logins and FETCHes with their latency.

    python benchmarks/imap_bounds.py                 # goal: server peak <= 300 MB
    python benchmarks/imap_bounds.py --appenders 8
    python benchmarks/imap_bounds.py --tls --phases baseline,login
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note, percentile
from pochta.tls import new_ca, signed

GOAL_MB = 300.0
PASSWORD = "benchmark password"
USER, ATTACKER = "alice@example.org", "mallory@example.org"
MAX_MESSAGE = 50 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def status_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, todo = [], [pid]
    while todo:
        kids = [p for p, parent in parents.items() if parent == todo[-1]]
        todo.pop()
        out += kids
        todo += kids
    return out


def tree_kb(pid: int) -> int:
    return sum(status_kb(p, "VmRSS") for p in [pid, *descendants(pid)])


def letter(seed: int, size: int) -> bytes:
    """A letter of exactly ``size`` bytes, most of it one base64 attachment."""
    head = (
        b"From: Sender <sender@example.net>\r\nTo: alice@example.org\r\n"
        b"Subject: big letter %d\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/plain\r\n\r\nThe file is attached.\r\n"
        b"--b\r\nContent-Type: application/octet-stream\r\n"
        b'Content-Disposition: attachment; filename="data.bin"\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\n" % seed
    )
    tail = b"--b--\r\n"
    room = size - len(head) - len(tail)
    encoded = base64.encodebytes(random.Random(seed).randbytes(room // 78 * 57))
    encoded = encoded.replace(b"\n", b"\r\n")
    filler = room - len(encoded)
    pad = b"X-Pad: " + b"p" * (filler - 9) + b"\r\n" if filler >= 9 else b""
    return pad + head + encoded + tail


TLS: list[ssl.SSLContext] = []  # the clients' context with --tls (trusts the run's CA)


def tls_files(where: Path) -> tuple[Path, Path, ssl.SSLContext]:
    """A certificate for 127.0.0.1 signed by a CA made here, its key, and a client context
    that trusts the CA (as ``pochta tls ca`` and ``pochta tls cert`` make them)."""
    ca_cert, ca_key = new_ca("imap_bounds CA", days=1)
    cert, key = signed(["127.0.0.1"], ca_cert, ca_key, days=1)
    where.mkdir(parents=True, exist_ok=True)
    (where / "cert.pem").write_bytes(cert)
    (where / "key.pem").write_bytes(key)
    os.chmod(where / "key.pem", 0o600)
    context = ssl.create_default_context(cadata=ca_cert.decode())
    return where / "cert.pem", where / "key.pem", context


class Client:
    def __init__(self, port: int, source: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), 60, (source, 0))
        if TLS:
            self.sock = TLS[0].wrap_socket(self.sock, server_hostname="127.0.0.1")
        self.f = self.sock.makefile("rb")
        self.f.readline()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def until(self, tag: bytes) -> list[bytes]:
        lines = []
        while True:
            line = self.f.readline()
            lines.append(line)
            if not line or line.startswith((tag + b" ", b"* BYE")):
                return lines

    def login(self, email: str) -> bytes:
        secret = PASSWORD.encode()
        self.send(b"l LOGIN %s {%d+}\r\n%s\r\n" % (email.encode(), len(secret), secret))
        return self.until(b"l")[-1]

    def close(self) -> None:
        self.f.close()
        self.sock.close()


PAUSE = [0.1]


def normal_client(port: int, stop: threading.Event, out: dict[str, Any]) -> None:
    """Log in, select, fetch the first letter whole, log out; again until ``stop``."""
    logins: list[float] = []
    fetches: list[float] = []
    failures: list[str] = []
    while not stop.is_set():
        try:
            began = time.monotonic()
            c = Client(port)
            if not c.login(USER).startswith(b"l OK"):
                failures.append("login refused")
                c.close()
                continue
            logins.append(time.monotonic() - began)
            c.send(b"s SELECT INBOX\r\n")
            c.until(b"s")
            began = time.monotonic()
            c.send(b"f FETCH 1 (BODY.PEEK[])\r\n")
            lines = c.until(b"f")
            if lines[-1].startswith(b"f OK"):
                fetches.append(time.monotonic() - began)
            else:
                failures.append(lines[-1].decode(errors="replace").strip())
            c.send(b"o LOGOUT\r\n")
            c.until(b"o")
            c.close()
        except OSError as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
        stop.wait(PAUSE[0])
    logins.sort()
    fetches.sort()
    out.update(
        {
            "logins": len(logins),
            "login_ms_median": round(percentile(logins, 0.5) * 1000, 1),
            "login_ms_max": round(max(logins, default=float("nan")) * 1000, 1),
            "fetches": len(fetches),
            "fetch_ms_median": round(percentile(fetches, 0.5) * 1000, 1),
            "fetch_ms_max": round(max(fetches, default=float("nan")) * 1000, 1),
            "failures": failures[:5],
            "failure_count": len(failures),
        }
    )


def login_attack(port: int, results: list[dict[str, Any]], n: int) -> None:
    """One LOGIN with 8 LITERAL+ literals of 40 MB, sent as fast as the server takes it."""
    block = b"x" * (1 << 20)
    sent = 0
    answer = b""
    try:
        c = Client(port)
        c.send(b"a LOGIN {40000000+}\r\n")
        for i in range(8):
            left = 40_000_000
            while left:
                piece = block[: min(left, len(block))]
                c.sock.sendall(piece)
                sent += len(piece)
                left -= len(piece)
            c.send(b" {40000000+}\r\n" if i < 7 else b"\r\n")
        answer = c.f.readline()
        c.close()
    except OSError as exc:
        answer = f"{type(exc).__name__}".encode()
        with contextlib.suppress(OSError, UnboundLocalError):
            answer = c.f.readline() or answer
    said = answer.decode(errors="replace").strip()
    results.append({"sent_mb": round(sent / 1e6, 1), "answer": said})


APPENDERS: list[tuple[Client, bytes]] = []


def append_ready(port: int, n: int) -> None:
    """The appenders logged in, their letters made, before the figures are reset."""
    APPENDERS.clear()
    for seed in range(n):
        c = Client(port)
        c.login(ATTACKER)
        APPENDERS.append((c, letter(seed, MAX_MESSAGE)))


def append_attack(port: int, results: list[dict[str, Any]], n: int) -> None:
    c, raw = APPENDERS[n]
    began = time.monotonic()
    try:
        c.send(b"a APPEND INBOX {%d+}\r\n" % len(raw))
        view = memoryview(raw)
        for i in range(0, len(raw), 1 << 20):
            c.sock.sendall(view[i : i + (1 << 20)])
        c.send(b"\r\n")
        answer = c.until(b"a")[-1]
        c.close()
    except OSError as exc:
        answer = f"{type(exc).__name__}: {exc}".encode()
    results.append(
        {
            "answer": answer.decode(errors="replace").strip()[:80],
            "seconds": round(time.monotonic() - began, 1),
        }
    )


def quiet(port: int, results: list[dict[str, Any]], n: int) -> None:
    """No attack: the normal client alone for a while."""
    time.sleep(10)


def guess_attack(port: int, results: list[dict[str, Any]], n: int) -> None:
    answers = []
    try:
        c = Client(port, f"127.0.0.{n + 2}")
        for _ in range(3):
            c.send(b'g LOGIN nobody@example.org "wrong password"\r\n')
            answers.append(c.until(b"g")[-1].decode(errors="replace").strip()[:40])
        c.close()
    except OSError as exc:
        answers.append(f"{type(exc).__name__}: {exc}")
    results.append({"answers": answers})


def attack(
    name: str, server: subprocess.Popen[bytes], port: int, clients: int, target: Any
) -> dict[str, Any]:
    Path(f"/proc/{server.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
    time.sleep(0.5)
    idle, idle_tree = status_kb(server.pid, "VmRSS"), tree_kb(server.pid)
    peak_tree = idle_tree
    stop, watching = threading.Event(), threading.Event()
    normal: dict[str, Any] = {}

    def watch() -> None:
        nonlocal peak_tree
        while not watching.is_set():
            peak_tree = max(peak_tree, tree_kb(server.pid))
            watching.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    user = threading.Thread(target=normal_client, args=(port, stop, normal), daemon=True)
    user.start()
    time.sleep(1)
    results: list[dict[str, Any]] = []
    began = time.monotonic()
    threads = [
        threading.Thread(target=target, args=(port, results, n), daemon=True)
        for n in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    time.sleep(1)
    stop.set()
    user.join()
    watching.set()
    watcher.join()
    peak = status_kb(server.pid, "VmHWM")
    note(f"{name}: server {idle // 1024} -> {peak // 1024} MB")
    return {
        "attack": name,
        "connections": clients,
        "seconds": round(elapsed, 1),
        "attackers": results,
        "server_idle_rss_mb": round(idle / 1024, 1),
        "server_peak_rss_mb": round(peak / 1024, 1),
        "server_growth_mb": round((peak - idle) / 1024, 1),
        "tree_idle_rss_mb": round(idle_tree / 1024, 1),
        "tree_peak_rss_mb": round(peak_tree / 1024, 1),
        "tree_growth_mb": round((peak_tree - idle_tree) / 1024, 1),
        "normal_client": normal,
        "met": peak / 1024 <= GOAL_MB,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=4, help="LOGIN attackers")
    ap.add_argument("--appenders", type=int, default=4, help="APPEND attackers")
    ap.add_argument("--pause", type=float, default=0.1, help="the normal client's pause, s")
    ap.add_argument("--tls", action="store_true", help="every client over IMAPS")
    ap.add_argument(
        "--phases", default="baseline,login,append,guesses", help="which phases, comma-separated"
    )
    args = ap.parse_args()
    PAUSE[0] = args.pause
    phases = set(args.phases.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="pochta-imap-"))
    data = tmp / "data"
    pochta = [sys.executable, "-m", "pochta"]
    subprocess.run([*pochta, "init", "--data", str(data)], check=True, capture_output=True)
    for email in (USER, ATTACKER):
        subprocess.run(
            [*pochta, "user", "add", email, "--password-stdin", "--data", str(data)],
            input=PASSWORD.encode() + b"\n",
            check=True,
            capture_output=True,
        )
    http, smtp, lmtp, imap = free_port(), free_port(), free_port(), free_port()
    tls: dict[str, str] = {}
    if args.tls:
        cert, key, context = tls_files(tmp / "tls")
        TLS.append(context)
        imaps = free_port()
        tls = {
            "POCHTA_TLS__CERT_FILE": str(cert),
            "POCHTA_TLS__KEY_FILE": str(key),
            "POCHTA_IMAP__TLS_PORT": str(imaps),
        }
    env = {
        **os.environ,
        "POCHTA_SMTP__PORT": str(smtp),
        "POCHTA_SMTP__LMTP_PORT": str(lmtp),
        "POCHTA_IMAP__PORT": str(imap),
        "POCHTA_SMTP__HOSTNAME": "mx.bench.test",
        "POCHTA_LOG_LEVEL": "warning",
        "POCHTA_VALKYRIE__ENABLED": "false",
        **tls,
    }
    log = (tmp / "serve.log").open("wb")
    server = subprocess.Popen(
        [*pochta, "serve", "--port", str(http), "--data", str(data)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    result: dict[str, Any] = {
        "benchmark": "imap_bounds",
        "machine": machine(tmp),
        "tls": args.tls,
        "load_average_start": os.getloadavg(),
    }
    if args.tls:
        imap = imaps  # every client speaks IMAPS
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                c = Client(imap)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"pochta serve did not start: {tmp / 'serve.log'}") from None
                time.sleep(0.2)
        c.login(USER)
        raw = letter(99, 300_000)
        c.send(b"a APPEND INBOX {%d+}\r\n%s\r\n" % (len(raw), raw))
        assert c.until(b"a")[-1].startswith(b"a OK")
        c.close()
        time.sleep(3)  # the worker processes start and load the model
        attacks = []
        if "baseline" in phases:
            attacks.append(attack("baseline", server, imap, 1, quiet))
        if "login" in phases:
            attacks.append(attack("login", server, imap, args.connections, login_attack))
        if "append" in phases:
            append_ready(imap, args.appenders)
            attacks.append(attack("append", server, imap, args.appenders, append_attack))
        if "guesses" in phases:
            attacks.append(attack("guesses", server, imap, args.connections, guess_attack))
        result["attacks"] = attacks
        result["goal_server_peak_rss_mb"] = GOAL_MB
        result["load_average_end"] = os.getloadavg()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    emit(result)


if __name__ == "__main__":
    main()
