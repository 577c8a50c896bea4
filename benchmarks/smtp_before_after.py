"""SMTP delivery with verdicts, two source trees in alternating rounds (issue 29, item 3).

The machine is shared and noisy: a change is measured against the tree before it side by side,
run after run in turns (the first tree first in even rounds, second in odd ones), each run a
fresh ``pochta serve`` of that tree (``PYTHONPATH=<tree>/src``, the same virtualenv) fed by
:func:`smtp_delivery.smtp_run` (the same letters, client and figures as
``smtp_delivery.py``). Reported per tree: medians over the rounds of letters/s, CPU ms per
letter of the server and its workers, and of the server process alone; and the median of the
per-round ratios of letters/s (second / first).

    python benchmarks/smtp_before_after.py /tmp/before/src src --rounds 3 --letters 300
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta_factory import corpus
from smtp_delivery import smtp_run, wire


def with_attachments(n: int, k: int, size: int, seed: int = 29) -> list[bytes]:
    """``n`` letters, each a few lines of text and ``k`` attachments of ``size`` random bytes."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        m = EmailMessage()
        m["From"] = "sender@example.net"
        m["To"] = "user@example.org"
        m["Subject"] = f"the files, part {i}"
        m["Message-ID"] = f"<{i}.{rng.getrandbits(64):x}@example.net>"
        m.set_content("Hello,\n\nhere are the files we spoke about.\n\nBest,\nthe sender\n")
        for j in range(k):
            m.add_attachment(
                rng.randbytes(size), maintype="application", subtype="octet-stream",
                filename=f"file-{j}.bin",
            )  # fmt: skip
        out.append(wire(m.as_bytes()))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("before", type=Path, help="the first tree's src directory")
    p.add_argument("after", type=Path, help="the second tree's src directory")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--letters", type=int, default=300)
    p.add_argument("--connections", type=int, nargs="+", default=[4])
    p.add_argument(
        "--attachments",
        type=int,
        default=None,
        help="generated letters with this many attachments each, instead of the corpus",
    )
    p.add_argument("--attachment-size", type=int, default=4096, help="bytes per attachment")
    args = p.parse_args()
    trees = {"before": str(args.before.resolve()), "after": str(args.after.resolve())}
    if args.attachments is None:
        letters = [wire(m.raw) for m in corpus.unsealed()][: args.letters]
    else:
        letters = with_attachments(args.letters, args.attachments, args.attachment_size)
    work = Path(tempfile.mkdtemp(prefix="pochta-bench-ab-"))
    runs: list[dict[str, Any]] = []
    result: dict[str, Any] = {"benchmark": "smtp_before_after", "machine": machine(work)}
    if args.attachments is not None:
        result["letters"] = {
            "letters": args.letters,
            "attachments": args.attachments,
            "attachment_size": args.attachment_size,
        }
    try:
        for r in range(args.rounds):
            for c in args.connections:
                for name in ("before", "after") if r % 2 == 0 else ("after", "before"):
                    os.environ["PYTHONPATH"] = trees[name]
                    load = os.getloadavg()[0]
                    note(f"round {r}: {name}, {c} connection(s), load {load:.1f}")
                    run = smtp_run(letters, c, work, True)
                    runs.append({**run, "tree": name, "round": r, "load_1min": round(load, 2)})
    finally:
        os.environ.pop("PYTHONPATH", None)
        shutil.rmtree(work, ignore_errors=True)
    summary: dict[str, Any] = {}
    for c in args.connections:
        mine = {n: [x for x in runs if x["tree"] == n and x["connections"] == c] for n in trees}
        for name, rs in mine.items():
            summary[f"{name}_{c}"] = {
                "letters_per_s": statistics.median(x["letters_per_s"] for x in rs),
                "cpu_ms_per_letter": statistics.median(x["server_cpu_ms_per_letter"] for x in rs),
                "server_process_ms": statistics.median(x["of_which_main_process_ms"] for x in rs),
            }
        both = mine["before"] + mine["after"]
        by_round = {(x["round"], x["tree"]): x["letters_per_s"] for x in both}
        ratios = [by_round[(r, "after")] / by_round[(r, "before")] for r in range(args.rounds)]
        summary[f"ratio_after_before_{c}"] = round(statistics.median(ratios), 3)
    emit({**result, "trees": trees, "runs": runs, "summary": summary})


if __name__ == "__main__":
    main()
