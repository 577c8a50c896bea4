"""The hostile-client campaign (issue 27): each attack against a live ``pochta serve --workers 2``.

Every run starts its own server (a fresh data directory in a temporary directory, users
alice@example.org and bob@example.org, HTTP, SMTP and IMAP on free loopback ports, LMTP off,
Valkyrie off, everything else at its defaults), waits ``--idle-seconds`` with nobody but the
normal client, runs one attack, checks that the server still answers, and stops it. For each
run the JSON says:

- server: the process tree under the ``pochta serve`` parent (the parent, its two workers,
  their analysis processes), sampled every 100 ms: the sums of Rss and Pss
  (/proc/<pid>/smaps_rollup) and of open file descriptors (/proc/<pid>/fd); ``idle`` is the
  median over the idle window, ``peak`` the highest sample from the attack's start to the end
  of the survival check. ``rss_hwm_sum_mb`` adds up every process's VmHWM (its own peak, not
  missed between two samples; an upper bound of the tree's peak).
- normal_client: a client of its own process on the trusted address 127.0.0.1, all the time,
  each every ``--probe-period`` s: SMTP delivery of a small letter to alice (connect to QUIT),
  IMAP login as bob (connect, greeting, LOGIN), IMAP FETCH of bob's first letter, HTTP GET
  /healthz (a new connection each time). Latencies of the answered tries (p50/p99/max, ms), the
  longest wait of any try (``worst_wait_ms``, a timeout included: 30 s), failures by reason;
  the idle window and the attack window apart.
- attacker: what the attacker got: replies counted by kind ("220", "421 4.7.0", "* BYE
  [UNAVAILABLE]", "NO [AUTHENTICATIONFAILED]", "HTTP 429", "closed", "timed out"), bytes the
  server took, seconds; one example line of each kind of reply.
- survived: an SMTP delivery, an IMAP login and /healthz each answered within 30 s of the
  attack's end; worker restarts ("worker N ... exited") and tracebacks in the server's log.

Attackers connect from other loopback addresses (127.N.x.y, each socket bound before it
connects); only 127.0.0.1 and ::1 are trusted. Nothing here waits without a bound: every
read and write has a timeout, sizes and durations are bounded, and once the tree's Rss passes
``--max-rss`` MB the server is killed (SIGKILL, its whole tree) and the run says so.

The attacks (``--attack NAME``, several allowed; all by default):

  imap-prelogin-literals   4 connections, each one LOGIN carrying 8 LITERAL+ literals of 40 MB
  imap-postlogin-literals  alice logged in, on 4 connections at once: APPEND with a literal at
                           the advertised APPENDLIMIT, then one APPEND of 16 literals of 40 MB
  login-lockout            60 wrong passwords for alice from 20 addresses, then her right
                           password from a fresh address, her usual one and 127.0.0.1 (IMAP
                           and POST /v1/session); then 10,000 guesses from 1,000 addresses
                           while alice logs in every 2 s from her usual address and a new one
  forged-headers           letters carrying pochta's own Authentication-Results and
                           X-Pochta-* fields (plain, folded, cased, duplicated, ...), read back
  smtp-connection-flood    3,000 SMTP connections at once from one address, then from one /24
  slowloris                300 SMTP, IMAP and HTTP connections each sending a byte every 5 s
  pipelining-flood         SMTP RSET / NOOP / MAIL floods and IMAP NOOP / CAPABILITY floods,
                           100,000 commands per connection in one write, replies unread
  idle-sessions            1,000 logged-in IMAP sessions sitting idle; then 500 sessions in
                           IDLE while letters keep arriving (notification delay)

    python benchmarks/hostile.py                     # every attack, full sizes (~15 min)
    python benchmarks/hostile.py --quick             # every attack, small sizes (a few minutes)
    python benchmarks/hostile.py --attack login-lockout --guesses 10000 --addresses 1000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import imaplib
import itertools
import multiprocessing as mp
import os
import re
import resource
import shutil
import signal
import smtplib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from _common import emit, machine, note, percentile

TRUSTED = "127.0.0.1"
HOSTNAME = "mx.hostile.test"  # smtp.hostname, hence the authserv-id of Authentication-Results
ALICE, BOB = "alice@example.org", "bob@example.org"
PASSWORDS = {ALICE: "alice-correct-horse-7", BOB: "bob-battery-staple-9"}
MB = 10**6
WAIT = 30.0  # seconds any one answer may take before it counts as "timed out"
RSS_GOAL_MB = 300  # issue 27 item 1: the whole tree's peak under the pre-login literals
LOGINS_AT_ONCE = 16  # logins in flight when opening many sessions
WARM_UP = 3.0  # seconds between the normal client's start and the idle window

# -- attacker addresses --------------------------------------------------------------------------
# Each attack has a network of its own (127.N.0.0/16), so no attack inherits another's counters.


def stranger(net: int, i: int = 0) -> str:
    """The i-th attacker address of 127.net.0.0/16; consecutive ones fall in different /24s
    (the third octet is i % 256), as a botnet's addresses do."""
    return f"127.{net}.{i % 256}.{1 + i // 256}"


def neighbour(net: int, i: int) -> str:
    """The i-th address of one /24: 127.net.0.1 .. 127.net.0.254."""
    return f"127.{net}.0.{1 + i % 254}"


# -- replies -------------------------------------------------------------------------------------
_SMTP_REPLY = re.compile(rb"(\d{3})(?:[ -](\d\.\d{1,3}\.\d{1,3}))?")
_IMAP_REPLY = re.compile(rb"(?:\S+ )?(OK|NO|BAD|BYE|PREAUTH)\b(?: \[([A-Z0-9-]+))?")


def kind(line: bytes | str) -> str:
    """A reply line as the kind it is counted under: "421 4.7.0", "NO [AUTHENTICATIONFAILED]",
    "* BYE [UNAVAILABLE]", "HTTP 408", "closed" (the server closed without a word); a str is
    a kind already ("timed out", "connect: ConnectionRefusedError")."""
    if isinstance(line, str):
        return line
    if not line:
        return "closed"
    if line.startswith(b"HTTP/"):
        return "HTTP " + line.split()[1].decode("ascii", "replace") if b" " in line else "HTTP ?"
    if m := _SMTP_REPLY.match(line):
        return " ".join(g.decode() for g in m.groups() if g)
    if line.startswith(b"+"):
        return "+ (continue)"
    if m := _IMAP_REPLY.match(line):
        code = f" [{m.group(2).decode()}]" if m.group(2) else ""
        return ("* " if line.startswith(b"* ") else "") + m.group(1).decode() + code
    return b" ".join(line.split()[:2]).decode("ascii", "replace")


def why(exc: BaseException) -> str:
    """An exception as a short reason to count failures by."""
    if isinstance(exc, smtplib.SMTPResponseException):
        text = (
            exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else ""
        )
        return f"SMTP {exc.smtp_code} {text[:50]}".strip()
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return "SMTP " + ",".join(str(code) for code, _ in exc.recipients.values())
    if isinstance(exc, TimeoutError | socket.timeout | httpx.TimeoutException):
        return "timed out"
    text = str(exc).splitlines()[0][:70] if str(exc) else ""
    return f"{type(exc).__name__}: {text}".rstrip(": ")


def connect_failed(exc: BaseException) -> str:
    """A connection that could not be made, as a kind: "connect: ConnectionRefusedError"."""
    return "connect: " + ("timed out" if isinstance(exc, TimeoutError) else type(exc).__name__)


def spread(values: list[float], scale: float = 1.0, digits: int = 3) -> dict[str, Any]:
    """n, p50, p99 and max of ``values`` (times ``scale``)."""
    if not values:
        return {"n": 0}
    ordered = sorted(v * scale for v in values)
    return {
        "n": len(ordered),
        "p50": round(percentile(ordered, 0.5), digits),
        "p99": round(percentile(ordered, 0.99), digits),
        "max": round(ordered[-1], digits),
    }


