"""A slow dependency slows only what needs it (issue 27, item 7): two measurements, JSON out.

(a) PostgreSQL paused. ``pochta serve`` with the mailbox index and the blob databases in
PostgreSQL (``mailbox.backend`` and ``blobs.backend`` = postgres; a durable cluster of
tests/pgserver.py on a loopback port). A load process keeps 8 SMTP clients delivering and 50
HTTP clients listing a mailbox (GET /v1/messages). Meanwhile, every 100 ms, a new SMTP
connection waits for its greeting and a new HTTP connection asks ``/healthz`` (plain sockets:
the probe's own cost is a few hundred microseconds). Five seconds as is, then the postmaster
and every backend are stopped with SIGSTOP for ten seconds, then five seconds after SIGCONT.
Reported per phase: the latency of greetings and of /healthz (median, p95, max), the
/healthz statuses seen, and the letters delivered. Goal: greetings and /healthz within 100 ms
during the pause.

(b) A DNS server that never answers. The same letters, client and concurrency against
``antispam.dns = "off"``, ``"system"`` with ``dns_server`` a loopback UDP socket that reads and
never replies (default timeouts: 2 s a question, 7 s a letter), and ``"system"`` with nsd
(tests/dnsserver.py) answering for every domain asked (SPF ``ip4:127.0.0.1``, the DKIM key,
DMARC ``p=none``: every check passes), to show what authentication costs. The letters: the
SpamAssassin corpus's ham (pochta_factory.corpus) whose From names a registrable domain; the corpus
predates DKIM (none of its 6,046 letters carries a DKIM-Signature, none is ARC-sealed), so
each is signed here with dkimpy for its own From domain (selector ``bench``), the same
signed bytes for every setting, MAIL FROM ``bounce@<From domain>``. The three servers run at
once; each first gets 40 letters unmeasured (a cold cache; the silent server is found out:
three timeouts and an unanswered probe, about 2 x ``dns_timeout``; ``warmup_seconds``), then
batches of the same letters go to each in turn, the order rotating each round, 8 connections
(one client process each), so that the load of a shared machine falls on all three alike.
Goal: the silent server's rate >= 0.9 x the off rate (all rounds together; per round too).

(c) The server's CPU for one letter's SPF and DMARC on the async path (the replay runs,
asyncio; runs past the loop's allowance in a thread, as the server does), on an in-memory zone
like Google's (a redirect and three includes), against one blocking pyspf check; and for the
hostile chains of tests/unit/antispam_phishing/test_spf_cost.py: the review's (10 includes of
53 KB records) and the worst within the bounds (11 records at 2,048 characters / 128 terms,
each with a 59 KB exp= of macros, IPv4 and IPv6 clients): the CPU of the event loop's thread
and of the whole process, per letter.

    python benchmarks/slow_dependency.py            # all; 3 rounds of 150 letters per DNS setting
    python benchmarks/slow_dependency.py --quick    # a 3 s pause, 1 round of 30 letters
    python benchmarks/slow_dependency.py --only dns --letters 200 --rounds 5
    python benchmarks/slow_dependency.py --only postgres
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import signal
import smtplib
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.pgserver, tests.dnsserver

from tests.dnsserver import NSD, NsdServer, silent_udp_port, txt_rdata
from tests.pgserver import PostgresServer, migrated_template

from _common import emit, machine, note, percentile
from anchors import tree_cpu_seconds
from pochta.antispam.auth.results import from_domain
from pochta.mime import normalize
from pochta.mime.letter import parse
from pochta_factory import corpus
from smtp_delivery import free_port, wire

PASSWORD = "benchmark password"
TOKEN = "benchmark-service-token-0123456789"
RCPT = "bench@example.org"
CONNECTIONS = 8
WARMUP = 40
GOAL_MS = 100.0
RATIO_GOAL = 0.9


# -- one pochta serve -----------------------------------------------------------------------
def add_user(data: Path, env: dict[str, str]) -> None:
    full = {**os.environ, **env}
    pochta = [sys.executable, "-m", "pochta"]
    subprocess.run(
        [*pochta, "init", "--data", str(data)], check=True, capture_output=True, env=full
    )
    subprocess.run(
        [*pochta, "user", "add", RCPT, "--password-stdin", "--data", str(data)],
        input=f"{PASSWORD}\n".encode(),
        check=True,
        capture_output=True,
        env=full,
    )


class Serve:
    def __init__(self, data: Path, log: Path, env: dict[str, str]) -> None:
        self.http, self.smtp = free_port(), free_port()
        full = {
            **os.environ,
            "POCHTA_SMTP__PORT": str(self.smtp),
            "POCHTA_SMTP__LMTP_PORT": "0",
            "POCHTA_IMAP__ENABLED": "false",
            "POCHTA_LOG_LEVEL": "warning",
            "POCHTA_SERVICE_TOKEN": TOKEN,
            **env,
        }
        args = [sys.executable, "-m", "pochta", "serve", "--port", str(self.http)]
        with log.open("ab") as sink:
            self.proc = subprocess.Popen(
                [*args, "--data", str(data)], stdout=sink, stderr=subprocess.STDOUT, env=full
            )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(log.read_text())
            try:
                if http_status(self.http, "/healthz") == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.proc.kill()
        raise RuntimeError(log.read_text())

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def http_status(port: int, path: str, timeout: float = 30.0) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        line = s.recv(64)
    return int(line.split()[1])


def greeting(port: int, timeout: float = 30.0) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        banner = s.recv(512)
        if not banner.startswith(b"220"):
            raise OSError(f"no greeting: {banner!r}")
        s.sendall(b"QUIT\r\n")


def summary(values: list[float]) -> dict[str, Any]:
    ms = sorted(v * 1000 for v in values)
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 0.5), 1),
        "p95_ms": round(percentile(ms, 0.95), 1),
        "max_ms": round(ms[-1], 1),
    }


# -- (a) PostgreSQL paused ------------------------------------------------------------------
def _load(smtp: int, http: int, token: str, stop: Any, delivered: Any) -> None:
    """8 SMTP clients delivering, 50 HTTP clients listing the mailbox, until ``stop``."""
    letter = wire(b"From: load@example.net\nTo: bench@example.org\nSubject: load\n\nhello\n")

    def deliver() -> None:
        while not stop.is_set():
            try:
                with smtplib.SMTP("127.0.0.1", smtp, timeout=120) as client:
                    while not stop.is_set():
                        client.sendmail("load@example.net", [RCPT], letter)
                        with delivered.get_lock():
                            delivered.value += 1
            except (OSError, smtplib.SMTPException):
                time.sleep(0.1)

    request = (
        f"GET /v1/messages?limit=20 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    ).encode()

    def browse() -> None:
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", http), timeout=120) as s:
                    s.sendall(request)
                    while s.recv(65536):
                        pass
            except OSError:
                time.sleep(0.1)
            time.sleep(0.05)

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    threads += [threading.Thread(target=browse) for _ in range(50)]
    for t in threads:
        t.daemon = True
        t.start()
    stop.wait()


def _session_token(http: int) -> str:
    import httpx

    r = httpx.post(
        f"http://127.0.0.1:{http}/v1/session", json={"email": RCPT, "password": PASSWORD}
    )
    r.raise_for_status()
    return str(r.json()["token"])


def postgres(workdir: Path, pause: float) -> dict[str, Any]:
    with PostgresServer.start(workdir, durable=True) as pg:
        migrated_template(pg)
        dsn = pg.dsn(pg.create_database("bench", template="pochta_template"))
        env = {
            "POCHTA_MAILBOX__BACKEND": "postgres",
            "POCHTA_BLOBS__BACKEND": "postgres",
            "POCHTA_POSTGRES__DSN": dsn,
        }
        data = workdir / "pg-data"
        add_user(data, env)
        server = Serve(data, workdir / "pg-serve.log", env)
        ctx = mp.get_context("spawn")
        stop, delivered = ctx.Event(), ctx.Value("i", 0)
        load = ctx.Process(
            target=_load,
            args=(server.smtp, server.http, _session_token(server.http), stop, delivered),
        )
        load.start()
        phases: dict[str, dict[str, Any]] = {}
        try:
            time.sleep(2.0)  # the load under way
            note("postgres: before (5 s)")
            phases["before"] = _probe(server, 5.0, delivered)
            note(f"postgres: paused ({pause:g} s)")
            with pg.paused():
                phases["paused"] = _probe(server, pause, delivered)
            note("postgres: after (5 s)")
            phases["after"] = _probe(server, 5.0, delivered)
        finally:
            stop.set()
            load.join(60)
            if load.is_alive():
                load.kill()
            server.stop()
    during = phases["paused"]
    worst = max(during["greetings"].get("max_ms", 1e9), during["healthz"].get("max_ms", 1e9))
    return {
        "pause_seconds": pause,
        "load": "8 SMTP clients delivering, 50 HTTP clients listing a mailbox",
        "phases": phases,
        "goal_ms": GOAL_MS,
        "worst_during_pause_ms": worst,
        "goal_met": worst <= GOAL_MS,
    }


def _probe(server: Serve, seconds: float, delivered: Any) -> dict[str, Any]:
    greetings: list[float] = []
    health: list[float] = []
    statuses: dict[str, int] = {}
    failures: list[str] = []
    end = time.monotonic() + seconds
    start_count = delivered.value

    def every(interval: float, fn: Callable[[], None]) -> None:
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                fn()
            except OSError as exc:
                failures.append(repr(exc))
            time.sleep(max(0.0, interval - (time.monotonic() - t0)))

    def greet() -> None:
        t0 = time.perf_counter()
        greeting(server.smtp)
        greetings.append(time.perf_counter() - t0)

    def healthz() -> None:
        t0 = time.perf_counter()
        status = http_status(server.http, "/healthz")
        health.append(time.perf_counter() - t0)
        statuses[str(status)] = statuses.get(str(status), 0) + 1

    threads = [
        threading.Thread(target=every, args=(0.1, greet)),
        threading.Thread(target=every, args=(0.1, healthz)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {
        "greetings": summary(greetings),
        "healthz": summary(health),
        "healthz_statuses": statuses,
        "letters_delivered": delivered.value - start_count,
        "probe_failures": failures[:5],
    }


# -- (b) DNS that never answers ---------------------------------------------------------------
def _signed(letters: int) -> tuple[list[tuple[str, bytes]], dict[str, str], str]:
    """(MAIL FROM, signed letter) pairs, the zones that answer for them, and the key's TXT."""
    from tests.unit.antispam_phishing.helpers import make_key, sign

    key = make_key(2048)
    out: list[tuple[str, bytes]] = []
    domains: set[str] = set()
    for m in corpus.unsealed(["easy-ham-1", "easy-ham-2", "hard-ham-1"]):
        raw = wire(m.raw)
        domain = from_domain(parse(raw))
        if not domain or not normalize.registrable(domain) or not domain.isascii():
            continue
        try:
            signed = sign(raw, key, domain, "bench")
        except Exception:  # a header dkimpy cannot sign
            continue
        out.append((f"bounce@{domain}", signed))
        domains.add(domain)
        if len(out) == letters:
            break
    zones: dict[str, list[str]] = {}
    for domain in sorted(domains):
        org = normalize.registrable(domain) or domain
        records = zones.setdefault(org, [f"_dmarc.{org}. IN TXT {txt_rdata('v=DMARC1; p=none')}"])
        records.append(f"{domain}. IN TXT {txt_rdata('v=spf1 ip4:127.0.0.1 -all')}")
        records.append(f"bench._domainkey.{domain}. IN TXT {txt_rdata(key.txt)}")
    return out, {z: "\n".join(r) + "\n" for z, r in zones.items()}, key.txt


