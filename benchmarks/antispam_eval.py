"""Spam and phishing verdicts on corpus groups never used for training (issue 6, section 5).

pochta: the shipped model (trained by ``pochta model train`` on easy-ham-1 + spam-1 only).
The counters first learn the training groups with their true labels (what a deployed pochta
would know), then the evaluation groups easy-ham-2, hard-ham-1 and spam-2 are replayed in date
order and the counters learn only from pochta's own verdicts. Reported per group: spam recall,
false-positive rate; letters/s and CPU ms per letter (one process, one core).

SpamAssassin, in the same run and on the same letters, when it is installed (Debian package
``spamassassin``): ``spamd`` with local tests only (``-L``: no DNS, no network tests), its
default threshold of 5.0, asked by ``spamc`` with several letters in flight. Its Bayes filter
is untrained (as shipped). CPU time is spamd's (children included).

    python benchmarks/antispam_eval.py            # all 3,046 evaluation letters
    python benchmarks/antispam_eval.py --quick    # 300 of them
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta import corpus
from pochta.antispam import model as model_mod
from pochta.antispam import training


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def children_cpu(pid: int) -> float:
    """utime + stime of a process and its children, from /proc (seconds)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ppid, utime, stime = int(fields[1]), int(fields[11]), int(fields[12])
        if int(entry.name) == pid or ppid == pid:
            total += (utime + stime) / ticks
    return total


def spamassassin(letters: list[corpus.CorpusLetter]) -> dict[str, Any] | None:
    spamd, spamc = shutil.which("spamd"), shutil.which("spamc")
    if spamd is None or spamc is None:
        return None
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-sa-"))
    proc = subprocess.Popen(
        [
            *(spamd, "-L", "-p", str(port), "-i", "127.0.0.1", "-A", "127.0.0.1"),
            *("--max-children=2", "--syslog=stderr", "-H", str(workdir)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.5)
        cpu0 = children_cpu(proc.pid)

        def check(raw: bytes) -> bool:
            done = subprocess.run(
                [spamc, "-p", str(port), "-c"], input=raw, capture_output=True, timeout=120
            )
            return done.returncode == 1  # spamc -c: exit 1 = spam

        t0 = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            verdicts = list(pool.map(check, [m.raw for m in letters]))
        elapsed = time.perf_counter() - t0
        cpu = children_cpu(proc.pid) - cpu0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "groups": per_group(letters, verdicts),
        "letters_per_s": round(len(letters) / elapsed, 1),
        "cpu_ms_per_letter": round(1000 * cpu / len(letters), 2),
        "version": subprocess.run(
            ["spamassassin", "--version"], capture_output=True, text=True
        ).stdout.splitlines()[0],
    }


def per_group(letters: list[corpus.CorpusLetter], spam: list[bool]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for g in sorted({m.group for m in letters}):
        idx = [i for i, m in enumerate(letters) if m.group == g]
        sp = [i for i in idx if letters[i].label == "spam"]
        hm = [i for i in idx if letters[i].label == "ham"]
        out[g] = {
            "letters": len(idx),
            "spam_recall": round(sum(spam[i] for i in sp) / len(sp), 4) if sp else None,
            "false_positive_rate": round(sum(spam[i] for i in hm) / len(hm), 4) if hm else None,
        }
    return out


def main() -> None:
    args = _args()
    model = model_mod.load()
    if model is None:
        raise SystemExit("no shipped model: run `pochta model train` first")
    groups = training.EVAL_GROUPS
    letters = [m for _, m in training.in_time_order(corpus.letters(groups))]
    if args.quick:
        letters = letters[:: max(1, len(letters) // 300)]
    note(f"pochta: {len(letters)} letters")
    warm = list(corpus.letters(training.TRAIN_GROUPS))
    ours = training.evaluate(model, warm=warm, groups=groups, only=letters)
    result: dict[str, Any] = {
        "benchmark": "antispam_eval",
        "machine": machine(Path(tempfile.gettempdir())),
        "letters": len(letters),
        "model": {**model.info, "threshold": model.threshold},
        "pochta": ours,
    }
    if not args.no_spamassassin:
        note("spamassassin")
        result["spamassassin"] = spamassassin(letters)
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="300 letters: check the script works")
    p.add_argument("--no-spamassassin", action="store_true", help="pochta only")
    return p.parse_args()


if __name__ == "__main__":
    main()