class Tally:
    """What the attacker saw, counted as it happens, so that an attack cut short still
    reports: replies by kind (with the time each took), plain values, one example per kind."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = defaultdict(Counter)
        self.times: dict[str, list[float]] = defaultdict(list)
        self.values: dict[str, Any] = {}
        self.examples: dict[str, str] = {}
        self.phases: list[tuple[str, float]] = []  # (name, when it began)

    def count(self, what: str, reply: bytes | str, seconds: float | None = None) -> str:
        """Count ``reply`` (a line, or a kind already) under ``what``; its kind."""
        k = kind(reply)
        self.counts[what][k] += 1
        if isinstance(reply, bytes) and reply:
            self.examples.setdefault(k, reply[:160].decode("utf-8", "replace").strip())
        if seconds is not None:
            self.times[f"{what}: {k}"].append(seconds)
        return k

    def add(self, key: str, n: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + n

    def mark(self, phase: str) -> None:
        """A phase of the attack begins: the normal client's figures are given per phase too."""
        self.phases.append((phase, time.monotonic()))

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.values)
        out.update({what: dict(c.most_common()) for what, c in self.counts.items()})
        if self.times:
            out["seconds"] = {k: spread(v) for k, v in sorted(self.times.items())}
        if self.examples:
            out["reply_examples"] = self.examples
        return out


# -- the server's process tree -------------------------------------------------------------------
def tree(root: int) -> list[int]:
    """``root`` and every process under it (from /proc/<pid>/task/<tid>/children)."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, ValueError):
                    todo += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
    return out


def kb_fields(path: str, *names: str) -> list[int]:
    """The kB values of the ``names`` lines of a /proc file (0 for a process gone)."""
    found = dict.fromkeys(names, 0)
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in found:
                found[name] = int(rest.split()[0])
    return list(found.values())


def open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


@dataclass(frozen=True, slots=True)
class Sample:
    t: float
    rss_kb: int
    pss_kb: int
    fds: int
    processes: int


class Sampler:
    """Samples the tree every ``period`` s in a thread; ``over`` is set once Rss passes the
    ceiling."""

    def __init__(self, root: int, ceiling_mb: float, period: float = 0.1) -> None:
        self.root, self.ceiling_kb, self.period = root, ceiling_mb * 1024, period
        self.samples: list[Sample] = []
        self.hwm_kb: dict[int, int] = {}
        self.over = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            t, rss, pss, fds = time.monotonic(), 0, 0, 0
            pids = tree(self.root)
            for pid in pids:
                r, p = kb_fields(f"/proc/{pid}/smaps_rollup", "Rss", "Pss")
                rss, pss, fds = rss + r, pss + p, fds + open_files(pid)
                (hwm,) = kb_fields(f"/proc/{pid}/status", "VmHWM")
                self.hwm_kb[pid] = max(self.hwm_kb.get(pid, 0), hwm)
            self.samples.append(Sample(t, rss, pss, fds, len(pids)))
            if rss > self.ceiling_kb:
                self.over.set()
            self._stop.wait(self.period)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def window(self, t0: float, t1: float) -> list[Sample]:
        return [s for s in self.samples if t0 <= s.t <= t1]

    def figures(self, t_idle: float, t_attack: float, t_after: float) -> dict[str, Any]:
        """Idle (median of [t_idle, t_attack]), peak (of [t_attack, t_after]), the growth of
        Rss between them, the sum of every process's VmHWM."""
        idle, peak = self.idle(t_idle, t_attack), self.peak(t_attack, t_after)
        growth = round(peak.get("rss_mb", 0) - idle.get("rss_mb", 0), 1)
        hwm = round(sum(self.hwm_kb.values()) / 1024, 1)
        return {"idle": idle, "peak": peak, "rss_growth_mb": growth, "rss_hwm_sum_mb": hwm}

    def idle(self, t0: float, t1: float) -> dict[str, Any]:
        got = self.window(t0, t1)
        if not got:
            return {}
        return {
            "rss_mb": round(statistics.median(s.rss_kb for s in got) / 1024, 1),
            "pss_mb": round(statistics.median(s.pss_kb for s in got) / 1024, 1),
            "fds": round(statistics.median(s.fds for s in got)),
            "processes": round(statistics.median(s.processes for s in got)),
        }

    def peak(self, t0: float, t1: float) -> dict[str, Any]:
        got = self.window(t0, t1)
        if not got:
            return {}
        top = max(got, key=lambda s: s.rss_kb)
        return {
            "rss_mb": round(top.rss_kb / 1024, 1),
            "rss_at_s": round(top.t - t0, 1),
            "pss_mb": round(max(s.pss_kb for s in got) / 1024, 1),
            "fds": max(s.fds for s in got),
            "processes": max(s.processes for s in got),
            "samples": len(got),
        }


# -- the server ----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind((TRUSTED, 0))
        port: int = s.getsockname()[1]
        return port


def make_data(data: Path) -> None:
    """The data directory as ``pochta init`` makes it, with alice and bob, made in this
    process by the functions those commands call (as tests/integration/test_smtp.py does:
    three ``pochta`` processes cost 15 s of every run on a loaded machine)."""
    from pochta.app import build, service_token  # here: the normal client's process needs
    from pochta.config import load_settings  # neither

    settings = load_settings(None, data_dir=data)
    data.mkdir(parents=True)
    pochta = build(settings)
    try:
        for email, password in PASSWORDS.items():
            pochta.mailbox.add_user(email, password)
    finally:
        pochta.close()
    service_token(settings)


@dataclass
class Pochta:
    """A ``pochta serve --workers 2`` of its own: a fresh data directory with alice and bob,
    HTTP, SMTP and IMAP on free loopback ports, LMTP off."""

    dir: Path
    http: int
    smtp: int
    imap: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://{TRUSTED}:{self.http}"

    @property
    def log(self) -> Path:
        return self.dir / "serve.log"

    @classmethod
    def start(cls, dir: Path) -> Pochta:
        data = dir / "data"
        make_data(data)
        http, smtp, imap = free_port(), free_port(), free_port()
        env = {
            **os.environ,
            "POCHTA_SMTP__PORT": str(smtp),
            "POCHTA_SMTP__LMTP_PORT": "0",
            "POCHTA_SMTP__HOSTNAME": HOSTNAME,
            "POCHTA_IMAP__PORT": str(imap),
            "POCHTA_LOG_LEVEL": "warning",
            "POCHTA_VALKYRIE__ENABLED": "false",
        }
        command = [sys.executable, "-m", "pochta", "serve", "--workers", "2"]
        command += ["--port", str(http), "--data", str(data)]
        with (dir / "serve.log").open("ab") as sink:
            proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
        server = cls(dir, http, smtp, imap, proc)
        server.wait_ready()
        return server

    def wait_ready(self, timeout: float = 180.0) -> None:
        """/healthz answers, and SMTP and IMAP greet on several connections (the kernel spreads
        them over both workers)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pochta serve exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    for port, hello in [(self.smtp, b"220"), (self.imap, b"* OK")] * 4:
                        with socket.create_connection((TRUSTED, port), timeout=5) as s:
                            if not s.recv(100).startswith(hello):
                                raise OSError("no greeting yet")
                    return
            except (OSError, httpx.HTTPError):
                pass
            time.sleep(0.3)
        self.kill()
        raise RuntimeError(f"pochta serve did not become ready: {self.log.read_text()[-2000:]}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL to the parent and every process under it (the ones this script started)."""
        for pid in reversed(tree(self.proc.pid)):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_figures(self) -> dict[str, Any]:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        lines = text.splitlines()
        errors = [line[:200] for line in lines if " ERROR " in line or "CRITICAL" in line]
        return {
            "worker_restarts": sum(1 for line in lines if re.search(r"worker \d+ .*exited", line)),
            "tracebacks": text.count("Traceback (most recent call last)"),
            "error_lines": len(errors),
            "first_errors": errors[:3],
        }


# -- the normal client (blocking, used by the probe process and the survival check) --------------
def letter(to: str, subject: str) -> bytes:
    return (
        f"From: Maria Ivanova <maria@example.net>\r\nTo: {to}\r\nSubject: {subject}\r\n"
        f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S +0000', time.gmtime())}\r\n"
        f"Message-ID: <{time.time_ns()}.{os.getpid()}@example.net>\r\n\r\n"
        "Hi, the notes from Tuesday's meeting are below. The budget review moves to Thursday\r\n"
        "at 10:00; please bring the figures for the second quarter.\r\n\r\nMaria\r\n"
    ).encode()


