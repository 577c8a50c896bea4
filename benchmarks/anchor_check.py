"""The two anchors alone: SpamAssassin and Rspamd (benchmarks/anchors.py), network tests off,
Bayes trained on easy-ham-1 (ham) and spam-1 (spam), then asked about the evaluation groups
easy-ham-2, hard-ham-1 and spam-2 (never used for training).

Both daemons are started (SpamAssassin first: sa-learn, then spamd; then redis and rspamd,
trained through the controller), then each anchor scans the groups in turn, the other idle.
Reported per anchor and group: spam recall (spam groups) or false-positive rate (ham groups),
letters/s with ``--concurrency`` letters in flight, the daemon's CPU ms per letter (all its
processes, from /proc; Rspamd's redis separately), the share of letters on which a Bayes rule
fired, and the rules most often behind false positives. Also: training time and the Bayes
counters, startup time, and the DNS queries either daemon sent (its nameserver is a sink on
loopback that records them).

    python benchmarks/anchor_check.py            # all 2,441 non-sealed evaluation letters
    python benchmarks/anchor_check.py --quick    # 100 a group; train on 250 + 250
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from anchors import (
    RSPAMD_DISABLED,
    RSPAMD_PARTLY,
    RSPAMD_SPAM_ACTIONS,
    Result,
    Rspamd,
    SpamAssassin,
    corpus_training,
)
from pochta_factory import corpus

EVAL_GROUPS = ("easy-ham-2", "hard-ham-1", "spam-2")
QUICK_LETTERS = 100  # a group, with --quick
QUICK_TRAINING = 250  # a class, with --quick: above both filters' minimum of 200 for Bayes


def group_figures(
    letters: list[corpus.CorpusLetter],
    results: list[Result],
    seconds: float,
    cpu: float,
    redis_cpu: float | None,
) -> dict[str, Any]:
    """Verdict quality and cost of one group's scan."""
    n = len(letters)
    flagged = sum(r.is_spam for r in results)
    out: dict[str, Any] = {"letters": n}
    if letters[0].label == "spam":
        out["spam_recall"] = round(flagged / n, 4)
    else:
        out["false_positive_rate"] = round(flagged / n, 4)
        out["false_positives"] = flagged
        counts = collections.Counter(s for r in results if r.is_spam for s in r.symbols)
        out["false_positive_top_symbols"] = dict(counts.most_common(8))
    out["letters_per_s"] = round(n / seconds, 1)
    out["cpu_ms_per_letter"] = round(1000 * cpu / n, 2)
    if redis_cpu is not None:
        out["redis_cpu_ms_per_letter"] = round(1000 * redis_cpu / n, 2)
    out["bayes_fired"] = round(sum(r.bayes for r in results) / n, 4)
    out["mean_score"] = round(sum(r.score for r in results) / n, 2)
    return out


def run_groups(
    anchor: SpamAssassin | Rspamd, groups: dict[str, list[corpus.CorpusLetter]], concurrency: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, letters in groups.items():
        note(f"{anchor.name}: {name}, {len(letters)} letters")
        redis0 = anchor.redis_cpu_seconds() if isinstance(anchor, Rspamd) else None
        cpu0 = anchor.cpu_seconds()
        t0 = time.perf_counter()
        results = anchor.scan([m.raw for m in letters], concurrency=concurrency)
        seconds = time.perf_counter() - t0
        cpu = anchor.cpu_seconds() - cpu0
        redis_cpu = (
            anchor.redis_cpu_seconds() - redis0
            if isinstance(anchor, Rspamd) and redis0 is not None
            else None
        )
        out[name] = group_figures(letters, results, seconds, cpu, redis_cpu)
    return out


def describe(anchor: SpamAssassin | Rspamd) -> dict[str, Any]:
    """How the anchor was set up and trained, and what it tried on the network."""
    out: dict[str, Any] = {
        "version": anchor.version(),
        "startup_seconds": round(anchor.startup_seconds, 1),
        "training": {
            **dataclasses.asdict(anchor.training),
            "seconds": round(anchor.training.seconds, 1),
        },
        "dns_queries": anchor.dns_queries(),
    }
    if isinstance(anchor, SpamAssassin):
        out["verdict"] = f"score >= required_score {anchor.required_score}"
        out["settings"] = anchor.settings().splitlines()[1:]
        out["command"] = "spamd -L -x --max-children=N --min-children=N (private site config)"
    else:
        out["verdict"] = f"action in {sorted(RSPAMD_SPAM_ACTIONS)} (stock: score >= 6)"
        out["modules_disabled"] = sorted(RSPAMD_DISABLED)
        out["modules_partly"] = RSPAMD_PARTLY
        out["hyperscan_loaded"] = anchor.hyperscan
        out["log_findings"] = anchor.log_findings()
    return out


def main() -> None:
    args = _args()
    groups: dict[str, list[corpus.CorpusLetter]] = {g: [] for g in EVAL_GROUPS}
    for m in corpus.unsealed(EVAL_GROUPS):
        groups[m.group].append(m)
    if args.quick:
        groups = {g: ms[:QUICK_LETTERS] for g, ms in groups.items()}
    ham, spam = corpus_training(limit=QUICK_TRAINING if args.quick else None)
    note(
        f"training: {len(ham)} ham, {len(spam)} spam; evaluation: "
        + ", ".join(f"{g} {len(ms)}" for g, ms in groups.items())
    )
    result: dict[str, Any] = {
        "benchmark": "anchor_check",
        "machine": machine(Path(tempfile.gettempdir())),
        "quick": args.quick,
        "concurrency": args.concurrency,
        "training_letters": {"ham (easy-ham-1)": len(ham), "spam (spam-1)": len(spam)},
    }
    note("spamassassin: sa-learn, then spamd")
    with SpamAssassin(ham, spam, children=args.concurrency) as sa:
        note("rspamd: redis and rspamd, then learning through the controller")
        with Rspamd(ham, spam, workers=args.concurrency) as rs:
            for anchor in (sa, rs):
                result[anchor.name] = {
                    "groups": run_groups(anchor, groups, args.concurrency),
                    **describe(anchor),
                }
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_LETTERS} letters a group, training on {QUICK_TRAINING} a class",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=2,
        help="letters in flight; also spamd children and rspamd normal workers",
    )
    return p.parse_args()


if __name__ == "__main__":
    main()
