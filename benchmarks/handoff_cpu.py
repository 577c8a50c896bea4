"""The event loop's CPU for one call handed to a thread pool (issue 29, item 1).

``run_in`` through a ``ThreadPoolExecutor`` (``loop.run_in_executor``: a concurrent future
chained to an asyncio one) against ``pochta.executors.HandOff`` (a queue's put, one
``call_soon_threadsafe`` back), both with the caller's context copied. ``--callers``
coroutines (4: the upload benchmark's clients) each await ``--calls`` calls of a function that
sleeps ``--work-us`` (a thread's wait, as the store's sync); the loop thread's CPU
(``time.thread_time``) a call, in alternating rounds, uvloop as ``pochta serve`` runs.

    python benchmarks/handoff_cpu.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

import uvloop

from _common import emit, machine
from pochta.executors import UPLOAD_THREADS, HandOff, run_in


async def _drive(pool: Executor, callers: int, calls: int, work: float) -> float:
    def job() -> None:
        time.sleep(work)

    async def one() -> None:
        for _ in range(calls):
            await run_in(pool, job)

    start = time.thread_time()
    await asyncio.gather(*(one() for _ in range(callers)))
    return (time.thread_time() - start) / (callers * calls) * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--callers", type=int, default=4)
    p.add_argument("--calls", type=int, default=3000, help="calls per caller and round")
    p.add_argument("--work-us", type=float, default=200.0)
    args = p.parse_args()
    pools: dict[str, Executor] = {
        "thread_pool_executor": ThreadPoolExecutor(UPLOAD_THREADS),
        "handoff": HandOff(UPLOAD_THREADS),
    }
    us: dict[str, list[float]] = {name: [] for name in pools}
    for r in range(args.rounds):
        names = list(pools) if r % 2 == 0 else list(pools)[::-1]
        for name in names:
            drive = _drive(pools[name], args.callers, args.calls, args.work_us / 1e6)
            us[name].append(uvloop.run(drive))
    for pool in pools.values():
        pool.shutdown()
    medians = {name: round(statistics.median(v), 1) for name, v in us.items()}
    emit(
        {
            "figure": "handoff_cpu",
            "command": " ".join(["python", *sys.argv]),
            "machine": machine(Path(".")),
            "params": vars(args),
            "loop_cpu_us_per_call": {name: [round(x, 1) for x in v] for name, v in us.items()},
            "median_us": medians,
            "handoff_over_thread_pool": round(
                medians["handoff"] / medians["thread_pool_executor"], 2
            ),
        }
    )


if __name__ == "__main__":
    main()
