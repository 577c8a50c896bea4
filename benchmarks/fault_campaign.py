"""The fault campaign as a benchmark: ``pochta serve`` killed with SIGKILL 1,000 times.

The same harness as the CI-sized test (``tests/integration/test_faults.py``, 30 kills), in
``tests/faults.py``: a workload delivers letters with shared attachments over SMTP, deletes
letters over HTTP and delivers the same letters again, while ``pochta serve`` is started and
killed (30 % of the kills during startup and recovery, the rest 0.1-1 s after it is healthy).
Then the last run finishes recovery, pending deletions and the incoming queue; the mailboxes
must hold every letter answered 250 exactly once (deletions aside: ``mailbox_missing``,
``mailbox_twice``), and ``pochta fsck`` checks every attachment of every letter on both disks
of its pair; then two Valkyrie passes, bit flips repaired from the sibling copy, a lost disk
detected and its pair evacuated, with ``fsck`` after every step.

The fsck counts (lost, damaged, unreadable, undercounted, miscounted, leaks) are the most any
of the four fsck runs found; ``fsck`` has them step by step. ``sound``: no fsck run found
anything lost, damaged, unreadable or undercounted; ``exact``: none found a counter or magic
that differs from the letters' references (miscounted, leaks); ``failed_checks``: the
campaign's other promises (every bit flip repaired, the lost disk detected, the pair
evacuated, ...) that did not hold. Exit code 1 when not sound, not exact or a check failed.

The server runs with ``tests.faults.SERVE_ENV``: deliveries cut short are undone after 3 s,
and Valkyrie passes every second with a 2 s slave delay, 5 s quarantine and 10 s orphan age,
so it deletes, purges and repairs while letters come and go; 30 % of the letters carry an
attachment of their own, which their deletion frees.

Client calls fail while the server is dead or starting: counted, expected. Each kill cycle
starts a fresh ``pochta serve`` process (Python, FastAPI, CatBoost imports), so the run takes
a few seconds per kill.

    python benchmarks/fault_campaign.py             # 1,000 kills
    python benchmarks/fault_campaign.py --quick     # 20 kills, a couple of minutes
    python benchmarks/fault_campaign.py --kills 200 --seed 7 --keep
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.faults

from tests.faults import INEXACT, UNSOUND, CampaignResult, Progress, campaign

from _common import emit, machine, note

NOTE_EVERY = 30.0  # seconds between progress lines


class Reporter:
    """A progress line on stderr at every stage and at most every NOTE_EVERY seconds."""

    def __init__(self) -> None:
        self.last = float("-inf")
        self.stage = ""
        self.kills_began = 0.0

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if p.stage == "kills" and p.kills == 0:
            self.kills_began = p.seconds
        if p.stage == self.stage and now - self.last < NOTE_EVERY and p.kills != p.total:
            return
        self.last, self.stage = now, p.stage
        rate = ""
        if p.stage == "kills" and p.kills:
            rate = f", {(p.seconds - self.kills_began) / p.kills:.1f} s/kill"
        note(
            f"[{p.seconds / 60:5.1f} min] {p.stage}: {p.kills}/{p.total} kills{rate}; "
            f"delivered {p.delivered}, deleted {p.deleted}, failed calls {p.failed}"
        )


def summary(r: CampaignResult, seed: int) -> dict[str, Any]:
    final = r.fsck_final
    return {
        "seed": seed,
        "kills": r.kills,
        "seconds": round(r.seconds, 1),
        "kill_phase_seconds": round(r.kill_seconds, 1),
        "seconds_per_kill": round(r.kill_seconds / r.kills, 2) if r.kills else None,
        "letters_delivered": r.delivered,  # accepted SMTP transactions, re-deliveries included
        "redeliveries": r.redelivered,
        "deletions": r.deleted,
        "failed_client_calls": r.failed,
        "letters_at_end": final.get("letters"),
        # (recipient, letter) pairs answered 250; missing from the mailboxes (not deleted by
        # the workload) or there more than once, after the last run
        "answered": r.answered,
        "mailbox_missing": len(r.mailbox_missing),
        "mailbox_twice": len(r.mailbox_twice),
        "attachment_refs_checked": final.get("refs"),
        "distinct_attachments_checked": final.get("blobs"),
        **{name: r.worst(name) for name in (*UNSOUND, *INEXACT)},
        "bit_flips": r.flipped,
        "bit_flips_repaired": r.repaired,
        "lost_disk_detected": r.lost_disk_detected,
        "evacuation": {k: r.evacuation.get(k) for k in ("moved", "left", "errors")},
        "valkyrie_errors": [p["errors"] for p in r.valkyrie_passes],
        # inside the killed servers (counts saved at checkpoints: a kill loses the last few)
        "valkyrie_during_kills": {
            "passes": sum(d.get("passes", 0) for d in r.valkyrie_during.get("disks", [])),
            **{
                k: r.valkyrie_during.get(k)
                for k in (
                    "verified",
                    "repaired",
                    "quarantined",
                    "purged",
                    "orphans",
                    "strays",
                    "tmp_removed",
                    "space1_dropped",
                    "errors",
                )
            },
        },
        "fsck": {
            step: {
                "letters": rep.get("letters"),
                "refs": rep.get("refs"),
                "blobs": rep.get("blobs"),
                **{name: len(rep.get(name, [])) for name in (*UNSOUND, *INEXACT)},
            }
            for step, rep in r.fsck_reports().items()
        },
        "failed_checks": r.failed_checks(),
        "sound": r.sound,
        "exact": r.exact,
    }


def main() -> int:
    args = _args()
    kills = 20 if args.quick else args.kills
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-faults-", dir=args.dir))
    note(f"{kills} SIGKILLs in {workdir} (seed {args.seed})")
    ok = False
    try:
        about = machine(workdir)
        r = campaign(workdir, kills=kills, seed=args.seed, progress=Reporter())
        result: dict[str, Any] = {
            "benchmark": "fault_campaign",
            "machine": about,
            **summary(r, args.seed),
        }
        emit(result)
        ok = r.sound and r.exact and not r.failed_checks()
    finally:
        if args.keep or not ok:
            note(f"kept {workdir} (serve.log, data)")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kills", type=int, default=1000, help="SIGKILLs (default 1000)")
    p.add_argument("--quick", action="store_true", help="20 kills: check the script works")
    p.add_argument("--seed", type=int, default=2026, help="kill moments, workload, bit flips")
    p.add_argument("--dir", default=None, help="where the data directory goes (default: TMPDIR)")
    p.add_argument("--keep", action="store_true", help="keep the data directory and the log")
    return p.parse_args()


if __name__ == "__main__":
    sys.exit(main())
