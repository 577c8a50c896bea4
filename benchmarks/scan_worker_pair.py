"""A/B of a worker's CPU per letter (:mod:`scan_worker`'s path: parse, prepare, judge), the two
sides interleaved finely: two processes, this checkout's ``src`` (A) and another's
(``--other``, B), each warmed as ``scan_worker.py`` warms (the counters fed with the unsealed
training letters), then handed the same chunks of letters in turn (A then B, B then A on the
next chunk), so that both meet the same load within a second or so of each other. On a shared,
noisy machine the ratio of such pairs holds where runs minutes apart (``scan_worker_ab.py``)
move by ±10 %.

    python benchmarks/scan_worker_pair.py --other /tmp/main/src [--passes 3] [--chunk 40]
        [--store sqlite] [--late]

``--store sqlite``: the counters in a SQLite file (a deployed worker's default store) instead of
in memory; ``--late``: the letters judged half an hour after the last training letter, so that
the counters' windows reach counts (by default at time 0, where every count reads 0).

The letters are the unsealed ones of easy-ham-2, hard-ham-1 and spam-2 (``--quick``: 300);
sealed letters are never read. Prints, per side, the CPU ms per letter of each pass (the whole
path and its stages), the ratio A / B of each pass, and the median of the chunks' ratios;
every side's verdicts are compared with the other's (they must be the same).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note

HERE = Path(__file__).resolve().parent
OWN_SRC = HERE.parent / "src"
TEST_GROUPS = ("easy-ham-2", "hard-ham-1", "spam-2")
TRAINING_GROUPS = ("easy-ham-1", "spam-1")
INLINE_LIMIT = 4096


def serve(quick: bool, store: str, late: bool) -> None:
    """The child: warm, then answer ``[start, end]`` lines with the chunk's CPU and verdicts."""
    import tempfile

    from pochta.antispam.model import booster
    from pochta.antispam.shingles.counters.service import Counters
    from pochta.antispam.shingles.counters.sqlite import SQLiteStore
    from pochta.antispam.verdict import Scanner
    from pochta.mailbox.prepare import prepare
    from pochta_factory import corpus
    from pochta_factory.training import corpus_samples, envelope_of, fresh_scanner, replay

    model = booster.load().for_workers()
    if store == "sqlite":  # what a deployed worker reads (deciding.shingler's default store)
        kept = tempfile.TemporaryDirectory(prefix="scan-worker-pair-")  # gone at exit
        where = Path(kept.name) / "shingles.sqlite3"
        scanner = Scanner(model=model, counters=Counters(SQLiteStore(where), buffered=False))
    else:
        scanner = fresh_scanner(model)
    samples = corpus_samples(corpus.unsealed(TRAINING_GROUPS))
    replay(samples, scanner, learn_truth=True)
    # the letters are judged at 0.0 (no window reaches a count), or half an hour after the
    # last training letter (its counts in every window)
    now = max(s.at for s in samples) + 1800.0 if late else 0.0
    letters = list(corpus.unsealed(TEST_GROUPS))
    if quick:
        letters = letters[:: max(1, len(letters) // 300)][:300]
    work = [(f"{m.group}/{m.name}", m.raw, envelope_of(m.raw)) for m in letters]
    for _, raw, env in work[:20]:
        prepare(raw, env, inline_limit=INLINE_LIMIT, analyzer=scanner.analyzer)
    print(json.dumps({"letters": len(work)}), flush=True)
    for line in sys.stdin:
        start, end = json.loads(line)
        stages: dict[str, float] = {}
        verdicts = []
        t0 = time.process_time()
        for name, raw, env in work[start:end]:
            prepared = prepare(raw, env, inline_limit=INLINE_LIMIT, analyzer=scanner.analyzer)
            assert prepared.analysis is not None
            analysis, verdict = scanner.judge(prepared.analysis, now=now)
            for stage, s in analysis.seconds.items():
                stages[stage] = stages.get(stage, 0.0) + s
            verdicts.append([name, verdict.label, verdict.probability, round(verdict.score, 6)])
        cpu = time.process_time() - t0
        print(json.dumps({"cpu": cpu, "stages": stages, "verdicts": verdicts}), flush=True)


def start(src: Path, quick: bool, store: str, late: bool) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{HERE}")
    args = [sys.executable, str(Path(__file__).resolve()), "--serve", "--store", store]
    args += ["--quick"] if quick else []
    args += ["--late"] if late else []
    return subprocess.Popen(
        args, cwd=HERE, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def ask(proc: subprocess.Popen[str], request: Any) -> dict[str, Any]:
    assert proc.stdin is not None
    assert proc.stdout is not None
    if request is not None:
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("a side stopped")
    answer: dict[str, Any] = json.loads(line)
    return answer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--other", type=Path, help="the src directory of B")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=40, help="letters per turn")
    ap.add_argument("--quick", action="store_true", help="300 letters taken evenly")
    ap.add_argument(
        "--store", choices=("memory", "sqlite"), default="memory", help="the counters' store"
    )
    ap.add_argument(
        "--late", action="store_true", help="judge after the training letters (counts read)"
    )
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.quick, args.store, args.late)
        return
    if args.other is None:
        ap.error("--other is required")
    note("warming both sides (the counters: the unsealed training letters)")
    sides = {
        side: start(src, args.quick, args.store, args.late)
        for side, src in (("A", OWN_SRC), ("B", args.other.resolve()))
    }
    n = {side: ask(proc, None)["letters"] for side, proc in sides.items()}["A"]
    load_start = os.getloadavg()[0]
    passes: list[dict[str, Any]] = []
    chunk_ratios: list[float] = []
    differing = 0
    for p in range(args.passes):
        note(f"pass {p + 1}: {n} letters in turns of {args.chunk}")
        cpu = {"A": 0.0, "B": 0.0}
        stages: dict[str, dict[str, float]] = {"A": {}, "B": {}}
        for i, begin in enumerate(range(0, n, args.chunk)):
            end = min(n, begin + args.chunk)
            order = ("A", "B") if (i + p) % 2 == 0 else ("B", "A")
            got = {side: ask(sides[side], [begin, end]) for side in order}
            for side in order:
                cpu[side] += got[side]["cpu"]
                for stage, s in got[side]["stages"].items():
                    stages[side][stage] = stages[side].get(stage, 0.0) + s
            if got["B"]["cpu"] > 0:
                chunk_ratios.append(got["A"]["cpu"] / got["B"]["cpu"])
            for va, vb in zip(got["A"]["verdicts"], got["B"]["verdicts"], strict=True):
                same_p = (va[2] is None) == (vb[2] is None) and (
                    va[2] is None or abs(va[2] - vb[2]) <= 1e-9
                )
                if va[0] != vb[0] or va[1] != vb[1] or not same_p or va[3] != vb[3]:
                    differing += 1
        passes.append(
            {
                "cpu_ms_per_letter": {s: round(1000 * cpu[s] / n, 3) for s in ("A", "B")},
                "A/B": round(cpu["A"] / cpu["B"], 3),
                "stages_ms_per_letter": {
                    stage: {s: round(1000 * stages[s].get(stage, 0.0) / n, 3) for s in ("A", "B")}
                    for stage in stages["B"]
                },
                "load": round(os.getloadavg()[0], 2),
            }
        )
    for proc in sides.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    emit(
        {
            "benchmark": "scan_worker_pair",
            "machine": machine(Path.cwd()),
            "A": str(OWN_SRC),
            "B": str(args.other.resolve()),
            "letters": n,
            "chunk": args.chunk,
            "store": args.store,
            "late": args.late,
            "load_at_start": round(load_start, 2),
            "passes": passes,
            "A/B_per_pass": [p["A/B"] for p in passes],
            "A/B_chunks_median": round(statistics.median(chunk_ratios), 3),
            "verdicts_differing": differing,
        }
    )


if __name__ == "__main__":
    main()