def deliver(port: int, to: str, subject: str, source: str = TRUSTED) -> None:
    with smtplib.SMTP(TRUSTED, port, "client.example.net", WAIT, (source, 0)) as smtp:
        smtp.sendmail("maria@example.net", [to], letter(to, subject))


def imap_session(port: int, email: str) -> imaplib.IMAP4:
    client = imaplib.IMAP4(TRUSTED, port, timeout=WAIT)
    try:
        client.login(email, PASSWORDS[email])
    except BaseException:
        with contextlib.suppress(Exception):
            client.shutdown()
        raise
    return client


def healthz(url: str) -> None:
    r = httpx.get(f"{url}/healthz", timeout=WAIT, headers={"Connection": "close"})
    if r.status_code != 200:
        raise RuntimeError(f"HTTP {r.status_code}")


KINDS = ("smtp_delivery", "imap_login", "imap_fetch", "healthz")
Record = tuple[float, str, float, str | None]  # start (monotonic), kind, seconds, failure


def probe(ports: dict[str, Any], period: float, stop: Any, out: Any) -> None:
    """The normal client, in a process of its own (the attackers' work does not slow it): an
    SMTP delivery to alice, an IMAP login and FETCH as bob, GET /healthz, each every
    ``period`` s from 127.0.0.1, until ``stop`` is set; the records go to ``out``."""
    records: list[Record] = []
    pending: dict[str, float] = {}

    def timed(name: str, step: Callable[[], Any]) -> Any:
        t0 = pending[name] = time.monotonic()
        try:
            result = step()
        except Exception as exc:
            records.append((t0, name, time.monotonic() - t0, why(exc)))
            raise
        finally:
            pending.pop(name, None)
        records.append((t0, name, time.monotonic() - t0, None))
        return result

    def imap_once() -> None:
        client = timed("imap_login", lambda: imap_session(ports["imap"], BOB))
        try:

            def fetch() -> None:
                for folder in ("INBOX", "Spam"):  # the verdict may have put it in Spam
                    typ, data = client.select(folder, readonly=True)
                    if typ == "OK" and data[0] not in (b"0", None):
                        typ, _ = client.fetch("1", "(BODY.PEEK[])")
                        if typ != "OK":
                            raise RuntimeError(f"FETCH {typ}")
                        return
                raise RuntimeError("bob has no letter")

            timed("imap_fetch", fetch)
            client.logout()
        finally:
            with contextlib.suppress(Exception):
                client.shutdown()

    n = itertools.count()
    steps: dict[str, Callable[[], None]] = {
        "smtp_delivery": lambda: timed(
            "smtp_delivery", lambda: deliver(ports["smtp"], ALICE, f"probe {next(n)}")
        ),
        "imap": imap_once,
        "healthz": lambda: timed("healthz", lambda: healthz(ports["url"])),
    }

    def loop(step: Callable[[], None]) -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            with contextlib.suppress(Exception):
                step()
            stop.wait(max(0.0, period - (time.monotonic() - t0)))

    threads = [threading.Thread(target=loop, args=(s,), daemon=True) for s in steps.values()]
    for thread in threads:
        thread.start()
    stop.wait()
    for thread in threads:
        thread.join(timeout=2)
    now = time.monotonic()
    for name, t0 in list(pending.items()):
        records.append((t0, name, now - t0, "no answer by the end of the run"))
    out.put(records)


class Probe:
    def __init__(self, server: Pochta, period: float) -> None:
        ctx = mp.get_context("spawn")  # this process holds threads and sockets: no fork
        self._stop, self._out = ctx.Event(), ctx.Queue()
        ports = {"smtp": server.smtp, "imap": server.imap, "url": server.url}
        self._proc = ctx.Process(target=probe, args=(ports, period, self._stop, self._out))
        self._proc.start()
        self.records: list[Record] | None = None

    def stop(self) -> list[Record]:
        if self.records is None:
            self._stop.set()
            try:
                self.records = self._out.get(timeout=60)
            except Exception:
                self.records = []
            self._proc.join(timeout=10)
            if self._proc.is_alive():
                self._proc.kill()
        return self.records


def client_figures(records: list[Record], t0: float, t1: float) -> dict[str, Any]:
    """The normal client's tries that started in [t0, t1), per kind."""
    out: dict[str, Any] = {}
    for name in KINDS:
        mine = [r for r in records if r[1] == name and t0 <= r[0] < t1]
        answered = [r[2] for r in mine if r[3] is None]
        figures: dict[str, Any] = {"tries": len(mine), "ok": len(answered)}
        figures.update({f"{k}_ms": v for k, v in spread(answered, 1000, 1).items() if k != "n"})
        if mine:
            figures["worst_wait_ms"] = round(max(r[2] for r in mine) * 1000, 1)
        failures = Counter(r[3] for r in mine if r[3] is not None)
        if failures:
            figures["failures"] = dict(failures.most_common())
        out[name] = figures
    return out


def still_answering(server: Pochta, within: float = WAIT) -> dict[str, Any]:
    """Whether the server answers the normal client after the attack: a delivery, a login,
    /healthz, each tried again until ``within`` s have passed."""
    checks: dict[str, Callable[[], object]] = {
        "smtp_delivery": lambda: deliver(server.smtp, ALICE, "after the attack"),
        "imap_login": lambda: imap_session(server.imap, BOB).logout(),
        "healthz": lambda: healthz(server.url),
    }
    out: dict[str, Any] = {}
    deadline = time.monotonic() + within
    for name, check in checks.items():
        t0 = time.monotonic()
        while True:
            try:
                check()
                out[name] = {"ok": True, "seconds": round(time.monotonic() - t0, 2)}
                break
            except Exception as exc:
                if time.monotonic() > deadline:
                    out[name] = {"ok": False, "error": why(exc)}
                    break
            time.sleep(1)
    return {"answering": all(v["ok"] for v in out.values()), **out}


