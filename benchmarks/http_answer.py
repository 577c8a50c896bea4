"""Small HTTP answers a second, and the server's CPU for each (issue 29): ``wrk`` against a
real ``pochta serve`` (embedded defaults, IMAP off, a fresh data directory), this tree and
another one (``--also SRC``: e.g. main's ``src/`` exported) in turns, so that a change of the
HTTP path (the protocol, the middleware, the answer's writes) is measured in the same run.

Each round starts the server, waits for its ``/healthz`` (the start-up is done only then: the
listening socket is bound before the application has started, and a request sent earlier
waits for the rest of the start-up), then runs ``wrk -t1 -c{connections} -d{seconds}s`` on
``--path``. CPU is the server process's user + system time over the run divided by the
requests (from /proc). Needs ``wrk`` (Debian's package).

    python benchmarks/http_answer.py --also /tmp/main/src            # /healthz, 4 rounds
    python benchmarks/http_answer.py --path /nope --rounds 3          # a 404
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from _common import emit, free_port, machine
from smtp_delivery import own_cpu

HERE = Path(__file__).resolve().parent.parent / "src"


def one(src: Path, path: str, seconds: int, connections: int, work: Path) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="http-answer-", dir=work)) / "data"
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(src),
        "POCHTA_SMTP__PORT": str(free_port()),
        "POCHTA_SMTP__LMTP_PORT": "0",
        "POCHTA_IMAP__ENABLED": "false",
    }
    command = [sys.executable, "-m", "pochta", "serve", "--port", str(port), "--data", str(data)]
    server = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read()
                break
            except Exception:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"pochta serve from {src} did not start") from None
                time.sleep(0.1)
        time.sleep(1.0)
        before = own_cpu(server.pid)
        out = subprocess.run(
            [
                *("wrk", "-t1", f"-c{connections}", f"-d{seconds}s"),
                f"http://127.0.0.1:{port}{path}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        cpu = own_cpu(server.pid) - before
    finally:
        server.terminate()
        server.wait(60)
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return {
        "requests_per_s": round(rate, 1),
        "cpu_us_per_request": round(cpu * 1e6 / max(requests, 1), 1),
        "loadavg": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--also", type=Path, default=None, help="another tree's src/ in turns")
    p.add_argument("--path", default="/healthz")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--seconds", type=int, default=8)
    p.add_argument("--connections", type=int, default=4)
    args = p.parse_args()
    if shutil.which("wrk") is None:
        emit({"benchmark": "http_answer", "skipped": "wrk is not installed (apt-get install wrk)"})
        return
    trees = {"this": HERE, **({"also": args.also.resolve()} if args.also else {})}
    work = Path(tempfile.mkdtemp(prefix="http-answer-"))
    result: dict[str, Any] = {"benchmark": "http_answer", "machine": machine(work)}
    result |= {"path": args.path, "connections": args.connections, "seconds": args.seconds}
    rounds: list[dict[str, Any]] = []
    try:
        for i in range(args.rounds):  # the order alternates: neither always goes first
            order = list(trees.items())[:: -1 if i % 2 else 1]
            rounds.append({name: one(src, args.path, args.seconds, args.connections, work)
                           for name, src in order})  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["rounds"] = rounds
    result["trees"] = {name: str(src) for name, src in trees.items()}
    if args.also:
        result["this_over_also"] = {
            "requests_per_s": [round(r["this"]["requests_per_s"] / r["also"]["requests_per_s"], 3)
                               for r in rounds],
            "cpu_us_per_request": [
                round(r["this"]["cpu_us_per_request"] / r["also"]["cpu_us_per_request"], 3)
                for r in rounds
            ],
        }  # fmt: skip
        result["median_rate_ratio"] = statistics.median(result["this_over_also"]["requests_per_s"])
    emit(result)


if __name__ == "__main__":
    main()
