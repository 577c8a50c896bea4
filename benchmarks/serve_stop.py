"""How long ``pochta serve`` takes to stop on SIGTERM soon after it became healthy, as the tests
stop the servers they start (one request, then SIGTERM): the background jobs are then just
taking their locks and writing their fencing tokens. Two pochta trees A and B (``--a``,
``--b``: e.g. ``git archive main src`` unpacked, and this worktree's ``src``), rounds
alternating between them; each stop timed from SIGTERM to the exit, and the server's log
searched for "did not stop in" (a job that waited out its stop timeout). Prints JSON with
the load average (the machine is shared).

    python benchmarks/serve_stop.py --a /tmp/main/src --b src --rounds 8
    python benchmarks/serve_stop.py --a /tmp/main/src --b src --after 0.05
    python benchmarks/serve_stop.py --a src --b src --quick
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ServeProcess, emit, machine, note

TOKEN = "benchmark-service-token-0123456789"
ENV = {
    "POCHTA_SERVICE_TOKEN": TOKEN,
    "POCHTA_SMTP__ENABLED": "false",
    "POCHTA_IMAP__ENABLED": "false",
    "POCHTA_ANTISPAM__POOL_PROCESSES": "0",  # no worker processes: the stop of the jobs alone
}


def one(src: Path, after: float) -> tuple[float, int]:
    """Start, wait ``after`` seconds past healthy, SIGTERM: seconds to the exit, and how many
    "did not stop in" lines the log has."""
    with tempfile.TemporaryDirectory(prefix="serve-stop-") as tmp:
        log = Path(tmp) / "serve.log"
        server = ServeProcess(Path(tmp) / "data", log, ENV, src=src)
        time.sleep(after)
        began = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=120)
        seconds = time.monotonic() - began
        return seconds, log.read_text(errors="replace").count("did not stop in")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", type=Path, required=True, help="tree A's src directory")
    p.add_argument("--b", type=Path, required=True, help="tree B's src directory")
    p.add_argument("--rounds", type=int, default=8, help="stops of each tree (default 8)")
    p.add_argument("--after", type=float, default=0.0, help="seconds between healthy and SIGTERM")
    p.add_argument("--quick", action="store_true", help="one round of each (the script works)")
    args = p.parse_args()
    if args.quick:
        args.rounds = 1
    trees = {"a": args.a.resolve(), "b": args.b.resolve()}
    seen: dict[str, list[tuple[float, int]]] = {"a": [], "b": []}
    loads = [os.getloadavg()[0]]
    for i in range(args.rounds):
        for name in ("a", "b") if i % 2 == 0 else ("b", "a"):
            seen[name].append(one(trees[name], args.after))
            loads.append(os.getloadavg()[0])
            note(f"round {i + 1} {name}: {seen[name][-1][0]:.2f} s, load {loads[-1]:.2f}")
    out: dict[str, Any] = {"machine": machine(Path(tempfile.gettempdir()))}
    for name, runs in seen.items():
        out[name] = {
            "tree": str(trees[name]),
            "median_seconds_to_exit": round(statistics.median(t for t, _ in runs), 2),
            "max_seconds_to_exit": round(max(t for t, _ in runs), 2),
            "all": [round(t, 2) for t, _ in runs],
            "stops_over_5_s": sum(t > 5 for t, _ in runs),
            "did_not_stop_lines": sum(n for _, n in runs),
        }
    out["after_healthy_seconds"] = args.after
    out["load_average_1min"] = {"min": min(loads), "max": max(loads)}
    emit(out)


if __name__ == "__main__":
    main()
