"""How long ``pochta serve`` takes from spawn to a healthy ``/healthz``, as the tests start
it (``tests/integration/conftest.py::start_server``), with the two ways of waiting for it:

- ``fresh``: a new ``httpx.get`` per poll (the tests before): each builds a client and its
  TLS context (the CA bundle parsed), tens of ms of CPU taken from the server starting;
- ``shared``: one ``httpx.Client`` for all the polls (the tests now).

Rounds alternate between the two; the load average is printed with the figures, since the
machine is shared. Prints JSON.

    python benchmarks/serve_start.py              # 6 rounds of each, polls every 0.1 s
    python benchmarks/serve_start.py --rounds 2 --poll 0.05
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TOKEN = "benchmark-service-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start(way: str, poll: float) -> tuple[float, float]:
    """One start: seconds from spawn to healthy, and the CPU seconds of the waiting (this
    process's own, the polls)."""
    with tempfile.TemporaryDirectory(prefix="serve-start-") as tmp:
        http = free_port()
        env = {
            **os.environ,
            "POCHTA_SERVICE_TOKEN": TOKEN,
            "POCHTA_SMTP__PORT": str(free_port()),
            "POCHTA_SMTP__LMTP_PORT": str(free_port()),
            "POCHTA_IMAP__PORT": str(free_port()),
            "POCHTA_SMTP__HOSTNAME": "mx.pochta.test",
        }
        args = [sys.executable, "-m", "pochta", "serve", "--port", str(http)]
        with (Path(tmp) / "serve.log").open("wb") as log:
            proc = subprocess.Popen(
                [*args, "--data", f"{tmp}/data"], stdout=log, stderr=subprocess.STDOUT, env=env
            )
        url = f"http://127.0.0.1:{http}/healthz"
        cpu0, t0 = time.process_time(), time.monotonic()
        try:
            probe = httpx.Client(timeout=1) if way == "shared" else None
            while proc.poll() is None:
                try:
                    r = probe.get(url) if probe else httpx.get(url, timeout=1)
                    if r.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(poll)
            else:
                raise SystemExit((Path(tmp) / "serve.log").read_text())
            took, cpu = time.monotonic() - t0, time.process_time() - cpu0
            if probe:
                probe.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        return took, cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=6, help="starts of each way (default 6)")
    p.add_argument("--poll", type=float, default=0.1, help="seconds between polls")
    args = p.parse_args()
    seen: dict[str, list[tuple[float, float]]] = {"fresh": [], "shared": []}
    loads = [os.getloadavg()[0]]
    child0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    for i in range(args.rounds):
        for way in ("fresh", "shared") if i % 2 == 0 else ("shared", "fresh"):
            seen[way].append(start(way, args.poll))
            loads.append(os.getloadavg()[0])
    child1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out: dict[str, object] = {
        way: {
            "median_seconds_to_healthy": round(statistics.median(t for t, _ in runs), 2),
            "all": [round(t, 2) for t, _ in runs],
            "median_poll_cpu_seconds": round(statistics.median(c for _, c in runs), 3),
        }
        for way, runs in seen.items()
    }
    cpu = child1.ru_utime + child1.ru_stime - child0.ru_utime - child0.ru_stime
    out["server_cpu_seconds_per_start"] = round(cpu / (2 * args.rounds), 2)
    out["poll_seconds"] = args.poll
    out["load_average_1min"] = {"min": min(loads), "max": max(loads)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
