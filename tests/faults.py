"""The fault campaign with real processes, shared by the CI-sized test
(``tests/integration/test_faults.py``, 30 SIGKILLs) and the benchmark
(``benchmarks/fault_campaign.py``, 1,000 and more).

``pochta serve`` is killed with SIGKILL at random moments (during startup and recovery, or
while it works) while a workload delivers letters with shared attachments over SMTP, deletes
letters over HTTP and delivers the same letters again. Then the last run finishes recovery,
pending deletions and the incoming queue (``smtp.answer = "queued"``, the default), and two
judges speak: the mailboxes (every letter answered 250 is there exactly once for each of its
recipients, unless the workload deleted it; none is there twice) and ``pochta fsck`` (nothing
lost, nothing damaged, no counter below its references). After that: two Valkyrie passes,
bit flips repaired from the sibling copy, a lost disk detected and its pair evacuated, with
``fsck`` after every step.

:func:`campaign` runs it all and returns the numbers (:class:`CampaignResult`); it asserts
nothing, so the benchmark can report what it saw and the test decides what must hold. Only
a harness failure (a server that never becomes healthy, a CLI that crashes) raises
:class:`HarnessError` or :class:`subprocess.CalledProcessError`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import smtplib
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from pochta.app import Pochta, build
from pochta.config import load_settings
from pochta.mailbox import queueadmin
from tests.integration.conftest import TOKEN, start_server
from tests.integration.test_smtp import PASSWORD, add_users
from tests.mailtools import letter, payload

USERS = ("alice@example.org", "bob@example.org")
POOL = [payload(100 + i, 6_000 + 9_000 * i) for i in range(6)]  # shared attachments
# fsck findings that mean danger (``FsckReport.ok``): lost, damaged, unreadable, or
# undercounted with agreeing magic (a file that decs could delete while letters reference it)
UNSOUND = ("lost", "damaged", "unreadable", "undercounted")
# safe but inexact: a counter below its references while the magic disagrees (kept by the
# magic), or above them (kept longer than needed). The journal of operation ids makes every
# count exactly-once, so the campaign expects none of these either.
INEXACT = ("miscounted", "leaks")
UNIQUE_SHARE = 0.3  # letters that also carry an attachment of their own (it can reach zero)
# the server of the campaign: cut deliveries undone after 3 s, Valkyrie passing every second
# with short delays, so that it quarantines, purges and repairs while letters come and go
SERVE_ENV = {
    "POCHTA_MAILBOX__PENDING_GRACE_SECONDS": "3",
    "POCHTA_VALKYRIE__PASS_INTERVAL_SECONDS": "1",
    "POCHTA_VALKYRIE__SLAVE_DELAY_SECONDS": "2",
    "POCHTA_VALKYRIE__QUARANTINE_SECONDS": "5",
    "POCHTA_VALKYRIE__ORPHAN_MIN_AGE_SECONDS": "10",
    "POCHTA_VALKYRIE__TMP_MAX_AGE_SECONDS": "30",
    # letters are scored in the server process: the campaign is about the store, and a
    # server without its pool of scoring processes is healthy in half the time (2.5 s
    # instead of 5 on 2 cores), so more of its 50 lives are spent delivering
    "POCHTA_ANTISPAM__POOL_PROCESSES": "0",
}
BIT_FLIPS = 8
SENT_KEPT = 256  # letters remembered for re-delivery (a long campaign sends many thousands)


class HarnessError(RuntimeError):
    """The campaign could not go on: a server never became healthy, a CLI printed nothing."""


def cli(data: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pochta", *args, "--data", str(data)],
        capture_output=True,
        check=check,
        timeout=120,
    )


def valkyrie(data: Path, *args: str) -> dict[str, Any]:
    """``pochta valkyrie run --once --json``."""
    command = ["valkyrie", "run", "--once", "--json", "--data", str(data), *args]
    done = subprocess.run(
        [sys.executable, "-m", "pochta", *command],
        capture_output=True,
        timeout=120,
    )
    if not done.stdout:
        raise HarnessError(f"valkyrie printed nothing:\n{done.stderr.decode()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def fsck(data: Path) -> dict[str, Any]:
    done = cli(data, "fsck", "--json", check=False)
    if not done.stdout:
        raise HarnessError(f"fsck printed nothing:\n{done.stderr.decode()}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def unsound(report: dict[str, Any]) -> dict[str, list[str]]:
    """The dangerous findings of an fsck report (empty: sound)."""
    return {name: report[name] for name in UNSOUND if report[name]}


def inexact(report: dict[str, Any]) -> dict[str, list[str]]:
    """The safe but inexact findings of an fsck report (empty: every counter exact)."""
    return {name: report[name] for name in INEXACT if report[name]}


def tagged(raw: bytes, tag: str) -> bytes:
    """``raw`` with its Subject made ``tag``: each SMTP transaction's letter is told apart
    in the mailboxes (a re-delivery sends the same parts under a subject of its own)."""
    start = raw.index(b"\r\nSubject: ") + 2
    end = raw.index(b"\r\n", start)
    return raw[:start] + b"Subject: " + tag.encode() + raw[end:]


class Workload:
    """Deliveries, deletions and re-deliveries against whatever server listens on the ports;
    every failure (the server is dead or starting) is expected, counted and ignored.

    What the mailboxes must hold is kept beside: ``answered``, the tag (subject) of every
    transaction answered 250 and its recipients that were accepted; ``deleted`` and
    ``maybe_deleted``, the (recipient, tag) the workload deleted with an answer, or without
    one (the server died under the call: deleted or not)."""

    def __init__(self, http: int, smtp: int, tokens: dict[str, str], seed: int) -> None:
        self.http, self.smtp, self.tokens = http, smtp, tokens
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        # delivered counts every accepted SMTP transaction, re-deliveries included
        self.delivered = self.redelivered = self.deleted = self.failed = 0
        self.sent: list[bytes] = []
        self.answered: dict[str, tuple[str, ...]] = {}
        self.deleted_letters: set[tuple[str, str]] = set()
        self.maybe_deleted: set[tuple[str, str]] = set()
        self._tags = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        # one HTTP client for the whole workload: a new one per call (``httpx.get``) costs
        # ~20 ms of CPU (its TLS context), taken from the server starting meanwhile
        self.http_client = httpx.Client(timeout=5)

    def _letter(self) -> bytes:
        n = self.rng.randint(1, 3)
        parts = [(f"part{i}.bin", self.rng.choice(POOL)) for i in range(n)]
        if self.rng.random() < UNIQUE_SHARE:  # its own: deleting every copy frees it
            own = self.rng.randbytes(self.rng.randint(5_000, 20_000))
            parts.append(("own.bin", own))
        subject = f"letter {self.rng.getrandbits(32):x}"
        return letter(subject=subject, attachments=parts)

    def _remember(self, raw: bytes) -> None:
        if len(self.sent) < SENT_KEPT:
            self.sent.append(raw)
        else:
            self.sent[self.rng.randrange(SENT_KEPT)] = raw

    def _deliver(self, raw: bytes) -> None:
        to = self.rng.sample(USERS, self.rng.randint(1, 2))
        self._tags += 1
        tag = f"t{self._tags:07d}"
        with smtplib.SMTP("127.0.0.1", self.smtp, timeout=15) as smtp:
            refused = smtp.sendmail("sender@example.net", to, tagged(raw, tag))
            self.answered[tag] = tuple(r for r in to if r not in refused)  # before QUIT
        self.delivered += 1

    def _delete(self) -> None:
        user = self.rng.choice(USERS)
        auth = {"Authorization": f"Bearer {self.tokens[user]}"}
        base = f"http://127.0.0.1:{self.http}/v1/messages"
        page = self.http_client.get(f"{base}?limit=50", headers=auth).json()
        if page["messages"]:
            victim = self.rng.choice(page["messages"])
            self.maybe_deleted.add((user, victim["subject"]))
            r = self.http_client.delete(f"{base}/{victim['id']}", headers=auth)
            if r.status_code == 204:
                self.deleted_letters.add((user, victim["subject"]))
            self.deleted += 1

    def _run(self) -> None:
        with self.http_client:
            self._loop()

    def _loop(self) -> None:
        while not self.stop.is_set():
            roll = self.rng.random()
            try:
                if roll < 0.5:
                    raw = self._letter()
                    self._remember(raw)
                    self._deliver(raw)
                elif roll < 0.65 and self.sent:
                    self._deliver(self.rng.choice(self.sent))  # the same letter again
                    self.redelivered += 1
                else:
                    self._delete()
            except (OSError, smtplib.SMTPException, httpx.HTTPError, ValueError, KeyError):
                self.failed += 1
                time.sleep(0.05)


def steady_ports(count: int, rng: random.Random) -> list[int]:
    """``count`` free loopback ports below the kernel's ephemeral range
    (``ip_local_port_range``), for a server restarted on the same ports again and again: a
    port in that range can be handed to an outgoing connection between two restarts (the
    restart then fails with "address already in use"); one below it is never handed out."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    below = range(max(1024, low // 2), low)
    candidates = rng.sample(below, k=min(200, len(below)))
    chosen: list[int] = []
    for port in candidates:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken
        chosen.append(port)
        if len(chosen) == count:
            return chosen
    raise HarnessError(f"no {count} free ports below {low}")