def _client(port: int, letters: list[tuple[str, bytes]], start: Any, out: Any) -> None:
    start.wait()
    ok = 0
    try:
        with smtplib.SMTP("127.0.0.1", port, timeout=300) as smtp:
            for sender, raw in letters:
                try:
                    smtp.sendmail(sender, [RCPT], raw)
                    ok += 1
                except smtplib.SMTPResponseException as exc:
                    print(f"refused: {exc.smtp_code} {exc.smtp_error!r}", file=sys.stderr)
    finally:
        out.put(ok)


def _send(port: int, letters: list[tuple[str, bytes]]) -> tuple[int, float]:
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_client, args=(port, letters[i::CONNECTIONS], start, out))
        for i in range(CONNECTIONS)
    ]
    for p in procs:
        p.start()
    time.sleep(1.5)  # the clients started and connected
    t0 = time.perf_counter()
    start.set()
    sent = sum(out.get() for _ in procs)
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.join()
    return sent, elapsed


def dns(workdir: Path, count: int, rounds: int) -> dict[str, Any]:
    letters, zones, _ = _signed(WARMUP + count * rounds)
    sock, port = silent_udp_port()
    configs: dict[str, dict[str, str]] = {
        "off": {"POCHTA_ANTISPAM__DNS": "off"},
        "silent": {
            "POCHTA_ANTISPAM__DNS": "system",
            "POCHTA_ANTISPAM__DNS_SERVER": f"127.0.0.1:{port}",
        },
    }
    nsd = NsdServer.start(workdir / "nsd", zones) if NSD is not None else None
    if nsd is not None:
        configs["nsd"] = {
            "POCHTA_ANTISPAM__DNS": "system",
            "POCHTA_ANTISPAM__DNS_SERVER": nsd.address,
        }
    servers: dict[str, Serve] = {}
    runs: list[dict[str, Any]] = []
    warmups: dict[str, float] = {}
    try:
        for name, env in configs.items():  # all up at once: the batches alternate between them
            note(f"dns: starting {name}")
            add_user(workdir / f"dns-{name}", {})
            servers[name] = Serve(workdir / f"dns-{name}", workdir / f"dns-{name}.log", env)
        for name, server in servers.items():
            note(f"dns: {name}, {WARMUP} letters to warm up")
            warmups[name] = round(_send(server.smtp, letters[:WARMUP])[1], 2)
        order = list(servers)
        for r in range(rounds):
            batch = letters[WARMUP + r * count : WARMUP + (r + 1) * count]
            for name in order[r % len(order) :] + order[: r % len(order)]:
                note(f"dns: round {r + 1}, {name}")
                pid = servers[name].proc.pid
                cpu0 = tree_cpu_seconds(pid)
                sent, elapsed = _send(servers[name].smtp, batch)
                cpu = tree_cpu_seconds(pid) - cpu0
                runs.append(
                    {
                        "dns": name,
                        "round": r + 1,
                        "letters": sent,
                        "seconds": round(elapsed, 2),
                        "letters_per_s": round(sent / elapsed, 1),
                        "server_cpu_ms_per_letter": round(1000 * cpu / sent, 2) if sent else None,
                    }
                )
    finally:
        for server in servers.values():
            server.stop()
        if nsd is not None:
            nsd.stop()
        sock.close()
    rate: dict[str, float] = {}
    for name in servers:
        mine = [r for r in runs if r["dns"] == name]
        rate[name] = sum(r["letters"] for r in mine) / sum(r["seconds"] for r in mine)
    per_round = {
        name: [
            round(a["letters_per_s"] / b["letters_per_s"], 2)
            for a in runs
            if a["dns"] == name
            for b in runs
            if b["dns"] == "off" and b["round"] == a["round"]
        ]
        for name in servers
        if name != "off"
    }
    ratios = {k: round(v / rate["off"], 2) for k, v in rate.items() if k != "off"}
    return {
        "connections": CONNECTIONS,
        "letters_per_batch": count,
        "rounds": rounds,
        "domains": len({s for s, _ in letters}),
        "zones": len(zones),
        "warmup_seconds": warmups,
        "runs": runs,
        "letters_per_s": {k: round(v, 1) for k, v in rate.items()},
        "ratio_to_off": ratios,
        "ratio_to_off_per_round": per_round,
        "goal": f"silent >= {RATIO_GOAL} x off",
        "goal_met": ratios.get("silent", 0.0) >= RATIO_GOAL,
        "nsd": NSD is not None,
    }


