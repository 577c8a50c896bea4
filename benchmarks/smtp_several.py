"""SMTP delivery through 1 and 2 loaders on several machines (issue 17): PostgreSQL + a Redis
Cluster + two nginx WebDAV storage nodes, README's "Several machines" recipe as
tests/machines.py builds it (three hosts as network namespaces on this machine; needs root).

The corpus of tests/several.py (plain letters, own and shared attachments to several
mailboxes, long bodies, phishing samples; each letter new, so its attachments are uploaded to
both nodes or counted again) is sent by ``--threads`` smtplib connections from the admin
host, one transaction per letter, connections kept open, no faults. "1 loader": every
connection to node1's loader; "2 loaders": half to each. Verdicts on (the default: each
letter scored, ``antispam.pool_processes = 1`` per loader) and off (``antispam.enabled = false``):
the loaders are restarted between the two. CPU: each loader's process tree, PostgreSQL's and
nginx's, from /proc, per letter. All of it shares this machine's cores: two loaders here
compete for the same two cores that one loader had, which real machines would not.

    python benchmarks/smtp_several.py            # 600 letters per round
    python benchmarks/smtp_several.py --quick    # 150
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import netns, several
from tests.machines import Machines

from _common import emit, machine, note
from anchors import tree_cpu_seconds


def cpu(machines: Machines) -> dict[str, float]:
    procs = {
        "loaders": [p for p in machines.loaders.values() if p.alive()],
        "postgres": [machines.postgres] if machines.postgres is not None else [],
        "nginx": list(machines.nodes.values()),
    }
    return {
        what: sum(tree_cpu_seconds(p.proc.pid) for p in ps if p.proc is not None)
        for what, ps in procs.items()
    }


def round_(
    machines: Machines, n: int, boxes: list[str], loaders: int, seed: int, threads: int
) -> dict[str, Any]:
    letters = several.corpus(n, boxes, seed=seed)
    sender = several.Sender(machines, letters, threads)
    sender.targets = sender.targets[:loaders]
    before = cpu(machines)
    started = time.monotonic()
    result = sender.run()
    seconds = time.monotonic() - started
    after = cpu(machines)
    failed = dict(result.failures)
    return {
        "loaders": loaders,
        "letters": n,
        "deliveries": len(result.accepted),
        "seconds": round(seconds, 2),
        "letters_per_s": round(n / seconds, 1),
        "mb_per_s": round(sum(len(m.raw) for m in letters) / seconds / 1e6, 2),
        "cpu_ms_per_letter": {k: round((after[k] - before[k]) * 1000 / n, 2) for k in after},
        "failed_tries": failed,
        "problems": result.permanent,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--letters", type=int, default=600)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 150 if args.quick else args.letters
    why = netns.unavailable()
    if why is not None:
        emit({"benchmark": "smtp_several", "skipped": why})
        return
    base = Path(tempfile.mkdtemp(prefix="pochta-bench-several-"))
    result: dict[str, Any] = {"benchmark": "smtp_several", "machine": machine(base)}
    note("starting the hosts")
    machines = Machines.start(base / "machines")
    try:
        boxes = several.users(20)
        several.add_users(machines, boxes)
        rounds = []
        seed = 100
        for verdicts in ("on", "off"):
            machines.restart_loaders(
                {"POCHTA_ANTISPAM__POOL_PROCESSES": "1", "POCHTA_LOG_LEVEL": "warning"}
                | ({} if verdicts == "on" else {"POCHTA_ANTISPAM__ENABLED": "false"})
            )
            for loaders in (1, 2, 1, 2):  # alternately: the machine's load drifts
                seed += 1
                note(f"verdicts {verdicts}, {loaders} loader(s)")
                r = round_(machines, n, boxes, loaders, seed, args.threads)
                rounds.append({"verdicts": verdicts, **r})
        fsck = several.fsck(machines)
        result |= {
            "letters_per_round": n,
            "threads": args.threads,
            "rounds": rounds,
            "fsck_ok": fsck["ok"],
            "fsck_letters": fsck["letters"],
        }
    finally:
        machines.stop()
    emit(result)


if __name__ == "__main__":
    main()