# -- attacker connections ------------------------------------------------------------------------
class Conn:
    """One attacker connection from its own address: raw bytes out, lines in, every wait
    bounded. ``async with await Conn.open(...)`` closes it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, ip: str, port: int, timeout: float = WAIT) -> Conn:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(TRUSTED, port, local_addr=(ip, 0), limit=1 << 20), timeout
        )
        return cls(reader, writer)

    async def line(self, timeout: float | None = WAIT) -> bytes:
        """The next line, b"" once the server has closed; TimeoutError after ``timeout``."""
        try:
            return await asyncio.wait_for(self.reader.readline(), timeout)
        except (ConnectionError, ValueError):  # reset, or a line over 1 MB
            return b""

    async def send(self, data: bytes | memoryview, timeout: float = WAIT) -> None:
        """Write and wait until the socket took it (TimeoutError: the server stopped reading;
        ConnectionError: it closed)."""
        self.writer.write(data)
        await asyncio.wait_for(self.writer.drain(), timeout)

    def unsent(self) -> int:
        transport = self.writer.transport
        return transport.get_write_buffer_size() if not transport.is_closing() else 0

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.transport.abort()

    async def __aenter__(self) -> Conn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


async def counted(got: Tally, what: str, attempt: Awaitable[None]) -> None:
    """Run one connection's attempt; a connection that could not be made or broke is
    counted under ``what`` rather than ending the attack."""
    try:
        await attempt
    except TimeoutError:
        got.count(what, "timed out")
    except OSError as exc:
        got.count(what, type(exc).__name__)


async def imap_command(conn: Conn, tag: bytes, command: bytes) -> tuple[list[bytes], bytes]:
    """Send one command; its untagged lines and the tagged one (b"" when the server closed)."""
    conn.writer.write(tag + b" " + command + b"\r\n")
    untagged: list[bytes] = []
    while True:
        line = await conn.line()
        if not line or line.startswith(tag + b" "):
            return untagged, line
        untagged.append(line)


def quoted(text: str) -> bytes:
    return b'"' + text.encode().replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


async def imap_login(
    ip: str, port: int, email: str, password: str
) -> tuple[Conn | None, bytes | str, float]:
    """A logged-in connection from ``ip`` (None when not), the reply that decided (the tagged
    one, or a greeting that was not OK, or why there was none), and the seconds it took."""
    t0 = time.monotonic()
    try:
        conn = await Conn.open(ip, port)
    except (OSError, TimeoutError) as exc:
        return None, connect_failed(exc), time.monotonic() - t0
    try:
        greeting = await conn.line()
        if not greeting.startswith(b"* OK"):
            conn.close()
            return None, greeting, time.monotonic() - t0
        _, reply = await imap_command(
            conn, b"L", b"LOGIN %s %s" % (quoted(email), quoted(password))
        )
    except TimeoutError:
        conn.close()
        return None, "timed out", time.monotonic() - t0
    if reply.startswith(b"L OK"):
        return conn, reply, time.monotonic() - t0
    conn.close()
    return None, reply, time.monotonic() - t0


def http_from(server: Pochta, ip: str) -> httpx.AsyncClient:
    """An HTTP client whose connections come from ``ip`` (its cookies kept: a device)."""
    transport = httpx.AsyncHTTPTransport(local_address=ip)
    return httpx.AsyncClient(base_url=server.url, transport=transport, timeout=WAIT)


async def http_login(client: httpx.AsyncClient, email: str, password: str) -> tuple[str, float]:
    """POST /v1/session: "HTTP <status>" (or why there was none) and the seconds it took."""
    t0 = time.monotonic()
    try:
        r = await client.post("/v1/session", json={"email": email, "password": password})
        answer = f"HTTP {r.status_code}"
    except httpx.HTTPError as exc:
        answer = why(exc)
    return answer, time.monotonic() - t0


async def deliver_from(ip: str, port: int, to: str, subject: str, raw: bytes | None = None) -> None:
    """One letter over SMTP from ``ip`` (smtplib in a thread)."""

    def send() -> None:
        with smtplib.SMTP(TRUSTED, port, "sender.example.net", WAIT, (ip, 0)) as smtp:
            smtp.sendmail("sender@example.net", [to], raw or letter(to, subject))

    await asyncio.to_thread(send)


# -- big literals --------------------------------------------------------------------------------
LINES = (b"x" * 78 + b"\r\n") * 13_107  # ~1 MB of 80-byte lines


def content(size: int, head: bytes = b"") -> Iterator[memoryview]:
    """``size`` bytes in blocks: ``head`` (a letter's header), then 80-byte lines."""
    block = memoryview(LINES)
    if head:
        yield memoryview(head)
    left = size - len(head)
    while left > 0:
        yield block[: min(left, len(block))]
        left -= len(block)


BIG_LETTER_HEAD = (
    b"From: Big <big@example.net>\r\nTo: alice@example.org\r\nSubject: big\r\n"
    b"Message-ID: <big@example.net>\r\n\r\n"
)


async def literal_command(
    conn: Conn,
    got: Tally,
    what: str,
    command: bytes,
    literals: list[tuple[int, Callable[[], Iterator[memoryview]]]],
) -> str:
    """``command`` followed by LITERAL+ literals (size, blocks), written without waiting for
    the server, while its replies are read; counts under ``what`` the reply that ended the
    command (the tagged one, a BYE, the connection closed, or no reply) and the bytes that
    the server's socket took before it did. The kind of that reply."""
    tag = command.split(b" ", 1)[0]
    replies: list[bytes] = []

    async def listen() -> None:
        while True:
            line = await conn.line(None)
            replies.append(line)
            if not line or line.startswith((tag + b" ", b"* BYE")):
                return

    listener = asyncio.ensure_future(listen())
    t0, sent, ending = time.monotonic(), 0, "cut short: the attack was stopped"
    try:
        for i, (size, blocks) in enumerate(literals):
            await conn.send((command if i == 0 else b"") + b" {%d+}\r\n" % size)
            for block in blocks():
                if listener.done():
                    break
                sent += len(block)  # handed to the socket; what it did not take is unsent()
                await conn.send(block)
            if listener.done():
                break
        else:
            await conn.send(b"\r\n")
        await asyncio.wait_for(asyncio.shield(listener), 300)
        ending = ""
    except TimeoutError:
        ending = "no reply in 300 s" if not listener.done() else ""
        if not listener.done() and conn.unsent():
            ending = "the server stopped reading (a write waited 30 s)"
    except ConnectionError:
        ending = "closed while sending" if not listener.done() else ""
    finally:  # counted even when the attack is cancelled (the server was killed)
        listener.cancel()
        got.add(f"{what}: bytes sent", sent - conn.unsent())
        ended = got.count(what, ending or (replies[-1] if replies else b""), time.monotonic() - t0)
    return ended


# -- the attacks ---------------------------------------------------------------------------------
Attack = Callable[[Pochta, Tally], Awaitable[None]]
Variants = list[tuple[str, Attack]]


def imap_prelogin_literals(a: argparse.Namespace) -> Variants:
    """Before login: one LOGIN per connection carrying ``--literals`` LITERAL+ literals of
    ``--literal-mb`` MB each, on ``--literal-connections`` connections (one address each)."""
    size = a.literal_mb * MB

    async def one(server: Pochta, got: Tally, i: int) -> None:
        async with await Conn.open(stranger(10, i), server.imap) as conn:
            got.count("greetings", await conn.line())
            blocks = partial(content, size)
            await literal_command(conn, got, "LOGIN", b"a1 LOGIN", [(size, blocks)] * a.literals)

    async def attack(server: Pochta, got: Tally) -> None:
        conns = range(a.literal_connections)
        await asyncio.gather(*(counted(got, "connections", one(server, got, i)) for i in conns))

    label = f"{a.literal_connections} connections x {a.literals} literals x {a.literal_mb} MB"
    return [(label, attack)]


def imap_postlogin_literals(a: argparse.Namespace) -> Variants:
    """alice logged in, on ``--literal-connections`` connections at once: APPEND of one literal
    at the APPENDLIMIT the server advertises, then one APPEND of ``--post-literals`` literals
    of ``--literal-mb`` MB (a MULTIAPPEND; pochta takes one letter per APPEND, and answers
    only once it has read them all)."""
    size = a.literal_mb * MB

    async def one(server: Pochta, got: Tally, i: int) -> None:
        conn, reply, seconds = await imap_login(
            stranger(11, i), server.imap, ALICE, PASSWORDS[ALICE]
        )
        got.count("logins", reply, seconds)
        if conn is None:
            return
        assert isinstance(reply, bytes)  # the login succeeded: its tagged reply
        async with conn:
            if b"APPENDLIMIT=" not in reply:
                reply = b"".join((await imap_command(conn, b"c", b"CAPABILITY"))[0])
            m = re.search(rb"APPENDLIMIT=(\d+)", reply)
            limit = int(m.group(1)) if m else 50 << 20
            got.values["appendlimit"] = limit if m else f"not advertised; {limit} tried"
            at_limit = partial(content, limit, BIG_LETTER_HEAD)
            ended = await literal_command(
                conn, got, "APPEND at the limit", b"a2 APPEND INBOX", [(limit, at_limit)]
            )
            if "BYE" in ended or "closed" in ended:
                got.count("APPEND of many literals", "not sent: the connection was closed")
                return
            letters = partial(content, size, BIG_LETTER_HEAD)
            await literal_command(
                conn,
                got,
                "APPEND of many literals",
                b"a3 APPEND INBOX",
                [(size, letters)] * a.post_literals,
            )

    async def attack(server: Pochta, got: Tally) -> None:
        conns = range(a.literal_connections)
        await asyncio.gather(*(counted(got, "connections", one(server, got, i)) for i in conns))

    label = (
        f"{a.literal_connections} connections: APPEND at the limit, then"
        f" {a.post_literals} literals x {a.literal_mb} MB"
    )
    return [(label, attack)]


CHECKED = {"HTTP 401", "NO [AUTHENTICATIONFAILED]"}  # a definite "wrong password": it was checked
ALICE_OK = {"HTTP 200", "OK [CAPABILITY]", "OK"}


async def alice_logs_in(
    server: Pochta, got: Tally, when: str, where: str, ip: str, device: httpx.AsyncClient | None
) -> None:
    """alice's right password from ``ip`` over IMAP and over HTTP (``device``: an HTTP client
    that logged in before, cookies and all; None: a new one); each answer kept."""
    conn, reply, imap_s = await imap_login(ip, server.imap, ALICE, PASSWORDS[ALICE])
    if conn is not None:
        conn.close()
    if device is None:
        async with http_from(server, ip) as client:
            http, http_s = await http_login(client, ALICE, PASSWORDS[ALICE])
    else:
        http, http_s = await http_login(device, ALICE, PASSWORDS[ALICE])
    for protocol, answer, seconds in (("imap", kind(reply), imap_s), ("http", http, http_s)):
        got.values.setdefault("alice", []).append(
            {
                "when": when,
                "from": where,
                "protocol": protocol,
                "answer": answer,
                "ok": answer in ALICE_OK,
                "seconds": round(seconds, 3),
            }
        )


class Guesser:
    """Wrong passwords for alice, guess n from address ``ips[n % len(ips)]``, every other one
    over IMAP (a connection each) and over POST /v1/session (a client per address)."""

    def __init__(self, server: Pochta, got: Tally, ips: list[str]) -> None:
        self.server, self.got, self.ips = server, got, ips
        self.clients: dict[str, httpx.AsyncClient] = {}

    async def guess(self, n: int) -> None:
        ip, password = self.ips[n % len(self.ips)], f"guess-{n:06d}"
        if n % 2:
            conn, reply, seconds = await imap_login(ip, self.server.imap, ALICE, password)
            if conn is not None:
                conn.close()
            answer = kind(reply)
        else:
            if ip not in self.clients:
                self.clients[ip] = http_from(self.server, ip)
            answer, seconds = await http_login(self.clients[ip], ALICE, password)
        outcome = (
            "checked (wrong password)"
            if answer in CHECKED
            else "timed out"
            if answer == "timed out"
            else "refused"
        )
        self.got.count("guesses", outcome, seconds)
        self.got.count("guess answers", answer)
        if seconds >= 1.0:
            self.got.add("guesses answered after 1 s or more")

    async def close(self) -> None:
        for client in self.clients.values():
            await client.aclose()


def login_lockout(a: argparse.Namespace) -> Variants:
    """60 wrong passwords for alice from 20 addresses, then her right one from a fresh
    address, from her usual one (it logged in before the attack; over HTTP the same client,
    cookies kept) and from 127.0.0.1. Then ``--guesses`` wrong passwords from ``--addresses``
    addresses (``--guess-concurrency`` at once, at most ``--guess-seconds`` s) while alice logs
    in every 2 s from her usual address and from a new one each time."""

    async def small(server: Pochta, got: Tally) -> None:
        usual = stranger(30)
        async with http_from(server, usual) as device:
            await alice_logs_in(server, got, "before", "usual address", usual, device)
            guesser = Guesser(server, got, [stranger(31, i) for i in range(20)])
            for n in range(60):
                await guesser.guess(n)
            await guesser.close()
            await alice_logs_in(server, got, "after", "fresh address", stranger(32), None)
            await alice_logs_in(server, got, "after", "usual address", usual, device)
            await alice_logs_in(server, got, "after", "127.0.0.1", TRUSTED, None)
        got.values["alice"] = alice_summary(got.values.pop("alice"))

    async def large(server: Pochta, got: Tally) -> None:
        usual = stranger(40)
        async with http_from(server, usual) as device:
            await alice_logs_in(server, got, "before", "usual address", usual, device)
            guesser = Guesser(server, got, [stranger(41, i) for i in range(a.addresses)])
            got.mark("guessing")
            gate = asyncio.Semaphore(a.guess_concurrency)
            t0 = time.monotonic()

            async def guess(n: int) -> None:
                async with gate:
                    if time.monotonic() - t0 < a.guess_seconds:
                        await guesser.guess(n)
                    else:
                        got.add("guesses not sent (--guess-seconds passed)")

            guesses = asyncio.gather(*(guess(n) for n in range(a.guesses)))
            fresh = itertools.count()
            while not guesses.done():
                new = stranger(42, next(fresh))
                await asyncio.gather(
                    alice_logs_in(server, got, "during", "usual address", usual, device),
                    alice_logs_in(server, got, "during", "new address", new, None),
                    asyncio.sleep(2),
                )
            got.values["guessing_seconds"] = round(time.monotonic() - t0, 1)
            await guesses
            await guesser.close()
            got.mark("after")
            await alice_logs_in(server, got, "after", "usual address", usual, device)
            await alice_logs_in(
                server, got, "after", "new address", stranger(42, next(fresh)), None
            )
        alice = got.values["alice"] = alice_summary(got.values.pop("alice"))
        usual_ok = [
            e["ok"] == e["tries"] for k, e in alice.items() if k.startswith("during, usual")
        ]
        fresh_tries = [e for k, e in alice.items() if k.startswith("during, new")]
        got.values["issue_goals"] = {  # issue 27 item 3 (its guesses spread over an hour)
            "at_most_100_guesses_checked": got.counts["guesses"]["checked (wrong password)"] <= 100,
            "alice_always_in_from_her_usual_address": bool(usual_ok) and all(usual_ok),
            "alice_in_within_5_s_from_a_new_address": bool(fresh_tries)
            and all(e["ok"] == e["tries"] and e["max_s"] <= 5 for e in fresh_tries),
        }

    return [
        ("60 wrong passwords from 20 addresses", small),
        (f"{a.guesses} guesses from {a.addresses} addresses", large),
    ]


def alice_summary(tries: list[dict[str, Any]]) -> dict[str, Any]:
    """alice's tries by (when, from, protocol): how many, how many succeeded, the answers."""
    out: dict[str, Any] = {}
    for t in tries:
        entry = out.setdefault(f"{t['when']}, {t['from']}, {t['protocol']}", {"tries": 0, "ok": 0})
        entry["tries"] += 1
        entry["ok"] += t["ok"]
        entry.setdefault("answers", Counter())[t["answer"]] += 1
        entry["max_s"] = max(entry.get("max_s", 0.0), t["seconds"])
    for entry in out.values():
        entry["answers"] = dict(entry["answers"])
    return out


FORGED: dict[str, list[bytes]] = {
    "plain": [
        b"Authentication-Results: {id}; spf=pass smtp.mailfrom=bank.example;"
        b" dkim=pass header.d=bank.example; dmarc=pass header.from=bank.example",
        b"X-Pochta-Spam: ham; probability=0.0001",
    ],
    "folded": [
        b"Authentication-Results: {id};\r\n\tspf=pass smtp.mailfrom=bank.example;\r\n"
        b"\tdkim=pass header.d=bank.example;\r\n\tdmarc=pass header.from=bank.example",
        b"X-Pochta-Spam:\r\n ham; probability=0.0001",
    ],
    "cased": [
        b"authentication-results: {ID}; SPF=pass smtp.mailfrom=bank.example; DMARC=pass",
        b"x-pochta-spam: ham; probability=0.0001",
        b"X-POCHTA-SPAM: ham; probability=0.0002",
    ],
    "duplicated": [
        b"Authentication-Results: {id}; spf=pass smtp.mailfrom=bank.example",
        b"Authentication-Results: {id}; dkim=pass header.d=bank.example; dmarc=pass",
        b"X-Pochta-Spam: ham; probability=0.0001",
        b"X-Pochta-Spam: ham; probability=0.0003",
    ],
    "comment before the id": [
        b"Authentication-Results: (verified) {id}; dmarc=pass header.from=bank.example",
    ],
    "space before the colon": [
        b"Authentication-Results : {id}; dmarc=pass header.from=bank.example",
        b"X-Pochta-Spam : ham; probability=0.0001",
    ],
    "other X-Pochta fields": [
        b"X-Pochta-Verdict: ham",
        b"X-Pochta-Trusted: yes",
    ],
    "another host's id (control: may stay)": [
        b"Authentication-Results: mx.other.example; spf=pass smtp.mailfrom=bank.example",
    ],
}


def header_fields(raw: bytes) -> list[bytes]:
    """The header fields of a letter, each as it is on the wire (folding kept, no final CRLF)."""
    head = raw.split(b"\r\n\r\n", 1)[0]
    return re.split(rb"\r\n(?![ \t])", head)


def forged_headers(a: argparse.Namespace) -> Variants:
    """Letters from a stranger carrying fields only pochta may write (``FORGED``: plain,
    folded, cased, duplicated, ...), read back byte for byte through the mailbox API: each
    forged field kept as sent, renamed, or removed; and pochta's own fields beside them."""

    async def attack(server: Pochta, got: Tally) -> None:
        sent: dict[str, list[bytes]] = {}
        for n, (variant, fields) in enumerate(FORGED.items()):
            forged = [
                f.replace(b"{id}", HOSTNAME.encode()).replace(b"{ID}", HOSTNAME.upper().encode())
                for f in fields
            ]
            raw = b"\r\n".join(forged) + b"\r\n" + letter(ALICE, f"forged {n}: {variant}")
            try:
                await deliver_from(stranger(50), server.smtp, ALICE, "", raw)
                sent[f"forged {n}: {variant}"] = forged
            except (OSError, smtplib.SMTPException) as exc:
                got.values.setdefault("not delivered", {})[variant] = why(exc)
        async with http_from(server, TRUSTED) as client:
            r = await client.post(
                "/v1/session", json={"email": ALICE, "password": PASSWORDS[ALICE]}
            )
            auth = {"Authorization": f"Bearer {r.json()['token']}"}
            for folder in ("Inbox", "Spam"):
                page = await client.get(f"/v1/messages?folder={folder}&limit=200", headers=auth)
                for message in page.json()["messages"]:  # found by the Subject line in its
                    raw = (  # bytes: a letter pochta cannot parse is listed without a subject
                        await client.get(f"/v1/messages/{message['id']}/raw", headers=auth)
                    ).content
                    for subject, forged in sent.items():
                        if b"\r\nSubject: %s\r\n" % subject.encode() in raw:
                            got.values.setdefault("letters", {})[subject] = {
                                "folder": folder,
                                "listed with the subject": message["subject"],
                                **stored_fields(forged, raw),
                            }
        survived = [
            f
            for subject, report in got.values.get("letters", {}).items()
            if "control" not in subject
            for f in report["forged kept as sent"]
        ]
        got.values["letters"] = dict(sorted(got.values.get("letters", {}).items()))
        got.values["forged fields sent"] = sum(
            len(f) for s, f in sent.items() if "control" not in s
        )
        got.values["forged fields that survived"] = len(survived)
        got.values["issue_goals"] = {"no_forged_field_survives": not survived}  # item 4

    return [(f"{len(FORGED)} letters with forged fields", attack)]


def stored_fields(forged: list[bytes], raw: bytes) -> dict[str, Any]:
    """Which ``forged`` fields are in the stored letter as sent, which under another name,
    which are gone; and the Authentication-Results / X-Pochta-* fields that pochta added."""
    fields = header_fields(raw)
    kept, renamed, removed = [], [], []
    for f in forged:
        value = f.split(b":", 1)[1]
        if f in fields:
            kept.append(f.decode())
        elif other := [g for g in fields if g.split(b":", 1)[-1] == value]:
            renamed.append(f"{f.decode()} -> {other[0].split(b':', 1)[0].decode()}")
        else:
            removed.append(f.decode())
    ours = [
        g.decode()
        for g in fields
        if g.lower().startswith((b"authentication-results:", b"x-pochta-")) and g not in forged
    ]
    return {
        "forged kept as sent": kept,
        "forged renamed": renamed,
        "forged removed": removed,
        "fields pochta added": ours,
    }


async def smtp_greeting(server: Pochta, ip: str, got: Tally) -> Conn | None:
    """A connection from ``ip`` and its first word: counted; the connection when greeted."""
    t0 = time.monotonic()
    try:
        conn = await Conn.open(ip, server.smtp)
    except (OSError, TimeoutError) as exc:
        got.count("connections", connect_failed(exc), time.monotonic() - t0)
        return None
    try:
        line: bytes | str = await conn.line()
    except TimeoutError:
        line = "no greeting in 30 s"
    answer = got.count("connections", line, time.monotonic() - t0)
    if answer == "220":
        return conn
    conn.close()
    return None


def smtp_connection_flood(a: argparse.Namespace) -> Variants:
    """``--flood-connections`` SMTP connections at once, from one address and then from every
    address of one /24: greeted / refused (which reply) / timed out; the greeted ones held
    ``--flood-hold`` s (what the server said meanwhile, if anything), then QUIT."""

    def flood(addresses: list[str]) -> Attack:
        async def attack(server: Pochta, got: Tally) -> None:
            t0 = time.monotonic()
            opened = await asyncio.gather(
                *(
                    smtp_greeting(server, addresses[i % len(addresses)], got)
                    for i in range(a.flood_connections)
                )
            )
            held = [c for c in opened if c is not None]
            got.values["greeted and held"] = len(held)
            got.values["all answered after_s"] = round(time.monotonic() - t0, 1)
            heard = [asyncio.ensure_future(c.line(None)) for c in held]
            await asyncio.sleep(a.flood_hold)
            for conn, word in zip(held, heard, strict=True):
                if word.done():
                    said = b"" if word.exception() else word.result()
                    got.count("during the hold, the server said", said)
                else:
                    word.cancel()
                    with contextlib.suppress(Exception):
                        conn.writer.write(b"QUIT\r\n")
                conn.close()

        return attack

    n = a.flood_connections
    return [
        (f"{n} connections from one address", flood([stranger(60)])),
        (f"{n} connections from one /24", flood([neighbour(61, i) for i in range(254)])),
    ]


SLOW_START = {
    "smtp": b"EHLO slow.example.net",
    "imap": b"a1 LOGIN alice@example.org ",
    "http": b"GET /healthz HTTP/1.1\r\nHost: mx.hostile.test\r\nX-Slow: ",
}


def slowloris(a: argparse.Namespace) -> Variants:
    """``--slow-connections`` connections per protocol (SMTP, IMAP, HTTP; 50 addresses each),
    each sending one byte of a command that never ends every ``--drip`` s for
    ``--slow-seconds``: how each connection ended (closed by the server after how long, with
    which reply, or still open at the end)."""

    async def drip(server: Pochta, got: Tally, protocol: str, ip: str) -> None:
        port = {"smtp": server.smtp, "imap": server.imap, "http": server.http}[protocol]
        t0 = time.monotonic()
        async with await Conn.open(ip, port) as conn:
            if protocol != "http":
                greeting = await conn.line()
                got.count(f"{protocol} greetings", greeting)
                if not greeting.startswith((b"220", b"* OK")):
                    return
            word = asyncio.ensure_future(conn.line(None))  # anything the server says ends it
            stream = itertools.chain(SLOW_START[protocol], itertools.repeat(ord("x")))
            try:
                while time.monotonic() - t0 < a.slow_seconds and not word.done():
                    await conn.send(bytes([next(stream)]))
                    await asyncio.wait({word}, timeout=a.drip)
            except (ConnectionError, TimeoutError):
                pass
            ended = (word.result() or b"closed") if word.done() else "still open at the end"
            word.cancel()
            got.count(f"{protocol}: how it ended", ended, time.monotonic() - t0)

    async def attack(server: Pochta, got: Tally) -> None:
        await asyncio.gather(
            *(
                counted(
                    got, f"{name} connections", drip(server, got, name, stranger(70 + p, i % 50))
                )
                for p, name in enumerate(SLOW_START)
                for i in range(a.slow_connections)
            )
        )

    label = (
        f"{a.slow_connections} x SMTP, IMAP, HTTP, a byte every {a.drip} s for {a.slow_seconds} s"
    )
    return [(label, attack)]


PIPELINES: dict[str, tuple[str, bytes, Callable[[int], bytes]]] = {
    # name: (protocol, what comes first, command number n)
    "smtp RSET": ("smtp", b"EHLO pipe.example.net\r\n", lambda n: b"RSET\r\n"),
    "smtp NOOP": ("smtp", b"EHLO pipe.example.net\r\n", lambda n: b"NOOP\r\n"),
    "smtp MAIL": (
        "smtp",
        b"EHLO pipe.example.net\r\n",
        lambda n: b"MAIL FROM:<flood@example.net>\r\n" if n % 2 == 0 else b"RSET\r\n",
    ),
    "imap NOOP": ("imap", b"", lambda n: b"n%d NOOP\r\n" % n),
    "imap CAPABILITY": ("imap", b"", lambda n: b"c%d CAPABILITY\r\n" % n),
}


def pipelining_flood(a: argparse.Namespace) -> Variants:
    """``--pipeline-connections`` connections per kind of ``PIPELINES``, each writing
    ``--pipeline-commands`` commands at once without reading a reply, then reading the
    replies until the server is silent for 10 s: bytes the server took, replies by kind."""

    async def flood(server: Pochta, got: Tally, name: str, ip: str) -> None:
        protocol, first, command = PIPELINES[name]
        async with await Conn.open(ip, server.smtp if protocol == "smtp" else server.imap) as conn:
            got.count(f"{name}: greetings", await conn.line())
            blob = first + b"".join(command(n) for n in range(a.pipeline_commands))
            t0 = time.monotonic()
            try:
                await conn.send(blob, timeout=60)
            except TimeoutError:
                got.add(f"{name}: writes stalled 60 s (the server stopped reading)")
            except ConnectionError:
                got.add(f"{name}: closed while sending")
            got.add(f"{name}: bytes taken", len(blob) - conn.unsent())
            replies, last = 0, t0
            while True:
                try:
                    line = await conn.line(10)
                except TimeoutError:
                    got.count(f"{name}: replies", "(then silent for 10 s)")
                    break
                if not line:
                    got.count(f"{name}: replies", "closed", time.monotonic() - t0)
                    break
                got.counts[f"{name}: replies"][kind(line)] += 1
                replies, last = replies + 1, time.monotonic()
            got.add(f"{name}: reply lines", replies)
            got.times[f"{name}: seconds until its last reply"].append(last - t0)

    async def attack(server: Pochta, got: Tally) -> None:
        got.values["commands per connection"] = a.pipeline_commands
        await asyncio.gather(
            *(
                counted(got, "connections", flood(server, got, name, stranger(80 + k, i)))
                for k, name in enumerate(PIPELINES)
                for i in range(a.pipeline_connections)
            )
        )

    label = f"{len(PIPELINES)} kinds x {a.pipeline_connections} connections x {a.pipeline_commands}"
    return [(label + " commands", attack)]


async def logged_in_selected(
    server: Pochta, got: Tally, email: str, ip: str
) -> tuple[Conn, int] | None:
    """A session of ``email`` from ``ip`` with INBOX selected, and its EXISTS; None when not."""
    conn, reply, seconds = await imap_login(ip, server.imap, email, PASSWORDS[email])
    got.count("logins", reply, seconds)
    if conn is None:
        return None
    try:
        untagged, reply = await imap_command(conn, b"S", b"SELECT INBOX")
    except TimeoutError:
        reply = b"timed out"
    got.count("SELECT", reply)
    exists = [int(m.group(1)) for u in untagged if (m := re.match(rb"\* (\d+) EXISTS", u))]
    if not reply.startswith(b"S OK"):
        conn.close()
        return None
    return conn, exists[-1] if exists else 0


async def sessions(
    server: Pochta, got: Tally, email: str, net: int, count: int
) -> list[tuple[Conn, int]]:
    """``count`` sessions of ``email`` with INBOX selected (20 per address of 127.net/16),
    logging in LOGINS_AT_ONCE at a time: a login costs the server an argon2 hash, and a
    client that gave up waiting would leave its hash queued all the same."""
    gate = asyncio.Semaphore(LOGINS_AT_ONCE)

    async def one(i: int) -> tuple[Conn, int] | None:
        async with gate:
            return await logged_in_selected(server, got, email, stranger(net, i // 20))

    opened = await asyncio.gather(*(one(i) for i in range(count)))
    return [s for s in opened if s is not None]


def idle_sessions(a: argparse.Namespace) -> Variants:
    """``--idle-sessions`` sessions of alice (20 per address) log in, SELECT INBOX and sit
    idle ``--idle-hold`` s, then NOOP: still answering or closed. Then ``--idle-storm``
    sessions of bob in IDLE for ``--idle-hold`` s while a letter for bob arrives over SMTP
    every 2 s: how many got into IDLE, and how long each took to hear of each letter."""

    async def sitting(server: Pochta, got: Tally) -> None:
        got.mark("logging in")
        idle = [conn for conn, _ in await sessions(server, got, ALICE, 90, a.idle_sessions)]
        got.values["sessions logged in and selected"] = len(idle)
        got.mark("sitting idle")
        await asyncio.sleep(a.idle_hold)
        got.mark("NOOP on each")

        async def noop(conn: Conn) -> None:
            try:
                _, reply = await imap_command(conn, b"N", b"NOOP")
            except (TimeoutError, ConnectionError):
                reply = b"timed out"
            got.count("NOOP after the hold", reply)
            conn.close()

        await asyncio.gather(*(noop(c) for c in idle))

    async def storm(server: Pochta, got: Tally) -> None:
        got.mark("logging in")
        opened = await sessions(server, got, BOB, 91, a.idle_storm)
        heard: list[list[tuple[float, int]]] = []  # per session: (when, EXISTS)
        idling: list[tuple[Conn, asyncio.Future[None]]] = []

        async def listen(conn: Conn, times: list[tuple[float, int]]) -> None:
            while line := await conn.line(None):
                if m := re.match(rb"\* (\d+) EXISTS", line):
                    times.append((time.monotonic(), int(m.group(1))))
                elif not line.startswith(b"* "):
                    got.count("IDLE ended by the server with", line)
                    return

        for conn, _ in opened:
            conn.writer.write(b"I IDLE\r\n")
            try:
                answer = await conn.line()
            except TimeoutError:
                answer = b"timed out"
            if got.count("IDLE", answer) != "+ (continue)":
                conn.close()
                continue
            heard.append([])
            idling.append((conn, asyncio.ensure_future(listen(conn, heard[-1]))))
        got.values["sessions in IDLE"] = len(idling)
        got.mark("in IDLE, letters arriving")
        watcher = await logged_in_selected(server, got, BOB, stranger(92))
        deliveries: list[tuple[float, int]] = []  # (when delivered, INBOX count after it)
        t_end, n = time.monotonic() + a.idle_hold, 0
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            try:
                await deliver_from(stranger(93), server.smtp, BOB, f"storm {n}")
                done = time.monotonic()
                if watcher is not None:
                    status, _ = await imap_command(watcher[0], b"T", b"STATUS INBOX (MESSAGES)")
                    m = re.search(rb"MESSAGES (\d+)", b"".join(status))
                    deliveries.append((done, int(m.group(1)) if m else -1))
                got.count("letters for bob", "250")
            except Exception as exc:
                got.count("letters for bob", why(exc))
            n += 1
            await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - t0)))
        await asyncio.sleep(5)  # the last letter's news
        first = watcher[1] if watcher is not None else 0
        got.values["notification delay_s"] = notification_delays(first, deliveries, heard)
        for conn, listener in idling:
            listener.cancel()
            with contextlib.suppress(Exception):
                conn.writer.write(b"DONE\r\n")
            conn.close()
        if watcher is not None:
            watcher[0].close()

    return [
        (f"{a.idle_sessions} logged-in sessions idle for {a.idle_hold} s", sitting),
        (f"{a.idle_storm} sessions in IDLE for {a.idle_hold} s, a letter every 2 s", storm),
    ]


