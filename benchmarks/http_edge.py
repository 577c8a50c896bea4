"""The HTTP edge's own cost (issue 29): the server process's CPU per request, this tree against
another (``--against SRC``, e.g. an export of main's ``src/``), in the same run.

Two real ``python -m pochta serve`` (SMTP and IMAP off, fresh data directories, the same
settings; ``--parser`` sets ``http.parser`` of this tree's server): one from this tree, one
with ``SRC`` first on its ``PYTHONPATH``. Each round sends the same requests to one, then the
other (who goes first alternates), from ``--clients`` threads with a keep-alive connection
each:

- ``scan``: ``POST /v1/scan`` of corpus letters (no sealed letter is read); the analysis runs
  in the worker processes, which are not counted: the figure is the server process's part;
- ``upload``: ``PUT /v1/blobs/{key}`` of 4 KiB, each its own content (both copies, fsynced);
- ``healthz``: ``GET /healthz``, the stack alone.

CPU = user + system time of the server process (all its threads, not its children) per
request; requests/s are wall time and follow the machine's load. The figure is the median
ratio of rounds (this / against) of CPU per request.

    python benchmarks/http_edge.py --against /tmp/main/src
    python benchmarks/http_edge.py --against /tmp/main/src --quick
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from _common import ServeProcess, emit, machine, note
from pochta_factory import corpus

TOKEN = "benchmark-service-token-0123456789"
HERE = Path(__file__).resolve().parent.parent / "src"


class Server(ServeProcess):
    def __init__(self, src: Path, data: Path, log: Path, settings: dict[str, str]) -> None:
        env = {
            "POCHTA_SMTP__ENABLED": "false",
            "POCHTA_IMAP__ENABLED": "false",
            "POCHTA_SERVICE_TOKEN": TOKEN,
            **settings,
        }
        super().__init__(data, log, env, src=src)


Request = Callable[[httpx.Client, str, int], None]
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def scan_request(letters: list[bytes]) -> Request:
    headers = {**AUTH, "Content-Type": "message/rfc822"}

    def send(client: httpx.Client, url: str, i: int) -> None:
        r = client.post(f"{url}/v1/scan", content=letters[i % len(letters)], headers=headers)
        r.raise_for_status()

    return send


def upload_request(client: httpx.Client, url: str, i: int) -> None:
    body = os.urandom(4096)
    key = hashlib.sha256(body).hexdigest()
    r = client.put(f"{url}/v1/blobs/{key}", params={"magic": 7}, content=body, headers=AUTH)
    if r.status_code not in (200, 201):
        raise RuntimeError(f"upload: {r.status_code} {r.text}")


def healthz_request(client: httpx.Client, url: str, i: int) -> None:
    client.get(f"{url}/healthz").raise_for_status()


def run(server: Server, send: Request, n: int, clients: int) -> dict[str, float]:
    def worker(part: range) -> None:
        with httpx.Client(timeout=120) as client:
            for i in part:
                send(client, server.url, i)

    cpu0, t0 = server.cpu_seconds(), time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(worker, [range(c, n, clients) for c in range(clients)]))
    seconds = time.perf_counter() - t0
    return {
        "requests_per_s": n / seconds,
        "cpu_ms_per_request": 1000 * (server.cpu_seconds() - cpu0) / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--against", type=Path, required=True, help="the other tree's src/")
    ap.add_argument("--parser", default=None, help="http.parser of this tree's server")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="fewer requests, 2 rounds")
    ap.add_argument("--log-level", default="warning", help="both servers' log level")
    args = ap.parse_args()
    rounds = 2 if args.quick else args.rounds
    scale = 0.25 if args.quick else 1.0
    letters = [m.raw for m in corpus.unsealed()]  # a sealed letter is never read
    letters = letters[:: max(1, len(letters) // 400)][:400]
    kinds: dict[str, tuple[Request, int]] = {
        "scan": (scan_request(letters), int(400 * scale)),
        "upload": (upload_request, int(400 * scale)),
        "healthz": (healthz_request, int(2000 * scale)),
    }
    work = Path(tempfile.mkdtemp(prefix="pochta-bench-edge-"))
    result: dict[str, Any] = {
        "benchmark": "http_edge",
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(work),
        "params": {"rounds": rounds, "clients": args.clients, "log_level": args.log_level},
    }
    common = {"POCHTA_LOG_LEVEL": args.log_level}
    mine = {**common, **({"POCHTA_HTTP__PARSER": args.parser} if args.parser else {})}
    servers: dict[str, Server] = {}
    try:
        servers["this"] = Server(HERE, work / "this", work / "this.log", mine)
        servers["against"] = Server(args.against, work / "against", work / "against.log", common)
        for server in servers.values():  # warm: the workers' first letters, imports
            run(server, kinds["scan"][0], 40, args.clients)
            run(server, upload_request, 20, args.clients)
        runs: list[dict[str, Any]] = []
        for r in range(rounds):
            loads = os.getloadavg()[0]
            for kind, (send, n) in kinds.items():
                order = ["this", "against"] if r % 2 == 0 else ["against", "this"]
                row: dict[str, Any] = {"round": r, "kind": kind, "load": loads}
                for name in order:
                    row[name] = run(servers[name], send, n, args.clients)
                note(
                    f"round {r + 1} {kind}: this {row['this']['cpu_ms_per_request']:.2f} ms"
                    f" {row['this']['requests_per_s']:.0f}/s, against"
                    f" {row['against']['cpu_ms_per_request']:.2f} ms"
                    f" {row['against']['requests_per_s']:.0f}/s (load {loads:.1f})"
                )
                runs.append(row)
        result["runs"] = runs
        summary: dict[str, Any] = {}
        for kind in kinds:
            mine_rows = [x for x in runs if x["kind"] == kind]
            med = {
                name: {
                    key: round(statistics.median(x[name][key] for x in mine_rows), 2)
                    for key in ("cpu_ms_per_request", "requests_per_s")
                }
                for name in ("this", "against")
            }
            summary[kind] = {
                **med,
                "cpu_ratio_this_over_against": round(
                    statistics.median(
                        x["this"]["cpu_ms_per_request"] / x["against"]["cpu_ms_per_request"]
                        for x in mine_rows
                    ),
                    3,
                ),
                "rate_ratio_this_over_against": round(
                    statistics.median(
                        x["this"]["requests_per_s"] / x["against"]["requests_per_s"]
                        for x in mine_rows
                    ),
                    3,
                ),
            }
        result["summary"] = summary
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    result["loadavg_at_end"] = list(os.getloadavg())
    emit(result)


if __name__ == "__main__":
    main()
