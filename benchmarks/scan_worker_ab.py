"""A/B of :mod:`scan_worker` (CPU per letter of a worker's path, by stage): this checkout's
code and another's (``--other``, the ``src`` directory of another checkout, e.g. a
``git archive`` of main), run alternately in the same session, each round in a fresh process.

    python benchmarks/scan_worker_ab.py --other /tmp/main/src --rounds 3 --quick
    python benchmarks/scan_worker_ab.py --other /tmp/main/src --rounds 2 --check v.json

The shared machine's load moves during a run: compare the ratios of one round, not figures
of different runs. Each round runs ``scan_worker.py`` (with ``--check`` when given: every
verdict the same as saved) for B (``--other``) then A (this checkout), or A then B on odd
rounds. Prints the per-stage medians of each side and the ratios A / B (median of the rounds'
ratios for the total), and the load at the start and the end of every round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from _common import emit, machine, note

HERE = Path(__file__).resolve().parent
OWN_SRC = HERE.parent / "src"


def one(src: Path, extra: list[str]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{HERE}")
    out = subprocess.run(
        [sys.executable, str(HERE / "scan_worker.py"), *extra],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        tail = out.stdout[-2000:] + out.stderr[-2000:]
        raise SystemExit(f"scan_worker.py with {src} failed:\n{tail}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--other", type=Path, required=True, help="the src directory of B")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="300 letters (scan_worker --quick)")
    ap.add_argument("--passes", type=int, default=1, help="scan_worker's passes (best kept)")
    ap.add_argument("--check", type=Path, help="every verdict of both sides as saved here")
    args = ap.parse_args()
    extra = ["--passes", str(args.passes)] + (["--quick"] if args.quick else [])
    if args.check:
        extra += ["--check", str(args.check.resolve())]
    sides: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    loads = []
    for round_ in range(args.rounds):
        order = ("B", "A") if round_ % 2 == 0 else ("A", "B")
        start = os.getloadavg()[0]
        for side in order:
            note(f"round {round_ + 1}: {side}")
            sides[side].append(one(OWN_SRC if side == "A" else args.other.resolve(), extra))
        loads.append([round(start, 2), round(os.getloadavg()[0], 2)])
    stages = list(sides["A"][0]["cpu_ms_per_letter"])
    per: dict[str, dict[str, float]] = {}
    for stage in stages:
        a = statistics.median(r["cpu_ms_per_letter"][stage] for r in sides["A"])
        b = statistics.median(r["cpu_ms_per_letter"][stage] for r in sides["B"])
        per[stage] = {"A": round(a, 3), "B": round(b, 3), "A/B": round(a / b, 3) if b else 0.0}
    ratios = [
        a["cpu_ms_per_letter"]["total"] / b["cpu_ms_per_letter"]["total"]
        for a, b in zip(sides["A"], sides["B"], strict=True)
    ]
    emit(
        {
            "benchmark": "scan_worker_ab",
            "machine": machine(Path.cwd()),
            "A": str(OWN_SRC),
            "B": str(args.other),
            "letters": sides["A"][0]["letters"],
            "rounds": args.rounds,
            "cpu_ms_per_letter_median": per,
            "total_ratio_per_round": [round(r, 3) for r in ratios],
            "total_ratio_median": round(statistics.median(ratios), 3),
            "median_letter_ms": {
                side: [r["cpu_ms_median_last_pass"] for r in rs] for side, rs in sides.items()
            },
            "labels": {side: rs[0]["labels"] for side, rs in sides.items()},
            "verdicts_differing": {
                side: [r.get("verdicts_differing") for r in rs] for side, rs in sides.items()
            },
            "loadavg_per_round": loads,
        }
    )


if __name__ == "__main__":
    main()
