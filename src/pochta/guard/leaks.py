"""Leaked-credential audit (seed 000): which ``email:password`` lines of a dump open an account.

The dump is streamed line by line, in bounded memory whatever its size: accounts are looked up
in this process, and the argon2 verifications (tens of milliseconds of CPU each) run in a pool
of worker processes, a bounded number of batches in flight. Accounts whose password works are
marked for a forced reset as they are found. The report has the figures the seed's provider
published: lines, malformed lines, unknown accounts, wrong passwords, valid (count and share).

    with open(path, "rb") as dump:
        report = audit(dump_lines(dump), accounts, workers=os.cpu_count() or 1)
    print(report.summary())
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO

from pochta.guard.passwords import verify_password
from pochta.types import Accounts, AuditRecord

MAX_LINE = 4096  # bytes; longer lines are malformed (and never held whole in memory)
BATCH = 4  # verifications per task sent to a worker (each takes ~0.1 s or more)
RESET_BATCH = 1000  # accounts marked per require_reset call
PROGRESS_EVERY = 10_000  # lines between progress calls
CACHE = 65_536  # recent (email, password) results kept: dumps repeat lines


@dataclass
class LeakReport:
    """Counts per line of the dump. ``credentials`` are the well-formed lines; ``reset`` the
    accounts newly marked for a forced reset."""

    lines: int = 0
    malformed: int = 0
    unknown: int = 0
    wrong: int = 0
    valid: int = 0
    reset: int = 0
    seconds: float = 0.0

    @property
    def credentials(self) -> int:
        return self.lines - self.malformed

    def share(self, count: int) -> float:
        """``count`` as a percentage of the credentials."""
        return 100.0 * count / self.credentials if self.credentials else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "credentials": self.credentials,
            "unknown_pct": round(self.share(self.unknown), 4),
            "wrong_pct": round(self.share(self.wrong), 4),
            "valid_pct": round(self.share(self.valid), 4),
            "lines_per_second": round(self.lines / self.seconds, 1) if self.seconds else None,
        }

    def summary(self) -> str:
        return (
            f"{self.lines} lines, {self.malformed} malformed; of {self.credentials} "
            f"credentials: {self.unknown} unknown accounts ({self.share(self.unknown):.3f}%), "
            f"{self.wrong} wrong passwords ({self.share(self.wrong):.3f}%), {self.valid} valid "
            f"({self.share(self.valid):.3f}%); {self.reset} accounts must reset their password"
        )


def audit_record(report: LeakReport, at: float | None = None) -> AuditRecord:
    """The report as the history keeps it (the admin pages show the latest audits)."""
    return AuditRecord(
        time.time() if at is None else at,
        report.lines,
        report.malformed,
        report.unknown,
        report.wrong,
        report.valid,
        report.reset,
        report.seconds,
    )


def dump_lines(stream: BinaryIO, max_line: int = MAX_LINE) -> Iterator[bytes]:
    """The lines of a binary stream, reading at most ``max_line`` + 1 bytes at a time: an
    overlong line comes out as its first ``max_line`` + 1 bytes (malformed), the rest skipped."""
    while True:
        line = stream.readline(max_line + 1)
        if not line:
            return
        if len(line) > max_line and not line.endswith(b"\n"):
            rest = line
            while rest and not rest.endswith(b"\n"):
                rest = stream.readline(max_line + 1)
        yield line


def parse(line: bytes, max_line: int = MAX_LINE) -> tuple[str, bytes] | None:
    """(lowercased e-mail, password bytes) of an ``email:password`` line; None if malformed."""
    line = line.rstrip(b"\r\n")
    if len(line) > max_line:
        return None
    raw, sep, password = line.partition(b":")
    if not sep or not password:
        return None
    try:
        email = raw.decode("utf-8").strip().lower()
    except UnicodeDecodeError:
        return None
    local, at, domain = email.rpartition("@")
    if not at or not local or not domain or any(c.isspace() for c in email):
        return None
    return email, password


def verify_batch(batch: list[tuple[str, bytes]]) -> list[bool]:
    """Check each (argon2 hash, password): run in a worker process."""
    out = []
    for hashed, password in batch:
        try:
            text = password.decode("utf-8")
        except UnicodeDecodeError:  # no str password encodes to these bytes
            out.append(False)
            continue
        out.append(verify_password(hashed, text))
    return out


class _InProcess(Executor):
    """Runs each task at once, in this process: for ``workers <= 1``."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


