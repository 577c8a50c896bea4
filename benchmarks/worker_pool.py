"""Process pools side by side: pochta's CpuPool, the stdlib's ProcessPoolExecutor and
pebble's ProcessPool (when installed: ``pip install pebble``), all with 2 workers started by
forkserver, in the same run.

1. round trip: one caller, a trivial task (``noop(1)``), sequential; median and p99.
2. throughput: a 5 KB ``bytes`` argument and a ~10 KB result (``double``), with 2 and 4
   concurrent callers, as asyncio tasks awaiting the pool (how the SMTP handler calls it)
   and as threads blocking on it; tasks per second.
3. a stubborn task: one that ignores SIGTERM (as C code that never returns to the
   interpreter does) with a 1 s deadline, while another caller runs trivial tasks back to
   back: when its caller hears of it, and the slowest trivial task meanwhile. The stdlib
   cannot stop one task, so it has no figure here.

    python benchmarks/worker_pool.py            # full run
    python benchmarks/worker_pool.py --quick    # a few seconds, checks the script works
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from _common import emit, machine, note, percentile
from pochta.cpupool import CpuPool

WORKERS = 2
ARG = bytes(range(256)) * 20  # 5,120 bytes


def noop(x: int) -> int:
    return x


def double(data: bytes) -> bytes:
    return data + data  # ~10 KB back


def stubborn(seconds: float) -> str:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "finished"


Submit = Callable[..., "Future[Any]"]


class Contestant:
    """A pool behind one shape: ``submit(fn, *args, deadline=None) -> Future``."""

    def __init__(self, name: str) -> None:
        self.name = name
        ctx = multiprocessing.get_context("forkserver")
        if name == "pochta":
            pool = CpuPool(WORKERS)
            pool.start()
            self.submit: Submit = lambda fn, *a, deadline=None: pool._submit(fn, a, deadline)
            self.close: Callable[[], None] = pool.close
        elif name == "stdlib":
            ppe = ProcessPoolExecutor(WORKERS, mp_context=ctx)
            self.submit = lambda fn, *a, deadline=None: ppe.submit(fn, *a)
            self.close = ppe.shutdown
        else:
            import pebble

            pp = pebble.ProcessPool(WORKERS, context=ctx)
            self.submit = lambda fn, *a, deadline=None: pp.schedule(fn, a, timeout=deadline)
            self.close = lambda: (pp.close(), pp.join())
        for f in [self.submit(noop, i) for i in range(4 * WORKERS)]:  # workers up and warm
            f.result()


def round_trip(c: Contestant, n: int) -> dict[str, float]:
    times = []
    for i in range(n):
        t = time.perf_counter()
        c.submit(noop, i).result()
        times.append(time.perf_counter() - t)
    times.sort()
    return {
        "median_us": round(statistics.median(times) * 1e6),
        "p99_us": round(percentile(times, 0.99) * 1e6),
    }


def throughput_async(c: Contestant, callers: int, n: int) -> float:
    async def caller() -> None:
        for _ in range(n // callers):
            out = await asyncio.wrap_future(c.submit(double, ARG))
            assert len(out) == 2 * len(ARG)

    async def main() -> float:
        t = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(callers)))
        return time.perf_counter() - t

    return round(n / asyncio.run(main()))


def throughput_threads(c: Contestant, callers: int, n: int) -> float:
    def caller() -> None:
        for _ in range(n // callers):
            assert len(c.submit(double, ARG).result()) == 2 * len(ARG)

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return round(n / (time.perf_counter() - t))


def stubborn_task(c: Contestant) -> dict[str, float | str]:
    t = time.perf_counter()
    slow = c.submit(stubborn, 10.0, deadline=1.0)
    worst = 0.0
    while not slow.done():
        s = time.perf_counter()
        c.submit(noop, 1).result()
        worst = max(worst, time.perf_counter() - s)
        time.sleep(0.01)
    told = time.perf_counter() - t
    outcome = type(slow.exception()).__name__
    return {"error": outcome, "told_after_s": round(told, 2), "worst_other_ms": round(worst * 1e3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds: checks the script")
    parser.add_argument("--rounds", type=int, default=3, help="turns per contestant")
    args = parser.parse_args()
    where = machine(Path(__file__).parent)  # the load before the run
    n_rt, n_tp, rounds = (200, 200, 1) if args.quick else (3000, 4000, args.rounds)
    names = ["pochta", "stdlib"]
    try:
        import pebble

        names.append("pebble")
        versions = {"pebble": pebble.__version__}
    except ImportError:
        versions = {}
        note("pebble is not installed: measured without it")
    figures: dict[str, dict[str, list[Any]]] = {n: {} for n in names}
    for r in range(rounds):  # in turns, so a noisy machine slows all of them alike
        for name in names:
            note(f"round {r + 1}/{rounds}: {name}")
            c = Contestant(name)
            try:
                got: dict[str, Any] = {"round_trip": round_trip(c, n_rt)}
                for callers in (2, 4):
                    got[f"async_{callers}_per_s"] = throughput_async(c, callers, n_tp)
                    got[f"threads_{callers}_per_s"] = throughput_threads(c, callers, n_tp)
            finally:
                c.close()
            for key, value in got.items():
                figures[name].setdefault(key, []).append(value)
    summary: dict[str, dict[str, Any]] = {}
    for name, by_key in figures.items():
        summary[name] = {
            "round_trip_median_us": statistics.median(v["median_us"] for v in by_key["round_trip"]),
            "round_trip_p99_us": statistics.median(v["p99_us"] for v in by_key["round_trip"]),
            **{k: statistics.median(v) for k, v in by_key.items() if k != "round_trip"},
        }
    for name in names:
        if name == "stdlib":
            continue
        note(f"stubborn task: {name}")
        c = Contestant(name)
        try:
            summary[name]["stubborn"] = stubborn_task(c)
        finally:
            c.close()
    emit(
        {
            "benchmark": "worker_pool",
            "machine": where,
            "workers": WORKERS,
            "start_method": "forkserver",
            "versions": versions,
            "tasks": {"round_trip": n_rt, "throughput": n_tp, "rounds": rounds},
            "results": summary,
        }
    )


if __name__ == "__main__":
    sys.exit(main())
