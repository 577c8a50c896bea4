"""Scan throughput: pochta's ``POST /v1/scan`` next to Rspamd 3.4's ``/checkv2``, same letters,
same run (issue 15).

pochta: a real ``python -m pochta serve`` (defaults: letters analyzed in one worker process per
core, decided in the server), SMTP off, a fresh data directory (no counters yet). Rspamd: the
Debian package through ``benchmarks/anchors.py`` (two normal workers, network checks off,
Bayes trained on easy-ham-1 + spam-1, which is Rspamd's usual setup). Clients: ``concurrency``
threads on this machine, each with one keep-alive connection, sending the corpus letters in
turn. The two servers are measured alternately, ``--rounds`` times for each concurrency; the
figure is the median per-round ratio. CPU ms per letter: the server's processes (pochta: the
server and its workers; Rspamd: its processes and its Bayes redis) from /proc.

    python benchmarks/scan_throughput.py            # the whole corpus, 2 and 4 in flight
    python benchmarks/scan_throughput.py --quick    # 300 letters
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from _common import emit, machine, note
from anchors import Rspamd, corpus_training, free_port, tree_cpu_seconds
from pochta_factory import corpus

TOKEN = "benchmark-service-token-0123456789"
GOAL = 1.0  # pochta letters/s over Rspamd's


def serve(data: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "POCHTA_SMTP__ENABLED": "false",
        "POCHTA_IMAP__ENABLED": "false",
        "POCHTA_LOG_LEVEL": "warning",
        "POCHTA_SERVICE_TOKEN": TOKEN,
    }
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pochta", "serve", "--port", str(port), "--data", str(data)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(log.read_text())


def run_pochta(url: str, letters: list[bytes], concurrency: int) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "message/rfc822"}

    def worker(part: list[bytes]) -> None:
        with httpx.Client(timeout=120) as client:
            for raw in part:
                r = client.post(f"{url}/v1/scan", content=raw, headers=auth)
                r.raise_for_status()

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(worker, [letters[i::concurrency] for i in range(concurrency)]))


def measure(fn: Any, cpu: Any, n: int) -> dict[str, float]:
    cpu0 = cpu()
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    return {
        "seconds": round(seconds, 2),
        "letters_per_s": round(n / seconds, 1),
        "cpu_ms_per_letter": round(1000 * (cpu() - cpu0) / n, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="300 letters, one round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    letters = [m.raw for m in corpus.unsealed()]  # a sealed letter is never read
    rounds = args.rounds
    if args.quick:
        letters, rounds = letters[:: len(letters) // 300][:300], 1
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-scan-"))
    result: dict[str, Any] = {"benchmark": "scan_throughput", "machine": machine(workdir)}
    result["letters"] = len(letters)
    proc, url = serve(workdir / "data", workdir / "serve.log")
    try:
        ham, spam = corpus_training(limit=250 if args.quick else None)
        note("starting Rspamd and training its Bayes")
        with Rspamd(ham, spam) as rspamd:
            result["rspamd"] = rspamd.version()
            note("warming both")
            run_pochta(url, letters[:50], 2)
            rspamd.scan(letters[:50], 2)
            runs: list[dict[str, Any]] = []
            for concurrency in (2, 4):
                for r in range(rounds):
                    note(f"{concurrency} in flight, round {r + 1}")
                    p = measure(
                        lambda c=concurrency: run_pochta(url, letters, c),
                        lambda: tree_cpu_seconds(proc.pid),
                        len(letters),
                    )
                    s = measure(
                        lambda c=concurrency: rspamd.scan(letters, c),
                        lambda: rspamd.cpu_seconds() + rspamd.redis_cpu_seconds(),
                        len(letters),
                    )
                    runs.append({"concurrency": concurrency, "round": r, "pochta": p, "rspamd": s})
            result["runs"] = runs
            summary = {}
            for concurrency in (2, 4):
                mine = [x for x in runs if x["concurrency"] == concurrency]
                ratio = statistics.median(
                    x["pochta"]["letters_per_s"] / x["rspamd"]["letters_per_s"] for x in mine
                )
                summary[str(concurrency)] = {
                    "pochta_letters_per_s": statistics.median(
                        x["pochta"]["letters_per_s"] for x in mine
                    ),
                    "rspamd_letters_per_s": statistics.median(
                        x["rspamd"]["letters_per_s"] for x in mine
                    ),
                    "pochta_cpu_ms_per_letter": statistics.median(
                        x["pochta"]["cpu_ms_per_letter"] for x in mine
                    ),
                    "rspamd_cpu_ms_per_letter": statistics.median(
                        x["rspamd"]["cpu_ms_per_letter"] for x in mine
                    ),
                    "ratio_pochta_over_rspamd": round(ratio, 3),
                }
            result["summary"] = summary
            result["goal_ratio"] = GOAL
            ratios = [v["ratio_pochta_over_rspamd"] for v in summary.values()]
            result["goal_met"] = all(r >= GOAL for r in ratios)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(workdir, ignore_errors=True)
    emit(result)


if __name__ == "__main__":
    main()
