"""The leaked-credential audit (seed 000) against an in-memory account store."""

from __future__ import annotations

import io
import tracemalloc
from collections.abc import Collection, Iterator

import pytest
from argon2 import PasswordHasher

from pochta.guard import leaks
from pochta.guard.leaks import LeakReport, audit, dump_lines, parse
from pochta.guard.passwords import hash_password
from pochta.types import Accounts

_cheap = PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)  # tests only


class MemoryAccounts:
    """``Accounts`` in a dict, with cheap argon2 hashes unless told otherwise."""

    def __init__(self, passwords: dict[str, str], *, real: Collection[str] = ()) -> None:
        self.hashes = {
            email: hash_password(pw) if email in real else _cheap.hash(pw)
            for email, pw in passwords.items()
        }
        self.reset: set[str] = set()
        self.lookups = 0

    def password_hash(self, email: str) -> str | None:
        self.lookups += 1
        return self.hashes.get(email)

    def require_reset(self, emails: Collection[str]) -> int:
        found = [e for e in emails if e in self.hashes]
        self.reset.update(found)
        return len(found)


ACCOUNTS = {
    "alice@pochta.test": "correct horse",
    "bob@pochta.test": "hunter2",
    "carol@pochta.test": "pa:ss:word",  # colons after the first belong to the password
    "dave@pochta.test": "пароль",
}

DUMP = b"""alice@pochta.test:correct horse
ALICE@pochta.test:correct horse
alice@pochta.test:wrong
bob@pochta.test:hunter3
carol@pochta.test:pa:ss:word
dave@pochta.test:\xd0\xbf\xd0\xb0\xd1\x80\xd0\xbe\xd0\xbb\xd1\x8c\r
dave@pochta.test:\xff\xfe
nobody@pochta.test:correct horse
ghost@elsewhere.example:123456
no-colon-here
:password-without-email
bob@pochta.test:
not-an-address:password
\xff\xfe@pochta.test:x
"""


def test_the_report_has_the_providers_figures() -> None:
    accounts = MemoryAccounts(ACCOUNTS)
    report = audit(io.BytesIO(DUMP), accounts, workers=1)
    assert (report.lines, report.malformed, report.unknown, report.wrong, report.valid) == (
        14,
        5,
        2,
        3,
        4,
    )
    assert report.credentials == 9
    assert report.reset == 3  # alice (twice), carol, dave
    assert accounts.reset == {"alice@pochta.test", "carol@pochta.test", "dave@pochta.test"}
    assert report.share(report.valid) == pytest.approx(100 * 4 / 9)
    data = report.to_dict()
    assert data["valid_pct"] == pytest.approx(44.4444) and data["credentials"] == 9
    assert "4 valid (44.444%)" in report.summary()


def test_worker_processes_give_the_same_report() -> None:
    accounts = MemoryAccounts(ACCOUNTS)
    alone = audit(io.BytesIO(DUMP), MemoryAccounts(ACCOUNTS), workers=1)
    pooled = audit(io.BytesIO(DUMP * 20), accounts, workers=2)
    assert (pooled.lines, pooled.malformed, pooled.unknown, pooled.wrong, pooled.valid) == (
        alone.lines * 20,
        alone.malformed * 20,
        alone.unknown * 20,
        alone.wrong * 20,
        alone.valid * 20,
    )
    assert pooled.reset == 3


def test_the_project_password_hashes_are_checked() -> None:
    accounts = MemoryAccounts({"erin@pochta.test": "s3cret!"}, real={"erin@pochta.test"})
    report = audit([b"erin@pochta.test:s3cret!\n", b"erin@pochta.test:s3cret?\n"], accounts, 1)
    assert (report.valid, report.wrong, accounts.reset) == (1, 1, {"erin@pochta.test"})


def test_repeated_lines_are_verified_once(monkeypatch: pytest.MonkeyPatch) -> None:
    verified: list[int] = []
    real = leaks.verify_batch

    def counting(batch: list[tuple[str, bytes]]) -> list[bool]:
        verified.append(len(batch))
        return real(batch)

    monkeypatch.setattr(leaks, "verify_batch", counting)
    lines = [b"bob@pochta.test:hunter2\n", b"bob@pochta.test:hunter3\n"] * 50
    report = audit(lines, MemoryAccounts(ACCOUNTS), workers=1)
    assert (report.valid, report.wrong) == (50, 50)
    assert sum(verified) == 2


def test_progress_gets_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leaks, "PROGRESS_EVERY", 5)
    seen: list[LeakReport] = []
    report = audit(io.BytesIO(DUMP), MemoryAccounts(ACCOUNTS), workers=1, progress=seen.append)
    assert [s.lines for s in seen] == [5, 10, 14]
    assert seen[-1] == report


def test_overlong_lines_are_malformed_and_never_held_whole() -> None:
    dump = b"alice@pochta.test:correct horse\n" + b"x" * 100_000 + b"\nbob@pochta.test:hunter2\n"
    lines = list(dump_lines(io.BytesIO(dump), max_line=100))
    assert len(lines) == 3 and max(len(line) for line in lines) <= 101
    report = audit(lines, MemoryAccounts(ACCOUNTS), workers=1)
    assert (report.lines, report.malformed, report.valid) == (3, 1, 2)
    assert parse(b"a@b:" + b"p" * 5000) is None


def test_a_huge_dump_streams_in_bounded_memory() -> None:
    accounts = MemoryAccounts(ACCOUNTS)

    def huge() -> Iterator[bytes]:
        for i in range(50_000):
            yield b"user%d@elsewhere.example:password%d\n" % (i, i)
        yield b"bob@pochta.test:hunter2\n"

    tracemalloc.start()
    try:
        report = audit(huge(), accounts, workers=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (report.lines, report.unknown, report.valid) == (50_001, 50_000, 1)
    assert peak < 1_000_000  # bytes: nothing grows with the dump


def test_accounts_protocol_is_satisfied() -> None:
    accounts: Accounts = MemoryAccounts({})
    assert accounts.password_hash("x@y") is None