def auth_cpu(n: int = 500, hostile: int = 20) -> dict[str, Any]:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from tests.unit.antispam_phishing.test_spf_cost import chain, ip4, ip6, reviewers_chain

    from pochta.antispam.auth import replay, spf
    from pochta.antispam.auth.authenticator import Authenticator
    from pochta.antispam.auth.resolver import AsyncFixture, FixtureResolver
    from pochta.antispam.auth.results import DkimResult, plan
    from pochta.executors import CHECK_THREADS

    zone = FixtureResolver(
        {
            "gmail.com": {"TXT": ["v=spf1 redirect=_spf.google.com"]},
            "_spf.google.com": {
                "TXT": [
                    "v=spf1 include:_netblocks.google.com include:_netblocks2.google.com"
                    " include:_netblocks3.google.com ~all"
                ]
            },
            "_netblocks.google.com": {
                "TXT": ["v=spf1 ip4:35.190.247.0/24 ip4:64.233.160.0/19 ip4:209.85.128.0/17 ~all"]
            },
            "_netblocks2.google.com": {"TXT": ["v=spf1 ip6:2001:4860:4000::/36 ~all"]},
            "_netblocks3.google.com": {"TXT": ["v=spf1 ip4:172.217.0.0/19 ~all"]},
            "_dmarc.gmail.com": {"TXT": ["v=DMARC1; p=none; sp=quarantine"]},
        }
    )
    pool = ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="pochta-check")

    async def verify(*_: Any) -> tuple[DkimResult, ...]:
        return ()

    def measure(
        zone: FixtureResolver, ip: str, sender: str, helo: str, letters: int
    ) -> dict[str, Any]:
        """CPU per letter: the event loop's thread, and the process (both threads)."""
        domain = sender.rpartition("@")[2]
        letter_plan = plan(
            wire(f"From: a@{domain}\nTo: b@example.org\nSubject: hi\n\nhi\n".encode())
        )

        async def run() -> dict[str, Any]:
            auth = Authenticator(AsyncFixture(zone), run=replay.in_executor(pool))
            on_loop, in_all = time.thread_time(), time.process_time()
            for _ in range(letters):
                one = auth.begin(ip, sender, helo)
                result = await one.finish(letter_plan, verify)
                one.close()
            return {
                "loop_cpu_ms_per_letter": round((time.thread_time() - on_loop) * 1000 / letters, 3),
                "process_cpu_ms_per_letter": round(
                    (time.process_time() - in_all) * 1000 / letters, 3
                ),
                "spf": result.spf.result,
            }

        return asyncio.run(run())

    google = ("209.85.220.41", "a@gmail.com", "mail-sor-f41.google.com")
    real = measure(zone, *google, n)
    t0 = time.process_time()
    for _ in range(n):
        spf.check(*google, zone)
    blocking = (time.process_time() - t0) / n
    evil = ("a@evil.example", "mx.evil.example")
    worst = {
        "review_chain_10_includes_of_53KB": measure(reviewers_chain(), "192.0.2.1", *evil, hostile),
        "bounds_chain_ip4_client": measure(chain(ip4), "192.0.2.1", *evil, hostile),
        "bounds_chain_ip6_client": measure(chain(ip6), "2001:db8::1", *evil, hostile),
    }
    pool.shutdown()
    return {
        "letters": n,
        "server_cpu_ms_per_letter_spf_and_dmarc": real["loop_cpu_ms_per_letter"],
        "process_cpu_ms_per_letter_spf_and_dmarc": real["process_cpu_ms_per_letter"],
        "one_blocking_spf_check_ms": round(blocking * 1000, 3),
        "hostile_letters": hostile,
        "hostile": worst,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--only", choices=("postgres", "dns", "cpu"))
    p.add_argument("--letters", type=int, default=150, help="letters per DNS batch")
    p.add_argument("--rounds", type=int, default=3, help="batches per DNS setting, alternated")
    p.add_argument("--pause", type=float, default=10.0, help="seconds PostgreSQL is stopped")
    p.add_argument("--dir", default=None)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.letters, args.rounds, args.pause = 30, 1, 3.0
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-slow-", dir=args.dir))
    workdir.chmod(0o755)  # PostgreSQL's own user reaches its directory under it
    try:
        result: dict[str, Any] = {"benchmark": "slow_dependency", "machine": machine(workdir)}
        if args.only in (None, "postgres"):
            result["postgres_paused"] = postgres(workdir, args.pause)
        if args.only in (None, "dns"):
            result["dns_silent"] = dns(workdir, args.letters, args.rounds)
        if args.only in (None, "cpu"):
            result["auth_cpu"] = auth_cpu()
        emit(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
