"""CPU per letter of a worker process's path, by stage, and its verdicts (issue 29, item 3).

What one ``serve`` worker does with a letter that arrives by SMTP (``mailbox.intake``'s
``prepare_in_pool`` with ``decide``): ``mailbox.prepare.prepare`` — the parse, the analysis
(phishing signs, features, the words' tokens, shingles), the split, the From address and its
sender-list candidates — then ``Scanner.judge``: the shingles' counters, the rules, the learned
words and the model. The letters are the unsealed ones of easy-ham-2, hard-ham-1 and spam-2
(what neither the model nor the counters learned from; sealed letters are never read). The
counters are warmed first with the unsealed letters of the training groups, easy-ham-1 and
spam-1, counted with their true labels, as a deployed pochta would have them.

    python benchmarks/scan_worker.py --quick             # 300 letters, one pass
    python benchmarks/scan_worker.py --passes 3          # every test letter, best of 3
    python benchmarks/scan_worker.py --save v.json       # and every letter's verdict
    python benchmarks/scan_worker.py --check v.json      # verdicts the same as those saved?
    python benchmarks/scan_worker.py --quick --profile p.prof   # cProfile of the loop

CPU is ``time.process_time``; the stages are the analysis's own laps (``Analysis.seconds``:
signs, auth, features, shingles, decision), the parse, and the rest of ``prepare`` (split,
From, candidates). ``--check`` compares each letter's label, probability (within 1e-9) and
rules' score with those saved, and exits 1 when any differs.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.antispam.model import booster
from pochta.mailbox.prepare import prepare
from pochta.mime import letter as letter_mod
from pochta_factory import corpus
from pochta_factory.training import corpus_samples, envelope_of, fresh_scanner, replay

TEST_GROUPS = ("easy-ham-2", "hard-ham-1", "spam-2")
TRAINING_GROUPS = ("easy-ham-1", "spam-1")
INLINE_LIMIT = 4096
TOLERANCE = 1e-9


def verdict_of(verdict: Any) -> dict[str, Any]:
    return {
        "label": verdict.label,
        "probability": verdict.probability,
        "score": round(verdict.score, 6),
    }


def differences(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    out = []
    for name, was in saved.items():
        got = now.get(name)
        if got is None:
            continue
        p0, p1 = was["probability"], got["probability"]
        same_p = (p0 is None) == (p1 is None) and (p0 is None or abs(p0 - p1) <= TOLERANCE)
        if was["label"] != got["label"] or not same_p or abs(was["score"] - got["score"]) > 1e-6:
            out.append(f"{name}: {was} -> {got}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="300 letters taken evenly")
    ap.add_argument("--passes", type=int, default=1, help="passes over the letters (best kept)")
    ap.add_argument("--save", type=Path, help="write every letter's verdict here")
    ap.add_argument("--check", type=Path, help="compare every letter's verdict with this file")
    ap.add_argument("--profile", type=Path, help="cProfile the last pass into this file")
    args = ap.parse_args()
    note("warming the counters with the unsealed training letters (true labels)")
    scanner = fresh_scanner(booster.load().for_workers())
    replay(corpus_samples(corpus.unsealed(TRAINING_GROUPS)), scanner, learn_truth=True)
    analyzer = scanner.analyzer
    letters = list(corpus.unsealed(TEST_GROUPS))
    if args.quick:
        letters = letters[:: max(1, len(letters) // 300)][:300]
    work = [(f"{m.group}/{m.name}", m.raw, envelope_of(m.raw)) for m in letters]
    for _, raw, env in work[:20]:  # warm: imports, caches
        prepare(raw, env, inline_limit=INLINE_LIMIT, analyzer=analyzer)
    best: dict[str, float] | None = None
    verdicts: dict[str, Any] = {}
    totals: list[float] = []
    for round_ in range(args.passes):
        profiler = cProfile.Profile() if args.profile and round_ == args.passes - 1 else None
        note(f"pass {round_ + 1}: {len(work)} letters")
        per: dict[str, float] = {}
        totals = []
        if profiler is not None:
            profiler.enable()
        for name, raw, env in work:
            t0 = time.process_time()
            letter = letter_mod.parse(raw, inline_limit=INLINE_LIMIT)
            t1 = time.process_time()
            prepared = prepare(raw, env, inline_limit=INLINE_LIMIT, analyzer=analyzer)
            t2 = time.process_time()
            assert prepared.analysis is not None
            analysis, verdict = scanner.judge(prepared.analysis, now=0.0)
            t3 = time.process_time()
            del letter
            seconds = analysis.seconds
            per["parse"] = per.get("parse", 0.0) + (t1 - t0)
            inside = sum(seconds.values()) - seconds.get("decision", 0.0)
            per["split, From, candidates"] = per.get("split, From, candidates", 0.0) + max(
                0.0, (t2 - t1) - (t1 - t0) - inside
            )
            for stage, s in seconds.items():
                per[stage] = per.get(stage, 0.0) + s
            totals.append(t3 - t1)  # prepare + judge: one parse, as a worker does
            verdicts[name] = verdict_of(verdict)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(args.profile))
        if best is None or sum(per.values()) < sum(best.values()):
            best = per
    assert best is not None
    n = len(work)
    result: dict[str, Any] = {
        "benchmark": "scan_worker",
        "machine": machine(Path.cwd()),
        "letters": n,
        "passes": args.passes,
        "cpu_ms_per_letter": {k: round(1000 * v / n, 3) for k, v in best.items()}
        | {"total": round(1000 * sum(best.values()) / n, 3)},
        "cpu_ms_median_last_pass": round(1000 * statistics.median(totals), 3),
        "labels": {
            k: sum(1 for v in verdicts.values() if v["label"] == k)
            for k in ("ham", "spam", "phishing")
        },
    }
    if args.save:
        args.save.write_text(json.dumps(verdicts, indent=0, sort_keys=True))
    failed = False
    if args.check:
        diff = differences(json.loads(args.check.read_text()), verdicts)
        result["verdicts_differing"] = len(diff)
        result["differences"] = diff[:20]
        failed = bool(diff)
    emit(result)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