def notification_delays(
    first: int, deliveries: list[tuple[float, int]], heard: list[list[tuple[float, int]]]
) -> dict[str, Any]:
    """For each letter delivered into INBOX (when, the INBOX count it made; ``first``: the
    count before) and each session in IDLE: seconds until the session heard an EXISTS that
    counts it; never heard: ``missed``. A letter the verdict put in Spam is left out."""
    delays, missed, before, letters = [], 0, first, 0
    for done, count in deliveries:
        if count <= before:
            continue
        before, letters = count, letters + 1
        for times in heard:
            when = next((t for t, exists in times if exists >= count), None)
            if when is None:
                missed += 1
            else:
                delays.append(max(0.0, when - done))
    return {**spread(delays), "missed": missed, "letters_into_inbox": letters}


ATTACKS: dict[str, Callable[[argparse.Namespace], Variants]] = {
    "imap-prelogin-literals": imap_prelogin_literals,
    "imap-postlogin-literals": imap_postlogin_literals,
    "login-lockout": login_lockout,
    "forged-headers": forged_headers,
    "smtp-connection-flood": smtp_connection_flood,
    "slowloris": slowloris,
    "pipelining-flood": pipelining_flood,
    "idle-sessions": idle_sessions,
}


# -- one measured run ----------------------------------------------------------------------------
async def contained(attack: Awaitable[None], server: Pochta, sampler: Sampler, limit: float) -> str:
    """Run the attack until it ends, the tree passes the Rss ceiling (the server is killed), or
    ``limit`` s pass; how it ended."""
    task = asyncio.ensure_future(attack)
    deadline = time.monotonic() + limit
    while True:
        await asyncio.wait({task}, timeout=0.1)
        if task.done():
            exc = task.exception()
            if exc is None:
                return "completed"
            note(f"  the attack failed: {type(exc).__name__}: {exc}")
            return f"the attack failed: {why(exc)}"
        if sampler.over.is_set():
            ended = (
                f"stopped: the tree's Rss passed {sampler.ceiling_kb / 1024:.0f} MB; server killed"
            )
            server.kill()
        elif time.monotonic() > deadline:
            ended = f"stopped: still running after {limit:.0f} s"
        else:
            continue
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return ended


