"""CPU per letter for each kind of hostile letter (tests/crafted.py) at 10 KB, 100 KB and 1 MB,
scored by ``Scanner().scan`` (no counters, no DNS: what every letter pays); and, for a kind that
grows faster than linearly, where its time goes.

A letter is stopped after ``--budget`` CPU seconds (null in the JSON; the larger sizes of that
kind are then not tried). A kind is linear when each 10x in size costs at most 15x in CPU
(below 20 ms counts as 20 ms, as in tests/unit/antispam/test_linear.py). For the others, a
cProfile of the largest size that finished: the functions with the most own time, their
file:line and share; a C function (a regex method, str.lstrip ...) is shown with the Python
function that called it.

    python benchmarks/crafted_cpu.py            # 10 KB, 100 KB, 1 MB; 30 s per letter at most
    python benchmarks/crafted_cpu.py --quick    # 10 KB and 100 KB, 5 s: check the script works
    PYTHONPATH=/other/tree/src python benchmarks/crafted_cpu.py     # another tree: before/after
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import math
import pstats
import subprocess
import sys
from pathlib import Path
from typing import Any

from _common import emit, machine, note

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.crafted, tests.cputime

from tests import crafted
from tests.cputime import cpu

import pochta
from pochta.antispam.verdict import Scanner

GROWTH = 15.0
FLOOR = 0.02
MIN_CPU = 0.05  # s: a letter cheaper than this is timed several times in a row
ROOT = Path(pochta.__file__).resolve().parent.parent


def score(raw: bytes) -> None:
    Scanner().scan(raw)


def where(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if path == "~":
        return name.strip("<>")
    for base in (ROOT, Path(sys.prefix), Path(sys.base_prefix)):
        try:
            path = str(Path(path).resolve().relative_to(base))
            break
        except ValueError:
            continue
    return f"{path}:{line} {name}"


def _caller(stats: dict[Any, Any], callers: dict[Any, Any]) -> tuple[str, int, str]:
    """The caller that spent the most time in the call, past the ``re`` module's wrappers."""
    caller: tuple[str, int, str] = max(callers.items(), key=lambda item: item[1][2])[0]
    while caller[0].endswith(("re/__init__.py", "re2/__init__.py")) and stats[caller][4]:
        caller = max(stats[caller][4].items(), key=lambda item: item[1][2])[0]
    return caller


def profile(raw: bytes, top: int = 5) -> list[dict[str, Any]]:
    prof = cProfile.Profile()
    prof.runcall(score, raw)
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values()) or 1.0
    rows = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    out = []
    for func, (_, calls, own, cumulative, callers) in rows:
        row: dict[str, Any] = {
            "function": where(func),
            "share": round(own / total, 3),
            "own_s": round(own, 3),
            "calls": calls,
        }
        if func[0] == "~" and callers:  # a C function: who called it for most of the time
            row["called_by"] = where(_caller(stats, callers))
        del cumulative
        out.append(row)
    return out


def measure(kind: str, sizes: list[int], budget: float) -> dict[str, Any]:
    score(crafted.letter(kind, 1000))
    result: dict[str, Any] = {"bytes": {}, "cpu_ms": {}}
    times: list[float] = []
    for size in sizes:
        raw = crafted.letter(kind, size)
        result["bytes"][str(size)] = len(raw)
        t = min(cpu(lambda raw=raw: score(raw), budget) for _ in range(1 if size > 200_000 else 2))
        if t < MIN_CPU:  # the CPU clock is coarse: time a few in a row
            times_ = max(2, int(MIN_CPU / max(t, 1e-4)))
            t = cpu(lambda raw=raw, n=times_: [score(raw) for _ in range(n)], budget) / times_
        result["cpu_ms"][str(size)] = None if math.isinf(t) else round(t * 1000, 1)
        times.append(t)
        if math.isinf(t):
            break
    ratios = [b / max(a, FLOOR) for a, b in itertools.pairwise(times)]
    result["growth"] = [None if math.isinf(r) else round(r, 1) for r in ratios]
    result["linear"] = all(r <= GROWTH for r in ratios) and len(times) == len(sizes)
    if not result["linear"]:
        finished = [s for s, t in zip(sizes, times, strict=False) if not math.isinf(t)]
        at = finished[-1] if finished else sizes[0] // 10
        result["profile_at"] = at
        result["profile"] = profile(crafted.letter(kind, at))
    return result


def _tree() -> dict[str, str]:
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = ""
    return {"path": str(ROOT), "commit": head}


def main(args: argparse.Namespace) -> None:
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    budget = 5.0 if args.quick else args.budget
    kinds = args.kinds or list(crafted.KINDS)
    result: dict[str, Any] = {
        "benchmark": "crafted_cpu",
        "machine": machine(Path(".")),
        "tree": _tree(),
        "sizes": sizes,
        "budget_s": budget,
        "kinds": {},
    }
    for kind in kinds:
        result["kinds"][kind] = entry = measure(kind, sizes, budget)
        note(f"{kind:16} {entry['cpu_ms']} growth {entry['growth']}")
    result["not_linear"] = [k for k, v in result["kinds"].items() if not v["linear"]]
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="10 KB and 100 KB, 5 s budget")
    p.add_argument("--budget", type=float, default=30.0, help="CPU seconds per letter at most")
    p.add_argument("kinds", nargs="*", help="only these kinds (default: all)")
    return p.parse_args()


if __name__ == "__main__":
    main(_args())