def serve(data: Path, log: Path, http: int, smtp: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "POCHTA_SERVICE_TOKEN": TOKEN,
        "POCHTA_SMTP__PORT": str(smtp),
        # LMTP and IMAP off: the campaign speaks SMTP and HTTP only, and a port picked anew at
        # each restart could be taken by an outgoing connection before the server binds it
        # ("address already in use": the restart fails, not what the campaign tests)
        "POCHTA_SMTP__LMTP_PORT": "0",
        "POCHTA_IMAP__ENABLED": "false",
        "POCHTA_SMTP__HOSTNAME": "mx.pochta.test",
        **SERVE_ENV,
    }
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "pochta", "serve", "--port", str(http), "--data", str(data)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )


def wait_healthy(http: int, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    # one client for all the polls (a new one per poll costs ~20 ms of CPU: its TLS context)
    with httpx.Client(timeout=1) as probe:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if probe.get(f"http://127.0.0.1:{http}/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    raise HarnessError(f"pochta serve did not become healthy (exit code {proc.poll()})")


def wait_working(work: Workload, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """Until the workload has a letter accepted by this run of the server (or ``timeout``
    passes: the caller's count of deliveries then says so). Healthy is not yet working: the
    first letter after a start waits for the worker processes, and on a loaded machine (CI on
    both cores) a kill 0.1-1 s after healthy landed before any letter was taken, 1 of 1,290
    deliveries in a campaign at load 10."""
    before = work.delivered
    deadline = time.monotonic() + timeout
    while work.delivered == before and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)


def mailbox_counts(pochta: Pochta) -> Counter[tuple[str, str]]:
    """How many letters of each (user, subject) the mailboxes hold, every folder read."""
    counts: Counter[tuple[str, str]] = Counter()
    for email in USERS:
        user = pochta.mailbox.user(email)
        if user is None:
            raise HarnessError(f"no user {email}")
        for folder in pochta.mailbox.folders(user.id):
            cursor = None
            while True:
                page = pochta.mailbox.letters(user.id, folder.name, 1000, cursor)
                counts.update((email, m.subject) for m in page)
                if len(page) < 1000:
                    break
                cursor = page[-1].id
    return counts


def judge_mailboxes(work: Workload, counts: Counter[tuple[str, str]]) -> dict[str, list[str]]:
    """``missing``: a letter answered 250 that a recipient does not have (and the workload
    did not delete); ``twice``: a letter a recipient has more than once (answered or not),
    or has still after the workload deleted it with an answer."""
    missing = [
        f"{rcpt}: {tag}"
        for tag, rcpts in sorted(work.answered.items())
        for rcpt in rcpts
        if not counts[(rcpt, tag)] and (rcpt, tag) not in work.maybe_deleted
    ]
    twice = [f"{rcpt}: {tag} x{n}" for (rcpt, tag), n in sorted(counts.items()) if n > 1]
    # deleted with an answer (the deletion committed first), and there all the same: a copy
    twice += [f"{rcpt}: {tag} deleted, still there" for rcpt, tag in work.deleted_letters
              if counts[(rcpt, tag)] == 1]  # fmt: skip
    return {"missing": missing, "twice": twice}


def settle(data: Path, work: Workload, timeout: float = 60) -> dict[str, list[str]]:
    """Until no deletion is pending (as ``pochta stats`` counts them), the incoming queue
    holds no letter waiting (the queue delivered what the kills left in it: a delivery still
    to come could put a letter there twice) and every letter answered 250 is in its
    mailboxes, read every 0.1 s by one pochta opened here (as a command opens it: a ``pochta
    stats`` process per poll took ~1 s of CPU to start, beside the server recovering on 2
    cores). What the mailboxes hold then, judged (:func:`judge_mailboxes`)."""
    deadline = time.monotonic() + timeout
    # a letter whose try failed during the kills waits out its backoff (30 s, doubled): made
    # due now, as `pochta queue retry --all` does (the server reads the queue within 2 s)
    queueadmin.retry(data / "queue", None)
    watch = build(load_settings(data_dir=data))
    try:
        while True:
            pending = watch.mailbox.stats()["pending_deletions"]
            # the queue before the mailboxes: empty then, nothing arrives after the count
            waiting = [x.id for x in queueadmin.listing(data / "queue") if not x.held]
            judged = judge_mailboxes(work, mailbox_counts(watch))
            if not pending and not waiting and not judged["missing"]:
                return judged
            if time.monotonic() >= deadline:
                if pending:
                    raise HarnessError("deletions did not finish")
                if waiting:  # its delivery may still double a letter: no verdict yet
                    raise HarnessError(f"the incoming queue still holds {len(waiting)} letters")
                return judged  # letters missing: the judge says which
            time.sleep(0.1)
    finally:
        watch.close()


def stored_files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("??/??/*") if len(p.name) == 64)


@dataclass(frozen=True, slots=True)
class Progress:
    """What :func:`campaign` tells its progress callback: after every kill, and when a stage
    (``kills``, ``recovery``, ``valkyrie``, ``bit flips``, ``lost disk``, ``done``) begins."""

    stage: str
    kills: int
    total: int
    seconds: float  # since the campaign began
    delivered: int
    deleted: int
    failed: int


@dataclass(slots=True)
class CampaignResult:
    """Everything the campaign saw. ``fsck_*`` are ``pochta fsck --json`` reports (the lists
    in full), ``valkyrie_*`` are ``pochta valkyrie run --once --json`` summaries."""

    kills: int = 0
    kills_starting: int = 0  # among them, while it started and recovered (before healthy)
    seconds: float = 0.0  # the whole campaign
    kill_seconds: float = 0.0  # the SIGKILL phase only
    # as seen by the workload (clients): accepted SMTP transactions (re-deliveries included),
    # re-deliveries among them, deletions answered, calls that failed (server dead/starting)
    delivered: int = 0
    redelivered: int = 0
    deleted: int = 0
    failed: int = 0
    last_exit: int | None = None  # exit code of the last run, stopped with SIGTERM
    # ``pochta valkyrie stats --json`` after the last run: what Valkyrie did inside the
    # killed servers (quarantined, purged, repaired, ...) while letters came and went
    valkyrie_during: dict[str, Any] = field(default_factory=dict)
    # the mailboxes after the last run: (recipient, letter) pairs answered 250, and those
    # missing (not deleted by the workload) or there more than once (see judge_mailboxes)
    answered: int = 0
    mailbox_missing: list[str] = field(default_factory=list)
    mailbox_twice: list[str] = field(default_factory=list)
    fsck_after_kills: dict[str, Any] = field(default_factory=dict)
    valkyrie_passes: list[dict[str, Any]] = field(default_factory=list)  # nothing broken
    fsck_after_valkyrie: dict[str, Any] = field(default_factory=dict)
    flipped: int = 0  # files with one bit flipped (at most one copy of each key)
    valkyrie_bit_flips: dict[str, Any] = field(default_factory=dict)
    repaired: int = 0  # files Valkyrie repaired in that pass
    fsck_after_bit_flips: dict[str, Any] = field(default_factory=dict)
    valkyrie_lost_disk: dict[str, Any] = field(default_factory=dict)
    lost_disk_detected: bool = False  # a "not there" problem reported for the lost disk
    evacuation: dict[str, Any] = field(default_factory=dict)  # ``pairs evacuate --json``
    evacuate_exit: int | None = None
    retire_exit: int | None = None
    fsck_final: dict[str, Any] = field(default_factory=dict)

    def fsck_reports(self) -> dict[str, dict[str, Any]]:
        return {
            "after_kills": self.fsck_after_kills,
            "after_valkyrie": self.fsck_after_valkyrie,
            "after_bit_flips": self.fsck_after_bit_flips,
            "final": self.fsck_final,
        }

    def worst(self, name: str) -> int:
        """The most findings of one kind (``lost``, ``leaks``, ...) any fsck report had."""
        return max((len(r.get(name, [])) for r in self.fsck_reports().values()), default=0)

    @property
    def exact(self) -> bool:
        """No fsck report, at any step, found a counter or magic that differs from the
        references (neither miscounted nor leaked)."""
        return all(r and not inexact(r) for r in self.fsck_reports().values())

    @property
    def sound(self) -> bool:
        """No fsck report, at any step, found anything lost, damaged, unreadable or
        undercounted."""
        return all(r and not unsound(r) for r in self.fsck_reports().values())

    def failed_checks(self) -> list[str]:
        """The campaign's other promises that did not hold (empty: all held)."""
        checks = {
            "the last run stopped cleanly (exit code 0)": self.last_exit == 0,
            "every letter answered 250 is in its mailboxes once": self.answered > 0
            and not self.mailbox_missing
            and not self.mailbox_twice,
            "letters and blobs were left to check": bool(
                self.fsck_after_kills.get("letters") and self.fsck_after_kills.get("blobs")
            ),
            "Valkyrie passes found no errors": len(self.valkyrie_passes) == 2
            and all(p["errors"] == 0 for p in self.valkyrie_passes),
            "every bit flip was repaired": self.repaired == self.flipped,
            "the lost disk was detected": self.lost_disk_detected
            and self.valkyrie_lost_disk.get("errors", 0) >= 1,
            "the pair was evacuated": self.evacuate_exit == 0
            and (self.evacuation.get("left"), self.evacuation.get("errors")) == (0, 0),
            "the pair was retired": self.retire_exit == 0,
            "blobs remain after the evacuation": bool(self.fsck_final.get("blobs")),
        }
        return [name for name, held in checks.items() if not held]


def _kill_phase(
    data: Path,
    log: Path,
    http: int,
    smtp: int,
    work: Workload,
    rng: random.Random,
    kills: int,
    tick: Callable[[str, int], None],
) -> tuple[int, int]:
    """``kills`` SIGKILLs; returns how many were done and how many of them came during
    startup and recovery (the others came while it worked)."""
    done = starting = 0
    work.thread.start()
    try:
        for _ in range(kills):
            proc = serve(data, log, http, smtp)
            try:
                if rng.random() < 0.3:  # during startup and recovery
                    time.sleep(rng.uniform(0.2, 2.0))
                    starting += 1
                else:  # while it works: once it has taken a letter since this start
                    wait_healthy(http, proc)
                    wait_working(work, proc)
                    time.sleep(rng.uniform(0.1, 1.0))
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=10)
            done += 1
            tick("kills", done)
    finally:
        work.stop.set()
        work.thread.join(timeout=10)
    return done, starting


