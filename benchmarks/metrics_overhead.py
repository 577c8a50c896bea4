"""What pochta's metrics cost one SMTP letter, in-process and in prometheus-client's
multiprocess mode (issue 20), and what a scrape costs as processes add up.

Per letter, the server records: the DATA reply (``metrics.delivery``), the verdict and its
time (``metrics.verdict``), the stored letters and bytes (``metrics.stored``), and one blob
operation per attachment reference (the ``blob_op`` wrapper: a counter and a histogram). The
script runs exactly those calls for a letter with one attachment to one recipient, N times, in
a fresh process per mode (the mode is fixed when prometheus-client is first imported), and
reports microseconds per letter; "none" runs the same loop with the calls stubbed (the loop's
own cost, subtracted). ``scrape_ms`` is one ``/metrics`` exposition with P processes' files in
the directory (multiprocess mode reads and merges every file at each scrape).

    python benchmarks/metrics_overhead.py [--letters 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import emit, machine

CHILD = r"""
import json, os, sys, time
from pochta import metrics
mode, n = sys.argv[1], int(sys.argv[2])

@metrics.blob_op("store")
def store():
    return None

def letter():
    metrics.delivery("smtp", "250 2.0.0 OK queued as 0123456789ab")
    metrics.verdict("ham", False, 0.017)
    metrics.stored(1, 42_000, 31_000, 1, 1, 0)
    store()

def stub():
    pass

fn = stub if mode == "none" else letter
fn()
best = float("inf")
for _ in range(5):
    t = time.perf_counter()
    for _ in range(n):
        fn()
    best = min(best, (time.perf_counter() - t) / n)
out = {"us_per_letter": best * 1e6}
if mode == "multiprocess":
    # P-1 more processes' files beside ours, then one exposition
    import shutil, glob
    d = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    mine = glob.glob(os.path.join(d, "*_%d.db" % os.getpid()))
    scrapes = {}
    for procs in (1, 8, 64):
        for p in range(len(glob.glob(os.path.join(d, "counter_*.db"))), procs):
            for f in mine:
                shutil.copy(f, f.replace("_%d.db" % os.getpid(), "_%d.db" % (10_000_000 + p)))
        t = time.perf_counter()
        text, _ = metrics.exposition()
        scrapes[procs] = round((time.perf_counter() - t) * 1000, 2)
    out["scrape_ms_by_processes"] = scrapes
else:
    t = time.perf_counter()
    metrics.exposition()
    out["scrape_ms"] = round((time.perf_counter() - t) * 1000, 2)
print(json.dumps(out))
"""


def run(mode: str, letters: int) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    with tempfile.TemporaryDirectory() as tmp:
        if mode == "multiprocess":
            env["PROMETHEUS_MULTIPROC_DIR"] = tmp
        done = subprocess.run(
            [sys.executable, "-c", CHILD, mode, str(letters)],
            capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--letters", type=int, default=20_000)
    args = parser.parse_args()
    none = run("none", args.letters)
    single = run("single", args.letters)
    multi = run("multiprocess", args.letters)
    base = float(str(none["us_per_letter"]))
    emit(
        {
            "benchmark": "metrics_overhead",
            "letters": args.letters,
            "in_process_us_per_letter": round(float(str(single["us_per_letter"])) - base, 2),
            "multiprocess_us_per_letter": round(float(str(multi["us_per_letter"])) - base, 2),
            "scrape_ms_in_process": single["scrape_ms"],
            "scrape_ms_multiprocess_by_processes": multi["scrape_ms_by_processes"],
            "machine": machine(Path(tempfile.gettempdir())),
        }
    )


if __name__ == "__main__":
    main()