def phase_figures(
    records: list[Record], phases: list[tuple[str, float]], t_end: float
) -> dict[str, Any]:
    """The normal client's figures in each phase the attack marked (none: nothing)."""
    if not phases:
        return {}
    ends = [t for _, t in phases[1:]] + [t_end]
    return {
        "phases": {
            name: {"seconds": round(t1 - t0, 1), **client_figures(records, t0, t1)}
            for (name, t0), t1 in zip(phases, ends, strict=True)
        }
    }


class Campaign:
    def __init__(self, a: argparse.Namespace, work: Path) -> None:
        self.a, self.work, self.runs = a, work, 0

    def measure(self, label: str, attack: Attack) -> dict[str, Any]:
        """A fresh server; the idle window; the attack; the survival check; the figures."""
        a = self.a
        self.runs += 1
        run_dir = self.work / f"run{self.runs:02d}"
        run_dir.mkdir()
        note(f"  {label}: starting the server")
        server = Pochta.start(run_dir)
        sampler: Sampler | None = None
        probe: Probe | None = None
        record: dict[str, Any] = {"variant": label}
        try:
            deliver(server.smtp, BOB, "the letter the normal client fetches")
            sampler = Sampler(server.proc.pid, a.max_rss)
            probe = Probe(server, a.probe_period)
            time.sleep(WARM_UP)  # the probe's process starts, the server's first answers pass
            t_idle = time.monotonic()
            time.sleep(a.idle_seconds)
            t_attack = time.monotonic()
            got = Tally()
            note("  attacking")
            ended = asyncio.run(contained(attack(server, got), server, sampler, a.attack_limit))
            t_end = time.monotonic()
            note(f"  {ended} after {t_end - t_attack:.0f} s; checking the server")
            survived: dict[str, Any] = (
                still_answering(server)
                if server.alive()
                else {"answering": False, "why": "the benchmark killed it (see ended)"}
            )
            t_after = time.monotonic()
            records = probe.stop()
            sampler.stop()
            record.update(
                {
                    "attack_seconds": round(t_end - t_attack, 1),
                    "ended": ended,
                    "server": sampler.figures(t_idle, t_attack, t_after),
                    "normal_client": {
                        "idle": client_figures(records, t_idle, t_attack),
                        "attack": client_figures(records, t_attack, t_end),
                        **phase_figures(records, got.phases, t_end),
                    },
                    "attacker": got.as_dict(),
                    "survived": survived,
                }
            )
        finally:
            if probe is not None:
                probe.stop()
            if sampler is not None:
                sampler.stop()
            server.stop()
            record.setdefault("survived", {}).update(server.log_figures())
            if not a.keep:
                shutil.rmtree(run_dir, ignore_errors=True)
        peak = record.get("server", {}).get("peak", {}).get("rss_mb")
        note(f"  peak Rss {peak} MB; answering after: {record['survived'].get('answering')}")
        return record


