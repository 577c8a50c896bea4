"""Does a letter cost more with many mailboxes? (issue 29.3: it must not.)

``pochta serve`` with its defaults (verdicts on, log level info, IMAP on, sync=full), as
``smtp_delivery.py --stack`` runs it, gets the same letters (the unsealed letters of
easy-ham-2, hard-ham-1 and spam-2; ``--letters N`` takes N of them evenly) from the same
smtplib clients, sent round-robin to 1 or to M mailboxes (``--mailboxes 1,100``), in
alternating rounds: each round runs every (tree, mailboxes) once, the order reversed every
other round. ``--trees A,B``: ``src`` directories (say ``git archive`` of main and of a branch)
whose pochta each run uses, for an A/B in the same run. Each run: letters/s (250 answers), CPU
ms a letter of the server and its worker processes, of which the server process, the verdict
labels its log gave, and the machine's load before and after.

    python benchmarks/smtp_mailboxes.py --mailboxes 1,100 --rounds 3
    python benchmarks/smtp_mailboxes.py --trees /tmp/main/src,src --letters 600
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import smtp_delivery as sd
from _common import emit, machine, note
from pochta_factory import corpus

HERE = Path(__file__).resolve().parent


def main() -> None:
    args = _args()
    raws = [m.raw for m in corpus.unsealed(sd.TEST_GROUPS)]
    if 0 < args.letters < len(raws):
        raws = raws[:: max(1, len(raws) // args.letters)][: args.letters]
    on_wire = [sd.wire(r) for r in raws]
    counts = [int(x) for x in args.mailboxes.split(",")]
    trees = [str(Path(t).resolve()) for t in args.trees.split(",")] if args.trees else [""]
    work = Path(tempfile.mkdtemp(prefix="pochta-bench-boxes-", dir=args.dir))
    result: dict[str, Any] = {
        "benchmark": "smtp_mailboxes",
        "machine": machine(work),
        "letters": len(on_wire),
        "connections": args.connections,
        "runs": [],
    }
    try:
        setups = {}
        for m in counts:
            (work / f"t{m}").mkdir()
            addresses = [f"box{i}@example.org" for i in range(m)]
            template = sd.pochta_template(work / f"t{m}", addresses)
            setups[m] = (template, [addresses[i % m] for i in range(len(on_wire))])
        log = work / f"smtp-{args.connections}-verdicts.log"  # smtp_run's
        for r in range(args.rounds):
            order = [(t, m) for t in trees for m in counts]
            for tree, m in order if r % 2 == 0 else order[::-1]:
                if tree:  # the clients import this directory's smtp_delivery too
                    os.environ["PYTHONPATH"] = os.pathsep.join([tree, str(HERE)])
                note(f"round {r + 1}: {m} mailbox(es) {tree}")
                template, rcpts = setups[m]
                log.unlink(missing_ok=True)
                load = os.getloadavg()[0]
                run = sd.smtp_run(
                    on_wire, args.connections, work, True, template=template, rcpts=rcpts
                )
                labels = collections.Counter(re.findall(r"verdict (\w+)", log.read_text()))
                result["runs"].append(
                    {
                        "round": r + 1,
                        "tree": tree or "this",
                        "mailboxes": m,
                        "load": [round(load, 2), round(os.getloadavg()[0], 2)],
                        **{k: run[k] for k in ("letters", "seconds", "letters_per_s")},
                        "cpu_ms_per_letter": run["server_cpu_ms_per_letter"],
                        "server_process_ms": run["of_which_main_process_ms"],
                        "verdicts": dict(labels),
                    }
                )
        result["medians"] = _medians(result["runs"])
        emit(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _medians(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for tree, m in dict.fromkeys((r["tree"], r["mailboxes"]) for r in runs):
        mine = [r for r in runs if r["tree"] == tree and r["mailboxes"] == m]
        out.append(
            {
                "tree": tree,
                "mailboxes": m,
                **{
                    k: round(statistics.median(r[k] for r in mine), 2)
                    for k in ("letters_per_s", "cpu_ms_per_letter", "server_process_ms")
                },
            }
        )
    return out


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mailboxes", default="1,100", help="numbers of mailboxes (1,100)")
    p.add_argument("--trees", default="", help="src directories to run in turns (default: ours)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--letters", type=int, default=0, help="letters a run (0: all, ~2,440)")
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--dir", default=None, help="where the data directories go (default: /tmp)")
    return p.parse_args()


if __name__ == "__main__":
    if not os.environ.get("PYTHONPATH"):
        sys.exit("run with PYTHONPATH=src (the clients and pochta serve import it)")
    main()
