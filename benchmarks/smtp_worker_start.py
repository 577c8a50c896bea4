"""How long ``pochta serve`` takes from its spawn to the first letter answered, and what its
worker processes hold (issue 29, item 3: worker start-up).

A real ``python -m pochta serve`` with its defaults (verdicts on, IMAP on, log level info,
``antispam.pool_processes`` = one per core) on free loopback ports, a fresh data directory with one
mailbox. The clock starts at the spawn; ``listening`` is when its SMTP port accepts (the
application's startup, which starts the worker processes, is over), ``first_letter`` when one
letter's DATA is answered 250 (parsed, analyzed and decided by a worker, stored). Then the
resident memory of every process of the server's tree (VmRSS, and PSS, which shares the pages
a forked process still has in common with its parent) and the CPU the tree spent getting
there. ``--rounds`` servers one after another; medians.

    python benchmarks/smtp_worker_start.py            # 5 rounds
    python benchmarks/smtp_worker_start.py --rounds 3 --also /work/main/src   # beside main
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import smtplib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine
from anchors import tree_cpu_seconds
from smtp_delivery import add_user, serve

LETTER = (
    b"From: Feeder <feeder@example.net>\r\nTo: bench@example.org\r\nSubject: start-up\r\n"
    b"Date: Sat, 28 Nov 2026 12:00:00 +0000\r\nMessage-ID: <start@example.net>\r\n\r\n"
    b"One letter, to see how soon the server answers it. http://example.net/\r\n"
)

FIGURES = (
    *("listening_s", "first_letter_s", "tree_cpu_s"),
    *("worker_rss_mb", "worker_pss_mb", "tree_rss_mb", "tree_pss_mb"),
)


def _tree(root: int) -> list[tuple[int, int]]:
    """Every process under ``root`` (itself first), each with its parent."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    out, queue = [], [(root, 0)]
    while queue:
        pid, parent = queue.pop(0)
        out.append((pid, parent))
        queue.extend((child, pid) for child in children.get(pid, []))
    return out


def _memory(pid: int, forked: bool) -> dict[str, Any] | None:
    """What a process is (``forked``: a child of the fork server, a worker), its VmRSS and
    its PSS in MB."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        rss = next(
            int(line.split()[1])
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("VmRSS:")
        )
        pss = next(
            int(line.split()[1])
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
            if line.startswith("Pss:")
        )
    except (OSError, StopIteration):
        return None
    kind = "server"
    if forked:
        kind = "worker"
    elif "forkserver" in cmd:
        kind = "forkserver"
    elif "resource_tracker" in cmd:
        kind = "resource_tracker"
    return {
        "pid": pid,
        "kind": kind,
        "rss_mb": round(rss / 1024, 1),
        "pss_mb": round(pss / 1024, 1),
    }


def one_round(workdir: Path, n: int) -> dict[str, Any]:
    data = workdir / f"data-{n}"
    add_user(data)
    t0 = time.perf_counter()
    proc, port = serve(data, workdir / f"serve-{n}.log", True, defaults=True)
    listening = time.perf_counter() - t0
    try:
        with smtplib.SMTP("127.0.0.1", port, timeout=60) as smtp:
            smtp.sendmail("feeder@example.net", ["bench@example.org"], LETTER)
        first = time.perf_counter() - t0
        cpu = tree_cpu_seconds(proc.pid)
        time.sleep(0.5)  # the lesson handed to a worker is counted
        procs = []
        servers: set[int] = set()
        for pid, parent in _tree(proc.pid):
            got = _memory(pid, parent in servers)
            if got is not None:
                procs.append(got)
                if got["kind"] == "forkserver":
                    servers.add(pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    workers = [p for p in procs if p["kind"] == "worker"]
    return {
        "listening_s": round(listening, 3),
        "first_letter_s": round(first, 3),
        "tree_cpu_s": round(cpu, 2),
        "workers": len(workers),
        "worker_rss_mb": max((p["rss_mb"] for p in workers), default=None),
        "worker_pss_mb": max((p["pss_mb"] for p in workers), default=None),
        "tree_rss_mb": round(sum(p["rss_mb"] for p in procs), 1),
        "tree_pss_mb": round(sum(p["pss_mb"] for p in procs), 1),
        "processes": procs,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--also",
        default=None,
        help="another checkout's src directory to run in turn with this one (the anchor)",
    )
    args = p.parse_args()
    here = str(Path(__file__).resolve().parent.parent / "src")
    trees = {"this": here, **({"also": args.also} if args.also else {})}
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-start-"))
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    base = os.environ.get("PYTHONPATH", "")
    serial = itertools.count()
    for _ in range(args.rounds):
        for name, src in trees.items():  # in turns, so the load falls on both alike
            os.environ["PYTHONPATH"] = src + (os.pathsep + base if base else "")
            rounds[name].append(one_round(workdir, next(serial)))
            print(name, {k: v for k, v in rounds[name][-1].items() if k != "processes"},
                  file=sys.stderr)  # fmt: skip
    summary = {
        name: {
            key: statistics.median(r[key] for r in runs)
            for key in FIGURES
            if all(r[key] is not None for r in runs)
        }
        for name, runs in rounds.items()
    }
    emit(
        {
            "benchmark": "smtp_worker_start",
            "machine": machine(workdir),
            "trees": trees,
            "rounds": rounds,
            "median": summary,
        }
    )


if __name__ == "__main__":
    main()