# -- command line --------------------------------------------------------------------------------
SIZES: dict[str, tuple[float, float, str]] = {
    # option: (full, --quick, help)
    "idle_seconds": (5, 3, "seconds of the idle window before each attack"),
    "probe_period": (0.5, 0.5, "seconds between two tries of each kind by the normal client"),
    "attack_limit": (900, 300, "seconds an attack may run before it is stopped"),
    "literal_mb": (40, 10, "MB of each literal (attacks 1 and 2)"),
    "literals": (8, 8, "literals in the pre-login LOGIN"),
    "post_literals": (16, 8, "literals in the post-login APPEND"),
    "literal_connections": (4, 4, "connections of the literal attacks"),
    "guesses": (10_000, 1_000, "wrong passwords of the large login-lockout run"),
    "addresses": (1_000, 100, "addresses they come from"),
    "guess_concurrency": (32, 16, "guesses in flight at once"),
    "guess_seconds": (300, 60, "seconds the guessing may take; the rest is not sent"),
    "flood_connections": (3_000, 500, "SMTP connections at once"),
    "flood_hold": (20, 5, "seconds the flood's connections are held"),
    "slow_connections": (300, 50, "slowloris connections per protocol"),
    "drip": (5, 2, "seconds between two bytes of a slowloris connection"),
    "slow_seconds": (75, 15, "seconds of slowloris (IMAP's login timeout is 60 s)"),
    "pipeline_commands": (50_000, 10_000, "commands per pipelining connection"),
    "pipeline_connections": (1, 1, "connections per kind of pipelining flood"),
    "idle_sessions": (300, 40, "logged-in idle IMAP sessions"),
    "idle_storm": (200, 30, "IMAP sessions in IDLE"),
    "idle_hold": (30, 10, "seconds the idle sessions and the IDLE storm last"),
}


def arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--attack", action="append", choices=list(ATTACKS), help="(default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes: a few minutes in all")
    p.add_argument(
        "--max-rss",
        type=float,
        default=4096,
        help="MB of the tree's Rss at which the server is killed",
    )
    p.add_argument("--keep", action="store_true", help="keep the data directories and logs")
    p.add_argument("--dir", default=None, help="where the temporary directory goes")
    for name, (full, quick, text) in SIZES.items():
        kind_ = float if isinstance(full, float) else int
        p.add_argument(
            "--" + name.replace("_", "-"), type=kind_, help=f"{text} ({full}; --quick {quick})"
        )
    a = p.parse_args()
    for name, (full, quick, _) in SIZES.items():
        if getattr(a, name) is None:
            setattr(a, name, quick if a.quick else full)
    return a


def main() -> None:
    a = arguments()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the floods hold thousands
    work = Path(tempfile.mkdtemp(prefix="pochta-hostile-", dir=a.dir))
    names = a.attack or list(ATTACKS)
    result: dict[str, Any] = {
        "benchmark": "hostile",
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(work),
        "params": {k: v for k, v in vars(a).items() if k not in ("attack", "dir")},
        "nofile_limit": {"before": soft, "now": hard},
        "attacks": {},
    }
    campaign = Campaign(a, work)
    t0 = time.monotonic()
    try:
        for name in names:
            note(f"== {name}")
            runs = result["attacks"][name] = []
            for label, attack in ATTACKS[name](a):
                try:
                    runs.append(run := campaign.measure(label, attack))
                    if name == "imap-prelogin-literals" and "server" in run:
                        peak = run["server"]["peak"].get("rss_mb", 0)
                        run["issue_goals"] = {"tree_peak_rss_at_most_300_mb": peak <= RSS_GOAL_MB}
                except Exception as exc:  # a server that would not start: said, not hidden
                    note(f"  {label}: {type(exc).__name__}: {exc}")
                    runs.append({"variant": label, "error": why(exc)})
    finally:
        result["seconds"] = round(time.monotonic() - t0)
        if a.keep:
            note(f"data directories and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    emit(result)


if __name__ == "__main__":
    main()