def campaign(
    root: Path,
    *,
    kills: int = 30,
    seed: int = 2026,
    progress: Callable[[Progress], None] | None = None,
) -> CampaignResult:
    """Run the whole campaign in ``root`` (an empty directory: the data directory, the
    server's log ``serve.log`` and the disks of a second pair go there) and return what
    happened. ``kills`` SIGKILLs; ``seed`` drives the kill moments, the workload and the bit
    flips (the timing of real processes is not reproducible, so neither is the outcome)."""
    data, log = root / "data", root / "serve.log"
    rng = random.Random(seed)
    result = CampaignResult()
    work: Workload | None = None
    t0 = time.monotonic()

    def tick(stage: str, done: int) -> None:
        if progress is not None:
            w = work
            progress(
                Progress(
                    stage,
                    done,
                    kills,
                    time.monotonic() - t0,
                    w.delivered if w else 0,
                    w.deleted if w else 0,
                    w.failed if w else 0,
                )
            )

    add_users(data, *USERS)
    cli(data, "pairs", "add", str(root / "disk-c"), str(root / "disk-d"))

    # HTTP and SMTP keep their ports across the restarts (the workload's clients keep them)
    http, smtp = steady_ports(2, random.Random())  # not ``rng``: the kill moments stay as seeded
    quiet = {"POCHTA_SMTP__LMTP_PORT": "0", "POCHTA_IMAP__ENABLED": "false"}  # unused
    first = start_server(data, log, port=http, smtp_port=smtp, settings=quiet)
    tokens = {}
    try:
        for user in USERS:
            r = httpx.post(f"{first.url}/v1/session", json={"email": user, "password": PASSWORD})
            tokens[user] = r.json()["token"]
    finally:
        first.stop(signal.SIGKILL)

    # SIGKILLs under the workload
    work = Workload(http, smtp, tokens, seed=seed + 1)
    tick("kills", 0)
    began = time.monotonic()
    try:
        result.kills, result.kills_starting = _kill_phase(
            data, log, http, smtp, work, rng, kills, tick
        )
    finally:
        result.kill_seconds = time.monotonic() - began
        result.delivered, result.redelivered = work.delivered, work.redelivered
        result.deleted, result.failed = work.deleted, work.failed

    # the last run: recovery and pending deletions finish
    tick("recovery", result.kills)
    last = start_server(data, log, port=http, smtp_port=smtp, settings=quiet)
    try:
        judged = settle(data, work)
    finally:
        result.last_exit = last.stop()
    result.answered = sum(len(rcpts) for rcpts in work.answered.values())
    result.mailbox_missing, result.mailbox_twice = judged["missing"], judged["twice"]
    result.valkyrie_during = json.loads(cli(data, "valkyrie", "stats", "--json").stdout)
    result.fsck_after_kills = fsck(data)

    # Valkyrie, acting at once (nothing runs meanwhile): two passes, so both disks act
    tick("valkyrie", result.kills)
    for _ in range(2):
        swept = valkyrie(data, "--slave-delay", "0", "--orphan-min-age", "0")
        result.valkyrie_passes.append(swept)
    result.fsck_after_valkyrie = fsck(data)

    # bit flips: every one is repaired from the sibling copy
    tick("bit flips", result.kills)
    roots = [data / "disks" / "0", data / "disks" / "1", root / "disk-c", root / "disk-d"]
    files = [f for disk in roots for f in stored_files(disk)]
    flipped = rng.sample(files, min(BIT_FLIPS, len(files)))
    flipped = list({f.name: f for f in flipped}.values())  # at most one copy of each key
    for f in flipped:
        raw = bytearray(f.read_bytes())
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        f.write_bytes(bytes(raw))
    result.flipped = len(flipped)
    result.valkyrie_bit_flips = valkyrie(data)
    result.repaired = sum(d["repaired"] for d in result.valkyrie_bit_flips["disks"])
    result.fsck_after_bit_flips = fsck(data)

    # a disk directory disappears: detected, the pair evacuated, two good copies afterwards
    tick("lost disk", result.kills)
    shutil.rmtree(data / "disks" / "0")
    swept = valkyrie(data)
    result.valkyrie_lost_disk = swept
    result.lost_disk_detected = any("not there" in p for d in swept["disks"] for p in d["problems"])
    cli(data, "pairs", "set-flags", "1", "service")
    done = cli(data, "pairs", "evacuate", "1", "--json", check=False)
    result.evacuate_exit = done.returncode
    if not done.stdout:
        raise HarnessError(f"pairs evacuate printed nothing:\n{done.stderr.decode()}")
    result.evacuation = json.loads(done.stdout)
    result.retire_exit = cli(data, "pairs", "retire", "1", check=False).returncode
    result.fsck_final = fsck(data)  # fsck reads both copies of every referenced file

    result.seconds = time.monotonic() - t0
    tick("done", result.kills)
    return result