class _Audit:
    def __init__(self, accounts: Accounts, executor: Executor, workers: int) -> None:
        self.accounts = accounts
        self.executor = executor
        self.report = LeakReport()
        self.in_flight: collections.deque[tuple[Future[list[bool]], list[bytes], list[str]]]
        self.in_flight = collections.deque()
        self.max_in_flight = 2 * max(1, workers)
        self.cache: collections.OrderedDict[bytes, bool] = collections.OrderedDict()
        self.waiting: dict[bytes, int] = {}  # lines waiting for a verification under way
        self.to_reset: set[str] = set()
        self.found: set[bytes] = set()  # digests of the accounts found valid so far
        self.batch: list[tuple[str, bytes]] = []
        self.batch_keys: list[bytes] = []
        self.batch_emails: list[str] = []

    def line(self, line: bytes) -> None:
        report = self.report
        report.lines += 1
        parsed = parse(line)
        if parsed is None:
            report.malformed += 1
            return
        email, password = parsed
        hashed = self.accounts.password_hash(email)
        if hashed is None:
            report.unknown += 1
            return
        key = hashlib.blake2b(email.encode() + b"\0" + password, digest_size=16).digest()
        known = self.cache.get(key)
        if known is not None:
            self.cache.move_to_end(key)
            self._count(known, email)
            return
        if key in self.waiting:
            self.waiting[key] += 1
            return
        self.waiting[key] = 1
        self.batch.append((hashed, password))
        self.batch_keys.append(key)
        self.batch_emails.append(email)
        if len(self.batch) >= BATCH:
            self.submit()

    def submit(self) -> None:
        if not self.batch:
            return
        future = self.executor.submit(verify_batch, self.batch)
        self.in_flight.append((future, self.batch_keys, self.batch_emails))
        self.batch, self.batch_keys, self.batch_emails = [], [], []
        while len(self.in_flight) > self.max_in_flight or (
            self.in_flight and self.in_flight[0][0].done()
        ):
            self.collect()

    def collect(self) -> None:
        future, keys, emails = self.in_flight.popleft()
        for ok, key, email in zip(future.result(), keys, emails, strict=True):
            self.cache[key] = ok
            if len(self.cache) > CACHE:
                self.cache.popitem(last=False)
            self._count(ok, email, self.waiting.pop(key))

    def _count(self, ok: bool, email: str, lines: int = 1) -> None:
        if not ok:
            self.report.wrong += lines
            return
        self.report.valid += lines
        account = hashlib.blake2b(email.encode(), digest_size=16).digest()
        if account not in self.found:
            self.found.add(account)
            self.to_reset.add(email)
            if len(self.to_reset) >= RESET_BATCH:
                self.flush_resets()

    def flush_resets(self) -> None:
        if self.to_reset:
            self.report.reset += self.accounts.require_reset(sorted(self.to_reset))
            self.to_reset.clear()

    def finish(self) -> None:
        self.submit()
        while self.in_flight:
            self.collect()
        self.flush_resets()


def audit(
    lines: Iterable[bytes],
    accounts: Accounts,
    workers: int,
    progress: Callable[[LeakReport], None] | None = None,
) -> LeakReport:
    """Check every ``email:password`` line against ``accounts``; mark the accounts whose
    password works for a forced reset. ``workers`` processes verify (1 or less: this one);
    ``progress`` gets a snapshot of the counts every ``PROGRESS_EVERY`` lines and at the end."""
    started = time.monotonic()
    if workers > 1:
        executor: Executor = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("forkserver")
        )
    else:
        executor = _InProcess()
    with executor:
        job = _Audit(accounts, executor, workers)
        try:
            for line in lines:
                job.line(line)
                if progress is not None and job.report.lines % PROGRESS_EVERY == 0:
                    job.report.seconds = time.monotonic() - started
                    progress(dataclasses.replace(job.report))
            job.finish()
        finally:
            job.flush_resets()  # what was found is marked even if the audit stops early
    job.report.seconds = time.monotonic() - started
    if progress is not None:
        progress(dataclasses.replace(job.report))
    return job.report
