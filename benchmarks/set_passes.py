"""The phrase families' RE2 set in a worker's path: its ``Match`` CPU a letter, by the check
that asked for the pass (issue 29, item 3).

A worker as :mod:`scan_worker` warms it (the counters fed with the unsealed training letters,
which also leaves the set's automaton holding the states those letters reached), then one pass
over the unsealed test letters (easy-ham-2, hard-ham-1, spam-2; ``--quick``: 300), each new to
the set: ``prepare`` and ``judge``, with every ``Match`` of the set timed (process CPU) and
counted under the check (``pochta.antispam.signs.checks``) on the stack, its bytes summed.
Sealed letters are never read.

    python benchmarks/set_passes.py [--quick]

Prints the worker's CPU ms a letter, the set's CPU µs a letter, its passes and bytes a letter,
and per check: passes a letter, µs a letter, bytes a pass, ns a byte. The CPU of the checks'
own prefilters (``_Regexp.search``) and of Python's engine is not in it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.antispam.model import booster
from pochta.antispam.signs import wording
from pochta.mailbox.prepare import prepare
from pochta_factory import corpus
from pochta_factory.training import corpus_samples, envelope_of, fresh_scanner, replay

TEST_GROUPS = ("easy-ham-2", "hard-ham-1", "spam-2")
TRAINING_GROUPS = ("easy-ham-1", "spam-1")
INLINE_LIMIT = 4096
CHECKS_FILE = str(Path(wording.__file__).with_name("checks.py"))


def _asker() -> str:
    """The check on the stack that asked for the pass (the innermost function of checks.py)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == CHECKS_FILE:
            return frame.f_code.co_name
        frame = frame.f_back  # type: ignore[assignment]
    return "(elsewhere)"


class TimedSet:
    """The set, each ``Match`` timed and counted under the check that asked for it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.by: dict[str, list[float]] = {}  # check: [passes, CPU seconds, bytes]

    def Match(self, data: bytes) -> Any:  # RE2's name
        t0 = time.process_time()
        found = self.inner.Match(data)
        spent = time.process_time() - t0
        row = self.by.setdefault(_asker(), [0, 0.0, 0])
        row[0] += 1
        row[1] += spent
        row[2] += len(data)
        return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="300 letters taken evenly")
    args = ap.parse_args()
    note("warming the counters with the unsealed training letters (true labels)")
    scanner = fresh_scanner(booster.load().for_workers())
    replay(corpus_samples(corpus.unsealed(TRAINING_GROUPS)), scanner, learn_truth=True)
    letters = list(corpus.unsealed(TEST_GROUPS))
    if args.quick:
        letters = letters[:: max(1, len(letters) // 300)][:300]
    work = [(m.raw, envelope_of(m.raw)) for m in letters]
    timed = TimedSet(wording._prefilter_set())
    wording._SET[0] = timed
    note(f"{len(work)} letters, each new to the set")
    t0 = time.process_time()
    for raw, env in work:
        prepared = prepare(raw, env, inline_limit=INLINE_LIMIT, analyzer=scanner.analyzer)
        assert prepared.analysis is not None
        scanner.judge(prepared.analysis, now=0.0)
    total = time.process_time() - t0
    n = len(work)
    rows = sorted(timed.by.items(), key=lambda kv: -kv[1][1])
    emit(
        {
            "benchmark": "set_passes",
            "machine": machine(Path.cwd()),
            "letters": n,
            "worker_cpu_ms_per_letter": round(1000 * total / n, 3),
            "set_cpu_us_per_letter": round(1e6 * sum(r[1] for _, r in rows) / n, 1),
            "set_passes_per_letter": round(sum(r[0] for _, r in rows) / n, 2),
            "set_bytes_per_letter": round(sum(r[2] for _, r in rows) / n),
            "by_check": {
                name: {
                    "passes_per_letter": round(passes / n, 2),
                    "cpu_us_per_letter": round(1e6 * spent / n, 1),
                    "bytes_per_pass": round(size / passes),
                    "ns_per_byte": round(1e9 * spent / size, 1) if size else 0.0,
                }
                for name, (passes, spent, size) in rows
            },
        }
    )


if __name__ == "__main__":
    main()
