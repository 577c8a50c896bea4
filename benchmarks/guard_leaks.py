"""Leaked-credential audit throughput (issue 7, seed 000): lines per second of an
``email:password`` dump checked against argon2id hashes made with pochta's own parameters
(``pochta.guard.passwords``).

Every line naming a known account costs one argon2 verification (tens to hundreds of
milliseconds of CPU, by design), so the rate depends on how many lines name our accounts:

1. verify: a dump in which every line names a known account (half right, half wrong
   passwords, no repeats), with 1 worker and with ``--workers`` worker processes;
2. mixed: a dump like the one of seed 000 seen from one provider: ``--known`` percent of the
   lines name known accounts, the rest are other providers' addresses, 1% malformed;
3. scan: no line names a known account (parsing and lookups only).

    python benchmarks/guard_leaks.py            # full run
    python benchmarks/guard_leaks.py --quick    # a few seconds, checks the script works
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from collections.abc import Collection
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.guard.leaks import audit
from pochta.guard.passwords import hash_password


class Accounts:
    def __init__(self, passwords: dict[str, str]) -> None:
        self.hashes = {email: hash_password(pw) for email, pw in passwords.items()}

    def password_hash(self, email: str) -> str | None:
        return self.hashes.get(email)

    def require_reset(self, emails: Collection[str]) -> int:
        return sum(email in self.hashes for email in emails)


def dump(lines: int, known_pct: float, accounts: dict[str, str], seed: int) -> list[bytes]:
    rng = random.Random(seed)
    names = list(accounts)
    out = []
    for i in range(lines):
        roll = rng.random() * 100
        if roll < 1:
            out.append(b"garbage line without a colon %d\n" % i)
        elif roll < 1 + known_pct:
            email = rng.choice(names)
            password = accounts[email] if rng.random() < 0.5 else f"guess-{i}"
            out.append(f"{email}:{password}\n".encode())
        else:
            out.append(f"user{i}@elsewhere.example:password{i}\n".encode())
    return out


def run(lines: list[bytes], accounts: Accounts, workers: int) -> dict[str, Any]:
    report = audit(lines, accounts, workers=workers)
    return {
        "workers": workers,
        "lines": report.lines,
        "verifications": report.valid + report.wrong,
        "seconds": round(report.seconds, 2),
        "lines_per_s": round(report.lines / report.seconds, 1),
        "verifications_per_s": round((report.valid + report.wrong) / report.seconds, 2),
        "report": report.to_dict(),
    }


def main(args: argparse.Namespace) -> None:
    note("hashing the accounts' passwords ...")
    passwords = {f"user{i}@pochta.test": f"password-{i}" for i in range(args.accounts)}
    accounts = Accounts(passwords)
    result: dict[str, Any] = {
        "figure": "guard_leaks",
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(Path(tempfile.gettempdir())),
        "params": vars(args),
    }
    only_known = dump(args.verify_lines, 100.0, passwords, 1)
    result["verify"] = []
    for workers in sorted({1, args.workers}):
        note(f"verify, {workers} worker(s) ...")
        result["verify"].append(run(only_known, accounts, workers))
    note("mixed ...")
    result["mixed"] = run(dump(args.mixed_lines, args.known, passwords, 2), accounts, args.workers)
    note("scan ...")
    result["scan"] = run(dump(args.scan_lines, 0.0, passwords, 3), accounts, 1)
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds: check the script works")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--accounts", type=int, default=8, help="known accounts (each hashed once)")
    p.add_argument("--known", type=float, default=0.1, help="percent of mixed lines we know")
    p.add_argument("--verify-lines", type=int, default=40)
    p.add_argument("--mixed-lines", type=int, default=20_000)
    p.add_argument("--scan-lines", type=int, default=500_000)
    args = p.parse_args()
    if args.quick:
        args.accounts, args.verify_lines = 2, 6
        args.mixed_lines, args.scan_lines = 2_000, 20_000
    return args


if __name__ == "__main__":
    main(_args())
