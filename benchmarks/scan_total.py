"""CPU per letter of a whole in-process scan, for comparing two trees of pochta (issue 15).

``Scanner(model=<shipped>).scan(raw, envelope)`` — parse, phishing signs, features, shingles,
rules and the model; no counters, no DNS — over the same corpus letters, timed with
``time.process_time`` after a warm-up. The script imports only what every tree since wave 1
has (``pochta.antispam.verdict.Scanner`` and the shipped model's ``load``), so it measures an
older checkout as well as this one:

    python benchmarks/scan_total.py                         # this tree, 1,000 letters
    PYTHONPATH=/path/to/old/src python benchmarks/scan_total.py --letters 1000
    python benchmarks/scan_total.py --quick                 # 100 letters

Prints the mean, the median and the 99th percentile of CPU ms per letter, and, for the
largest letter, its CPU.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import random
import statistics
import time
from pathlib import Path
from typing import Any

from _common import emit, machine
from pochta_factory import corpus


def _load_model() -> Any:
    for name in ("pochta.antispam.model.booster", "pochta.antispam.model"):
        try:
            return importlib.import_module(name).load()
        except (ImportError, AttributeError):
            continue
    raise SystemExit("no shipped model found in this tree")


def _envelope(letter: corpus.CorpusLetter) -> Any:
    for name in ("pochta.types", "pochta.antispam.shingles"):  # now, and before the rooms
        try:
            cls = importlib.import_module(name).Envelope
        except (ImportError, AttributeError):
            continue
        return cls(ip="192.0.2.7", sender="sender@example.com", recipients=("rcpt@example.org",))
    raise SystemExit("no Envelope found in this tree")


def main(args: argparse.Namespace) -> None:
    from pochta.antispam.verdict import Scanner

    # never a sealed letter (corpus.is_sealed: the file's SHA-256 begins with a byte below 52;
    # computed here too, for a tree older than corpus.unsealed)
    letters = [m for m in corpus.letters() if hashlib.sha256(m.raw).digest()[0] >= 52]
    rng = random.Random(args.seed)
    sample = rng.sample(letters, min(args.letters, len(letters)))
    scanner = Scanner(model=_load_model())
    for item in sample[:20]:  # warm: imports, caches, the model
        scanner.scan(item.raw, _envelope(item))
    times = []
    for item in sample:
        env = _envelope(item)
        t0 = time.process_time()
        scanner.scan(item.raw, env)
        times.append((time.process_time() - t0) * 1000)
    largest = max(range(len(sample)), key=lambda i: len(sample[i].raw))
    ordered = sorted(times)
    emit(
        {
            "benchmark": "scan_total",
            "machine": machine(Path(".")),
            "letters": len(sample),
            "seed": args.seed,
            "cpu_ms_per_letter": {
                "mean": round(statistics.fmean(times), 3),
                "median": round(statistics.median(times), 3),
                "p99": round(ordered[int(0.99 * (len(ordered) - 1))], 3),
            },
            "largest_letter": {
                "bytes": len(sample[largest].raw),
                "cpu_ms": round(times[largest], 2),
            },
        }
    )


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--letters", type=int, default=1000)
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--quick", action="store_true", help="100 letters")
    a = p.parse_args()
    if a.quick:
        a.letters = 100
    return a


if __name__ == "__main__":
    main(_args())
