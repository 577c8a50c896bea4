"""Dedup savings on a fan-out workload (issue 3, figure 2).

Each corpus letter is delivered (in-process, through ``Mailbox.deliver``: the same path SMTP
takes after DATA) to a Zipf-distributed number of recipients in 1..1000 (s = 1.3, seeded),
drawn from 1,000 mailboxes. Reported side by side:

- logical bytes: what the recipients received (letter size x recipients);
- pochta: the skeletons (one per delivery) + each distinct attachment once, and the physical
  bytes with both disks of the pair counted, plus the databases (one index row per
  recipient's letter and per attachment reference);
- whole copies: every recipient's letter stored whole (as a mailbox without dedup keeps it),
  and that x2 for the same two-disk redundancy.

    python benchmarks/dedup_fanout.py            # the whole corpus
    python benchmarks/dedup_fanout.py --quick    # 200 letters
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.app import build
from pochta.config import load_settings
from pochta_factory import corpus

MAILBOXES = 1000
ZIPF_S = 1.3


def zipf_weights(n: int, s: float) -> list[float]:
    return [1 / k**s for k in range(1, n + 1)]


def main() -> None:
    args = _args()
    letters = [m.raw for m in corpus.unsealed()]
    if args.quick:
        letters = letters[:200]
    rng = random.Random(20261123)
    counts = rng.choices(range(1, 1001), weights=zipf_weights(1000, ZIPF_S), k=len(letters))
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-fanout-", dir=args.dir))
    pochta = build(load_settings(data_dir=workdir / "data", smtp={"enabled": False}))
    try:
        users = [pochta.mailbox.index.add_user(f"u{i}@example.org", "x") for i in range(MAILBOXES)]
        logical = 0
        t0 = time.perf_counter()
        for i, (raw, n) in enumerate(zip(letters, counts, strict=True)):
            rcpts = rng.sample(users, n)
            pochta.mailbox.deliver(raw, rcpts)
            logical += len(raw) * n
            if i % 500 == 0:
                note(f"{i}/{len(letters)}")
        elapsed = time.perf_counter() - t0
        s = pochta.mailbox.stats()
        data = workdir / "data"
        databases = sum(p.stat().st_size for p in data.glob("*.sqlite3*"))
        copies = sum(counts)
        result: dict[str, Any] = {
            "benchmark": "dedup_fanout",
            "machine": machine(workdir),
            "letters": len(letters),
            "zipf_s": ZIPF_S,
            "letter_copies": copies,
            "mean_recipients": round(copies / len(letters), 2),
            "max_recipients": max(counts),
            "logical_bytes": logical,
            "pochta_stored_bytes": s["skeleton_bytes"] + s["blob_bytes"],
            "pochta_physical_bytes": s["physical_bytes"],
            "database_bytes": databases,
            "pochta_physical_with_databases": s["physical_bytes"] + databases,
            "whole_copies_bytes": logical,
            "whole_copies_physical_bytes": 2 * logical,
            "savings_vs_whole_copies_percent": round(
                100 * (1 - (s["physical_bytes"] + databases) / (2 * logical)), 2
            ),
            "dedup_ratio": round(s["dedup_ratio"], 2),
            "seconds": round(elapsed, 1),
            "letter_copies_per_s": round(copies / elapsed, 1),
        }
        emit(result)
    finally:
        pochta.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="200 letters: check the script works")
    p.add_argument("--dir", default=None, help="where the data directory goes (default: /tmp)")
    return p.parse_args()


if __name__ == "__main__":
    main()
