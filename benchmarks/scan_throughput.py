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
    python benchmarks/scan_throughput.py --also /tmp/main/src   # and another tree's pochta

``--also SRC``: a second ``pochta serve`` from the source tree ``SRC`` (put first on
``PYTHONPATH``), measured in the same rounds (this tree, then ``SRC``'s, then Rspamd), so that
two versions of pochta are compared in one run, each against the same Rspamd rounds.
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
GOAL = 1.2  # pochta letters/s over Rspamd's (issue 29, item 3)


def serve(data: Path, log: Path, src: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    path = os.environ.get("PYTHONPATH", "")
    env = {
        **os.environ,
        **({"PYTHONPATH": f"{src}{os.pathsep}{path}" if path else str(src)} if src else {}),
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


def summarize(runs: list[dict[str, Any]], side: str, concurrency: int) -> dict[str, Any]:
    mine = [x for x in runs if x["concurrency"] == concurrency]
    ratio = statistics.median(x[side]["letters_per_s"] / x["rspamd"]["letters_per_s"] for x in mine)
    return {
        "pochta_letters_per_s": statistics.median(x[side]["letters_per_s"] for x in mine),
        "rspamd_letters_per_s": statistics.median(x["rspamd"]["letters_per_s"] for x in mine),
        "pochta_cpu_ms_per_letter": statistics.median(x[side]["cpu_ms_per_letter"] for x in mine),
        "rspamd_cpu_ms_per_letter": statistics.median(
            x["rspamd"]["cpu_ms_per_letter"] for x in mine
        ),
        "ratio_pochta_over_rspamd": round(ratio, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="300 letters, one round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--also", type=Path, help="another source tree's pochta, in the same rounds")
    args = ap.parse_args()
    letters = [m.raw for m in corpus.unsealed()]  # a sealed letter is never read
    rounds = args.rounds
    if args.quick:
        letters, rounds = letters[:: len(letters) // 300][:300], 1
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-scan-"))
    result: dict[str, Any] = {"benchmark": "scan_throughput", "machine": machine(workdir)}
    result["letters"] = len(letters)
    servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    try:
        servers["pochta"] = serve(workdir / "data", workdir / "serve.log")
        if args.also:
            result["also"] = str(args.also)
            servers["also"] = serve(workdir / "also", workdir / "also.log", args.also.resolve())
        ham, spam = corpus_training(limit=250 if args.quick else None)
        note("starting Rspamd and training its Bayes")
        with Rspamd(ham, spam) as rspamd:
            result["rspamd"] = rspamd.version()
            note("warming both")
            for _, url in servers.values():
                run_pochta(url, letters[:50], 2)
            rspamd.scan(letters[:50], 2)
            runs: list[dict[str, Any]] = []
            for concurrency in (2, 4):
                for r in range(rounds):
                    note(f"{concurrency} in flight, round {r + 1}")
                    run: dict[str, Any] = {"concurrency": concurrency, "round": r}
                    for side, (proc, url) in servers.items():
                        run[side] = measure(
                            lambda c=concurrency, u=url: run_pochta(u, letters, c),
                            lambda p=proc.pid: tree_cpu_seconds(p),
                            len(letters),
                        )
                    run["rspamd"] = measure(
                        lambda c=concurrency: rspamd.scan(letters, c),
                        lambda: rspamd.cpu_seconds() + rspamd.redis_cpu_seconds(),
                        len(letters),
                    )
                    run["loadavg"] = os.getloadavg()
                    note(f"  {run}")
                    runs.append(run)
            result["runs"] = runs
            result["summary"] = {str(c): summarize(runs, "pochta", c) for c in (2, 4)}
            if args.also:
                result["summary_also"] = {str(c): summarize(runs, "also", c) for c in (2, 4)}
            result["goal_ratio"] = GOAL
            ratios = [v["ratio_pochta_over_rspamd"] for v in result["summary"].values()]
            result["goal_met"] = all(r >= GOAL for r in ratios)
    finally:
        for proc, _ in servers.values():
            proc.send_signal(signal.SIGTERM)
        for proc, _ in servers.values():
            proc.wait(timeout=60)
        shutil.rmtree(workdir, ignore_errors=True)
    emit(result)


if __name__ == "__main__":
    main()
