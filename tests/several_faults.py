"""A fault schedule on the several-machines recipe, checked like Jepsen (issue 30 item 2).

SMTP clients on the admin host deliver through both loaders (tests/several.py's ``Sender``,
which tries a letter that got no 250 again through the other loader, as a sending MTA tries
its next MX) while a scheduler, seeded and printed, applies faults one after another, each
held a few seconds and then healed; before the next one every machine is back (both loaders
answer, both nginx, the Redis Cluster is ``ok``, Patroni has a primary and a synchronous
standby). The faults, in rounds (every kind once per round, in an order the seed shuffles):

    kill loader / stop loader       SIGKILL (started again) / SIGSTOP (SIGCONT) a ``pochta serve``
    kill primary / stop primary     the PostgreSQL primary's host: its Patroni, PostgreSQL and
                                    etcd member SIGKILLed (the standby is promoted; it comes
                                    back as the standby) / its Patroni and PostgreSQL SIGSTOPped
    freeze postgres                 the primary's PostgreSQL alone SIGSTOPped (postmaster and
                                    every backend), its Patroni left awake: Patroni's own
                                    queries hang too; held at least ``FREEZE_AT_LEAST`` s, past
                                    the recipe's ``postgres.answer_timeout`` and Patroni's
                                    ``ttl``, so that both are met (whether Patroni promotes the
                                    standby meanwhile is recorded as the fault's failover)
    kill redis / stop redis         a Redis Cluster master, whichever holds slots now: SIGKILL
                                    (its replica on another host takes over; it comes back
                                    after that, as the new master's replica, copying it) /
                                    SIGSTOP (held over cluster-node-timeout, 2 s: its replica
                                    takes over too, and it is demoted when it wakes)
    kill nginx / stop nginx         a storage node's nginx, master and workers
    cut loader-db (one way, both)   nftables in the hosts' namespaces drop a loader's packets
                                    to the PostgreSQL primary (and the primary's to it)
    cut loader-node (one way, both) a loader's packets to the other host's nginx port
    cut node-pair (one way, both)   everything between the two storage hosts
    full disk                       node2's storage directory (a small tmpfs of its own, under
                                    both of its disks) filled to the last byte

A history records every SMTP answer (time, loader, letter, what came back). The checker, once
every machine is back: every letter answered 250 is in its mailbox byte for byte, none is there
twice unless its 250 was lost (a broken transaction), nothing was answered 5xx, one Valkyrie
pass over every disk finds no error, both copies of every attachment are on the two nodes,
``pochta fsck`` is clean with exact counters, the shingle counters match the letters
delivered but for what a fault may cost them (``shingle_check``).

Used by ``scripts/several-machines --faults`` (minutes of faults, a JSON summary) and by
tests/integration/test_several_machines.py (a short fixed-seed run on the recipe's machines).
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from redis.crc import key_slot

from tests import patroni
from tests.machines import (
    HTTP_PORT,
    NODE1,
    NODE2,
    NODE_PORT,
    STRANGER,
    Machines,
    settings_env,
)
from tests.nginx import children
from tests.several import (
    Job,
    Outgoing,
    Sender,
    add_users,
    byte_exact,
    check_letters,
    copies_on_both_nodes,
    corpus,
    fsck,
    fsck_problems,
)
from tests.several_failover import longest_gap

KINDS = (
    "kill loader", "stop loader", "kill primary", "stop primary", "freeze postgres", "kill redis",
    "stop redis", "kill nginx", "stop nginx", "cut loader-db", "cut loader-node", "cut node-pair",
    "full disk",
)  # fmt: skip
# a frozen PostgreSQL is held this long at least: past the recipe's answer_timeout (12 s, README)
# and Patroni's ttl (8 s), so that a step's deadline fires and Patroni's choice is seen
FREEZE_AT_LEAST = 15.0
FULL_NODE = NODE2  # the node whose storage directory is a tmpfs of its own
DISK_MB = 256  # its size: room for the test's attachments, filled by the "full disk" fault
TABLE = "pochta_fault"  # the nftables table a cut adds in a host's namespace


class FaultMachines(Machines):
    """The recipe's machines, with node2's storage directory on a tmpfs of its own (so that a
    fault can fill it: a full disk)."""

    _tmpfs: Path | None = None

    def _start_node(self, name: str) -> None:
        if name == FULL_NODE and self._tmpfs is None:
            served = self.served(name)
            served.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "pochta-full-disk", served],
                check=True, capture_output=True, timeout=30,
            )  # fmt: skip
            self._tmpfs = served
        super()._start_node(name)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            if self._tmpfs is not None:
                subprocess.run(["umount", "-l", str(self._tmpfs)], capture_output=True, timeout=30)
                self._tmpfs = None


def nft(m: Machines, host: str, script: str) -> None:
    done = m.hosts[host].run(["nft", "-f", "-"], input=script.encode(), capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"nft on {host}: {done.stderr.decode(errors='replace')}")


def cut(m: Machines, host: str, to: str, port: int | None = None) -> None:
    """Drop every packet ``host`` sends to ``to`` (to its ``port`` only, when given): rules
    in ``host``'s own namespace, as on that machine."""
    match = f"ip daddr {m.address(to)}" + (f" tcp dport {port}" if port else "")
    nft(
        m,
        host,
        f"table inet {TABLE} {{\n chain out {{\n  type filter hook output priority 0;"
        f" policy accept;\n  {match} drop\n }}\n}}\n",
    )


def heal(m: Machines, host: str) -> None:
    m.hosts[host].run(["nft", "delete", "table", "inet", TABLE], capture_output=True)


def _tree(pid: int) -> list[int]:
    """``pid`` and every descendant (a loader's worker processes)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children(p))
    return found


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def freeze(pids_of: Any, host: str) -> list[int]:
    """Every process ``pids_of(host)`` names SIGSTOPped, looked for again until no new one
    appears (the postmaster may fork a backend between the listing and its stop): the
    frozen pids, to be sent SIGCONT."""
    frozen: list[int] = []
    for _ in range(10):
        fresh = [p for p in pids_of(host) if p not in frozen]
        if not fresh:
            break
        _signal(fresh, signal.SIGSTOP)
        frozen += fresh
    return frozen


class LeaderWatch:
    """While a fault is held: whether, and how many seconds after ``began``, Patroni names a
    running leader other than ``old`` (asked every 0.5 s)."""

    def __init__(self, cluster: Any, old: str, began: float) -> None:
        self.cluster, self.old, self.began = cluster, old, began
        self.new: str | None = None
        self.after: float | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="leader-watch")

    def _run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(Exception):  # a member that does not answer: ask again
                leader = self.cluster.leader()
                if leader is not None and leader != self.old:
                    self.new, self.after = leader, time.monotonic() - self.began
                    return
            self.stop.wait(0.5)

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> float | None:
        self.stop.set()
        self.thread.join(timeout=30)
        return self.after


@dataclass
class Fault:
    kind: str
    target: str  # what it hit, in words
    seconds: float  # how long it is held
    both: bool = False  # a cut in both directions
    began: float = 0.0  # monotonic
    healed: float = 0.0
    back: float = 0.0  # every machine back
    failover_seconds: float | None = None  # the primary (a master) lost: to its successor
    slots: list[tuple[int, int]] | None = None  # a Redis master's: the slots it served
    error: str = ""
    answers: Counter[str] | None = None  # the clients' answers from its start to all back
    slowest: float = 0.0  # the longest an SMTP transaction under way while held waited

    def line(self, t0: float) -> str:
        way = (" both ways" if self.both else " one way") if self.kind.startswith("cut") else ""
        text = (
            f"{self.began - t0:6.1f}s {self.kind}{way}: {self.target}, held"
            f" {self.healed - self.began:.1f} s, all back at {self.back - t0:.1f}s"
        )
        if self.failover_seconds is not None:
            text += f" (promoted after {self.failover_seconds:.1f} s)"
        if self.answers is not None:
            text += "; answers " + ", ".join(f"{k} x{n}" for k, n in sorted(self.answers.items()))
            text += f", the slowest after {self.slowest:.1f} s"
        return text + (f" ERROR {self.error}" if self.error else "")


class Scheduler:
    """Faults one after another, from ``random.Random(seed)``: every kind once per round, in a
    shuffled order; targets and durations drawn too. ``say`` prints each as it happens."""

    def __init__(
        self,
        machines: Machines,
        seed: int,
        say: Any = print,
        longest: float = 8.0,
        kinds: tuple[str, ...] = KINDS,
        freeze_at_least: float = FREEZE_AT_LEAST,
    ) -> None:
        self.m = machines
        self.longest = longest
        self.freeze_at_least = freeze_at_least
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
        self.kinds = [
            k for k in KINDS
            if k in kinds and (k != "full disk" or isinstance(machines, FaultMachines))
        ]  # fmt: skip
        self.rng = random.Random(seed)
        self.round: list[str] = []
        self.say = say
        self.done: list[Fault] = []

    def next_kind(self) -> str:
        if not self.round:
            self.round = list(self.kinds)
            self.rng.shuffle(self.round)
        return self.round.pop(0)

    def run_one(self, t0: float) -> Fault:
        kind = self.next_kind()
        fault = Fault(kind, "", round(self.rng.uniform(2.0, self.longest), 1))
        fault.both = self.rng.random() < 0.5
        undo = self._apply(fault)
        fault.began = fault.began or time.monotonic()
        self.say(f"{fault.began - t0:6.1f}s {kind}: {fault.target}, to hold {fault.seconds} s")
        time.sleep(max(0.0, fault.began + fault.seconds - time.monotonic()))
        try:
            undo()
        except Exception as exc:  # the harness's own trouble: recorded, the run goes on
            fault.error = f"healing: {type(exc).__name__}: {exc}"
        fault.healed = time.monotonic()
        try:
            self.wait_back()
        except Exception as exc:
            fault.error += f" not back: {exc}"
        fault.back = time.monotonic()
        self.say(fault.line(t0))
        self.done.append(fault)
        return fault

    # -- the faults -------------------------------------------------------------------------
    def _apply(self, f: Fault) -> Any:
        m, rng = self.m, self.rng
        loader = rng.choice((NODE1, NODE2))
        other = NODE2 if loader == NODE1 else NODE1
        if f.kind == "kill loader":
            f.target = f"loader {loader}"
            f.began = time.monotonic()
            m.loaders[loader].stop(signal.SIGKILL)
            return lambda: m._start_loader(loader, wait=False)
        if f.kind == "stop loader":
            proc = m.loaders[loader].proc
            assert proc is not None
            pids = _tree(proc.pid)
            f.target = f"loader {loader} ({len(pids)} processes)"
            f.began = time.monotonic()
            _signal(pids, signal.SIGSTOP)
            return lambda: _signal(pids, signal.SIGCONT)
        if f.kind in ("kill primary", "stop primary"):
            cluster = m.patroni
            assert cluster is not None
            old = cluster.wait_leader(timeout=60)
            f.target = f"PostgreSQL primary {old}"
            f.began = time.monotonic()
            if f.kind == "kill primary":
                cluster.kill(old)
                new = cluster.wait_leader(not_=old, timeout=120)
                f.failover_seconds = time.monotonic() - f.began
                f.target += f" (standby {new} promoted)"
                return lambda: cluster.restart(old)
            pids = cluster._postgres_pids(old)
            member = cluster.patroni[old].proc
            pids += [member.pid] if member is not None else []
            _signal(pids, signal.SIGSTOP)
            return lambda: _signal(pids, signal.SIGCONT)
        if f.kind == "freeze postgres":
            cluster = m.patroni
            assert cluster is not None
            old = cluster.wait_leader(timeout=60)
            f.seconds = max(f.seconds, self.freeze_at_least)
            f.began = time.monotonic()
            frozen = freeze(cluster._postgres_pids, old)
            f.target = f"PostgreSQL on primary {old} ({len(frozen)} processes; Patroni awake)"
            watch = LeaderWatch(cluster, old, f.began)
            watch.start()

            def thaw() -> None:
                _signal(frozen, signal.SIGCONT)
                promoted = watch.finish()
                if promoted is not None:
                    f.failover_seconds = promoted
                    f.target += f" (standby {watch.new} promoted)"
                else:
                    f.target += " (no failover)"

            return thaw
        if f.kind in ("kill redis", "stop redis"):
            ranges = m.admin(m.redis_slots)
            masters = sorted({master for _, _, master, _ in ranges})
            lost = rng.choice(masters)
            server = m.redis_servers()[lost]
            f.slots = [(a, b) for a, b, master, _ in ranges if master == lost]
            host = next(n for n, h in m.hosts.items() if h.address == lost[0])
            f.target = f"Redis master {lost[0]}:{lost[1]} on {host}"
            f.began = time.monotonic()
            if f.kind == "kill redis":
                server.stop(signal.SIGKILL)
                # its replica takes over its slots (cluster-node-timeout, then an election);
                # the server comes back only then, as that replica's replica (started
                # before, empty, it would still be their master, and its replica would copy
                # its empty data set: Redis Cluster's own rule for a master without
                # persistence)
                f.failover_seconds = wait_redis_failover(m, lost, f.slots[0][0])
                f.target += " (its replica promoted)"
                return server.start
            assert server.proc is not None
            pid = server.proc.pid
            os.kill(pid, signal.SIGSTOP)
            return lambda: os.kill(pid, signal.SIGCONT)
        if f.kind in ("kill nginx", "stop nginx"):
            node = rng.choice((NODE1, NODE2))
            f.target = f"nginx on {node}"
            f.began = time.monotonic()
            if f.kind == "kill nginx":
                m.stop_node(node)
                return lambda: m.start_node(node)
            proc = m.nodes[node].proc
            assert proc is not None
            pids = _tree(proc.pid)
            _signal(pids, signal.SIGSTOP)
            return lambda: _signal(pids, signal.SIGCONT)
        if f.kind.startswith("cut"):
            if f.kind == "cut loader-db":
                cluster = m.patroni
                assert cluster is not None
                a, b, port = loader, cluster.wait_leader(timeout=60), None
                f.target = f"loader {a} / PostgreSQL primary {b}"
            elif f.kind == "cut loader-node":
                a, b, port = loader, other, NODE_PORT
                f.target = f"loader {a} / nginx on {b}"
            else:
                a, b, port = NODE1, NODE2, None
                f.target = f"storage hosts {a} / {b}"
            f.began = time.monotonic()
            cut(m, a, b, port)
            if f.both:
                cut(m, b, a, None)  # the answers too (a port cut: every packet back)
            return lambda: (heal(m, a), heal(m, b))
        if f.kind == "full disk":
            served = m.served(FULL_NODE)
            filler = served / ".filler"
            f.target = f"{FULL_NODE}'s storage directory ({DISK_MB} MB tmpfs)"
            f.began = time.monotonic()
            with filler.open("wb") as out, contextlib.suppress(OSError):  # ENOSPC: full
                chunk = b"\0" * (1 << 20)
                while True:
                    out.write(chunk)
            with contextlib.suppress(OSError), filler.open("ab") as out:
                while True:  # the last bytes too
                    out.write(b"\0" * 4096)
                    out.flush()
            return lambda: filler.unlink(missing_ok=True)
        raise AssertionError(f.kind)

    # -- every machine back -----------------------------------------------------------------
    def wait_back(self, timeout: float = 180.0) -> None:
        m = self.m
        for loader in m.loaders.values():
            if loader.alive():
                loader.wait_ready(timeout)
        for node in m.nodes.values():
            if not node.alive():
                raise RuntimeError(f"{node.name} is not running")
            node.wait_ready(timeout)
        deadline = time.monotonic() + timeout
        while not m.admin(m.redis_healthy):
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not come back")
            time.sleep(0.2)
        if m.patroni is not None:
            m.patroni.wait_leader(timeout=timeout)
            m.patroni.wait_sync(timeout=timeout)


def wait_redis_failover(
    m: Machines, lost: tuple[str, int], slot: int, timeout: float = 60.0
) -> float:
    """Seconds until ``slot`` (one of the master ``lost``'s) has another master."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        with contextlib.suppress(RuntimeError):
            ranges = m.admin(m.redis_slots)
            if any(a <= slot <= b and master != lost for a, b, master, _ in ranges):
                return time.monotonic() - began
        time.sleep(0.1)
    raise RuntimeError(f"no replica of {lost} took over within {timeout:g} s")


# -- the clients and their history ----------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    at: float  # monotonic
    loader: str  # its address ("" when the connection itself failed: no loader answered)
    letter: str
    what: str  # "250", "451", ..., or the exception a broken or refused try met
    rcpts: int
    took: float = 0.0  # seconds from the transaction's start to this answer (0: no connection)


class PacedSender(Sender):
    """``Sender`` at a steady pace (``rate`` new letters a second, so that the corpus lasts
    the fault phase), recording every answer; :meth:`finish` stops handing out new letters
    (those tried already are tried until they get their 250)."""

    def __init__(self, machines: Machines, letters: list[Outgoing], threads: int, rate: float):
        super().__init__(machines, letters, threads, timeout=24 * 3600)
        self.rate = rate
        self.next_at = time.monotonic()
        self.history: list[Answer] = []
        self.finishing = False
        self.local = threading.local()
        self.fresh = len(letters)  # letters not handed out yet
        self.ran_out: float | None = None  # monotonic: when the last one was

    def _take(self) -> Job | None:
        job = super()._take()
        if job is not None and job.attempts == 0:
            with self._lock:
                self.fresh -= 1
                if self.fresh == 0:
                    self.ran_out = time.monotonic()
                wait = self.next_at - time.monotonic()
                self.next_at = max(self.next_at, time.monotonic()) + 1.0 / self.rate
            if wait > 0:
                time.sleep(wait)
        return job

    def finish(self) -> None:
        with self._lock:
            self.finishing = True
            fresh = [entry for entry in self._queue if entry[2].attempts == 0]
            self._queue = [entry for entry in self._queue if entry[2].attempts > 0]
            heapq.heapify(self._queue)
            self._open -= len(fresh)
            self._lock.notify_all()

    def _try(self, connections: Any, target: str, smtp: Any, job: Job) -> Any:
        self.local.target = target
        self.local.began = began = time.monotonic()
        try:
            accepted, again = super()._try(connections, target, smtp, job)
        finally:
            self.local.target = ""
        if accepted:
            with self._lock:
                now = time.monotonic()
                answer = Answer(now, target, job.letter.id, "250", len(accepted), now - began)
                self.history.append(answer)
        return accepted, again

    def _failed(self, what: str, job: Job, code: int) -> None:
        super()._failed(what, job, code)
        with self._lock:
            now = time.monotonic()
            target = getattr(self.local, "target", "")
            took = now - self.local.began if target else 0.0
            self.history.append(Answer(now, target, job.letter.id, what, 1, took))


# -- an attacker guessing a password all along ------------------------------------------------
class Guesser:
    """From the stranger's host (no certificate, no account), wrong passwords for one mailbox
    over HTTPS, at both loaders in turn, ``rate`` a second, for the whole run: the answers by
    status (401: a password was checked and the failure counted, 429: limited, 503: the
    limits unreachable, so nothing checked)."""

    def __init__(self, m: Machines, email: str, rate: float = 2.0) -> None:
        self.m, self.email, self.rate = m, email, rate
        self.answers: Counter[str] = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: m.hosts[STRANGER].call(self._run))

    def _run(self) -> None:
        tls = self.m.client_tls()
        urls = [f"https://{self.m.address(n)}:{HTTP_PORT}/v1/session" for n in (NODE1, NODE2)]
        i = 0
        while not self.stop.wait(1.0 / self.rate):
            i += 1
            body = {"email": self.email, "password": f"guess number {i}"}
            try:
                r = httpx.post(urls[i % 2], json=body, timeout=10, verify=tls)
                self.answers[str(r.status_code)] += 1
            except httpx.HTTPError as exc:
                self.answers[type(exc).__name__] += 1

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> Counter[str]:
        self.stop.set()
        self.thread.join()
        return self.answers


# -- the shingle counters against the truth ---------------------------------------------------
SLACK = 2.0  # seconds around a fault's window: an answer's time is not its count's


def delivery_counts(traces: list[bytes]) -> tuple[int, bool]:
    """From what pochta prepended to each stored copy of one letter: how many deliveries
    (SMTP transactions: queue ids) counted its shingles as ham (a whole ham verdict: pochta's
    ``Counting``), and whether that is known (False: a delivery's verdict was spam, which is
    counted only when the content alone is sure, so the truth is not known from outside)."""
    counted: set[str] = set()
    for added in traces:
        text = added.decode("ascii", "replace").replace("\r\n\t", " ").replace("\r\n ", " ")
        lines = text.split("\r\n")
        spam = next(v for v in lines if v.startswith("X-Pochta-Spam:"))
        verdict = spam.split(":", 1)[1].split(";", 1)[0].strip()
        words = next(v for v in lines if v.startswith("Received:")).split()
        queue = words[words.index("id", words.index("(pochta)")) + 1]
        if verdict == "spam":
            return 0, False
        if verdict == "ham" and " partial=" not in spam:
            counted.add(queue)
    return len(counted), True


def subjects(sent: list[Outgoing]) -> dict[str, int]:
    """The letters with a subject of their own in ``sent`` (type 8: one shingle, one letter):
    letter id -> the subject shingle's hash."""
    from pochta.antispam.shingles.extract import extract
    from pochta.antispam.shingles.registry import ShingleType
    from pochta.mime.letter import parse

    by_ref: dict[int, list[str]] = {}
    for letter in sent:
        for sh in extract(parse(letter.raw)):
            if sh.type == ShingleType.SUBJECT:
                by_ref.setdefault(sh.ref.hash, []).append(letter.id)
    return {ids[0]: h for h, ids in by_ref.items() if len(ids) == 1}


def ham_counts(m: Machines, own: dict[str, int]) -> dict[str, int]:
    """Each letter's subject shingle's ham counter over 14 days, asked of node1's loader as a
    service would (``/v1/shingles/query``)."""
    from pochta.antispam.shingles.registry import ShingleType

    ids = sorted(own)
    base = f"https://{m.address(NODE1)}:{HTTP_PORT}"
    token = {"Authorization": f"Bearer {settings_env()['POCHTA_SERVICE_TOKEN']}"}
    counted: dict[str, int] = {}

    def ask() -> None:
        with httpx.Client(base_url=base, timeout=60, verify=m.client_tls()) as http:
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                body = {
                    "windows": ["14d"],
                    "shingles": [
                        {"type": int(ShingleType.SUBJECT), "hash": f"{own[k]:x}"} for k in chunk
                    ],
                }
                r = http.post("/v1/shingles/query", json=body, headers=token)
                r.raise_for_status()
                for k, got in zip(chunk, r.json()["shingles"], strict=True):
                    counted[k] = int(got["counters"]["14d"]["ham"])

    m.admin(ask)
    return counted


def shingle_check(
    m: Machines,
    own: dict[str, int],
    before: dict[str, int],
    traces: dict[str, list[bytes]],
    history: list[Answer],
    faults: list[Fault],
) -> tuple[dict[str, Any], list[str]]:
    """The shingle counters against the truth, once every machine is back and every buffer
    flushed: for each letter with a subject of its own (``subjects``) that was stored, how
    much its ham counter grew since ``before`` (the run's start: the machines may have
    counted the same subject before) against the number of its deliveries that counted it
    (the stored copies' verdicts and queue ids). Counters are written by each loader's buffer
    at most ``shingles.flush_interval`` after the letter (and at least once: a batch whose
    reply was lost is written again). So a count may be short only for a letter answered
    within that interval before its loader was SIGKILLed, or before the Redis master holding
    it was killed (its replica copies asynchronously); and over only for a letter answered
    while a fault could cut a batch's reply (Redis stopped, killed or cut off). Anything else
    is a problem."""
    from pochta.antispam.shingles.counters.buckets import shard_of, tag

    flush = float(settings_env().get("POCHTA_SHINGLES__FLUSH_INTERVAL", "1.0"))
    truth: dict[str, int] = {}
    unknown = 0
    for letter_id in own:
        if letter_id not in traces:
            continue
        n, known = delivery_counts(traces[letter_id])
        if known:
            truth[letter_id] = n
        else:
            unknown += 1
    ids = sorted(truth)
    time.sleep(3 * flush)  # every loader's buffer written
    after = ham_counts(m, {k: own[k] for k in ids})
    counted = {k: after[k] - before[k] for k in ids}
    answers: dict[str, list[Answer]] = {}
    for a in history:
        answers.setdefault(a.letter, []).append(a)
    Window = tuple[float, float, str, list[tuple[int, int]] | None]
    loses: list[Window] = []  # (start, end, the loader's address or "", the slots or None)
    doubles: list[Window] = []
    for f in faults:
        if f.kind == "kill loader":
            loader = f.target.split()[-1]
            loses.append((f.began - flush - SLACK, f.back, m.address(loader), None))
        if f.kind == "kill redis":  # what its replica had not copied yet (asynchronous)
            loses.append((f.began - flush - SLACK, f.back, "", f.slots))
        # a batch's reply lost: Redis stopped or killed, or a cut that drops a loader's
        # packets to a host with Redis servers (loader-db: the db host runs two; node-pair,
        # and loader-node both ways: the way back is every packet between the two hosts)
        cuts_redis = f.kind in ("cut loader-db", "cut node-pair") or (
            f.kind == "cut loader-node" and f.both
        )
        if f.kind in ("kill redis", "stop redis") or cuts_redis:
            doubles.append((f.began - flush - SLACK, f.back + SLACK, "", None))

    def within(letter_id: str, windows: list[Window]) -> bool:
        slot = key_slot(tag(shard_of(own[letter_id])).encode())
        for a in answers.get(letter_id, []):
            for start, end, loader, slots in windows:
                if not start <= a.at <= end or loader not in ("", a.loader):
                    continue
                if slots is None or any(lo <= slot <= hi for lo, hi in slots):
                    return True
        return False

    problems: list[str] = []
    short = over = 0
    for k in ids:
        got, want = counted[k], truth[k]
        if got != want:
            short += got < want
            over += got > want
            if not within(k, loses if got < want else doubles):
                problems.append(
                    f"shingles: letter {k}'s subject counted {got} times as ham, {want}"
                    " deliveries counted it, and no fault explains the difference"
                )
    summary = {
        "letters": len(ids),
        "exact": len(ids) - short - over,
        "short": short,  # within flush_interval before its loader was killed, or its master
        "over": over,  # a batch's reply lost (Redis stopped, killed or cut off): written again
        "unexplained": len(problems),
        "unknown": unknown,  # a delivery's verdict was spam: whether it counted is not known
        "deliveries_counted": sum(truth.values()),
        "counted": sum(counted.values()),
    }
    return summary, problems


# -- the run and the checker ----------------------------------------------------------------
def valkyrie_pass(m: Machines) -> tuple[dict[str, Any], list[str]]:
    """One whole pass over every disk (``pochta valkyrie run --once`` from the admin host),
    the storage hosts' own Valkyries stopped meanwhile (each holds its disk: a second one
    would skip it as busy) and started again after: the totals, and the problems."""
    for v in m.valkyries:
        v.stop(signal.SIGTERM, timeout=30)
    try:
        done = m.pochta("valkyrie", "run", "--once", "--json", check=False, timeout=900)
    finally:
        for v in m.valkyries:
            v.start()
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        return {}, [f"valkyrie --once: exit {done.returncode}: {done.stderr.decode()[-500:]}"]
    problems = [
        f"valkyrie: {d['disk']}: {'busy' if d['busy'] else 'pass not complete'}"
        for d in report["disks"]
        if d["busy"] or not d["complete"]
    ]
    problems += [f"valkyrie: {d['disk']}: {p}" for d in report["disks"] for p in d["problems"]]
    if report["errors"]:
        problems.append(f"valkyrie: {report['errors']} errors")
    totals: Counter[str] = Counter()
    for d in report["disks"]:
        totals.update({k: v for k, v in d.items() if type(v) is int and k not in ("pair", "index")})
    return {"disks": len(report["disks"]), **totals}, problems


def run(
    machines: Machines,
    *,
    seed: int = 30,
    seconds: float = 90.0,
    letters: int | None = None,
    mailboxes: int = 8,
    threads: int = 4,
    rate: float = 4.0,
    max_faults: int | None = None,
    say: Any = print,
    history: Path | None = None,
    longest: float = 8.0,
    kinds: tuple[str, ...] = KINDS,
    freeze_at_least: float = FREEZE_AT_LEAST,
) -> dict[str, Any]:
    """Faults for ``seconds`` (or ``max_faults`` of them, each held 2 s to ``longest``, of
    ``kinds`` only) under ``rate`` letters a second; a JSON-ready summary whose ``problems``
    must be empty."""
    boxes = [f"faults{i:02d}@example.org" for i in range(mailboxes)]
    add_users(machines, boxes)
    n = letters or int(rate * seconds * 1.5) + 50
    sent = corpus(n, boxes, seed=seed + 1000)
    scheduler = Scheduler(machines, seed, say, longest, kinds, freeze_at_least)
    say(
        f"fault schedule: seed {seed}, {seconds:g} s, faults held 2-{longest:g} s,"
        f" {rate:g} letters/s, {threads} clients"
    )
    own = subjects(sent)
    before = ham_counts(machines, own)  # machines used before may have counted these subjects
    sender = PacedSender(machines, sent, threads, rate)
    guesser = Guesser(machines, boxes[-1])
    t0 = time.monotonic()
    thread = sender.start()
    guesser.start()
    time.sleep(2.0)  # letters flowing before the first fault
    while time.monotonic() - t0 < seconds and thread.is_alive():
        if max_faults is not None and len(scheduler.done) >= max_faults:
            break
        scheduler.run_one(t0)
        time.sleep(scheduler.rng.uniform(0.5, 2.0))
    faults_end = time.monotonic()
    guesses = guesser.finish()
    sender.finish()
    for f in scheduler.done:
        during = [a for a in sender.history if f.began <= a.at <= f.back]
        f.answers = Counter(a.what for a in during)
        # the transactions under way while it was held, whenever their answers came
        met = [a for a in sender.history if a.at >= f.began and a.at - a.took <= f.healed]
        f.slowest = max((a.took for a in met), default=0.0)
    for name in (NODE1, NODE2):  # a loader killed by the last fault is back by now
        machines.loaders[name].wait_ready(180)
    thread.join(timeout=600)
    delivered_at = time.monotonic()
    delivery = sender.result
    if history is not None:  # every answer, one JSON line each, seconds since the start
        with history.open("w") as out:
            for a in sender.history:
                line = {"t": round(a.at - t0, 3), "loader": a.loader, "letter": a.letter}
                line["answer"] = a.what
                out.write(json.dumps({**line, "rcpts": a.rcpts, "took": round(a.took, 3)}) + "\n")
    problems = [f"{f.kind} {f.target}: {f.error}" for f in scheduler.done if f.error]
    # the login limits never fail open: the wrong passwords checked (401) stay within the
    # client's limit, given again at most each time the master holding them was killed (its
    # replica copies asynchronously: it may miss the last failures) and refilled by the
    # rolling period
    per_client = int(settings_env().get("POCHTA_GUARD__LOGIN_CLIENT_MAX", "10"))
    login = key_slot(b"login")
    emptied = sum(
        1
        for f in scheduler.done
        if f.kind == "kill redis" and any(a <= login <= b for a, b in f.slots or [])
    )
    allowed = per_client * (1 + emptied) + per_client * (faults_end - t0) / 3600 + 1
    if guesses["401"] > allowed:
        problems.append(f"{guesses['401']} wrong passwords checked, at most {allowed:.0f} allowed")
    if thread.is_alive():
        problems.append("the clients did not finish within 600 s of the last fault")
    traces: dict[str, list[bytes]] = {}
    stored, found = byte_exact(machines, NODE1, sent, boxes, traces)
    problems += found
    problems += check_letters(sent, delivery, stored)
    problems += delivery.permanent  # a 5xx
    swept, found = valkyrie_pass(machines)
    problems += found
    accepted_ids = {letter_id for letter_id, _ in delivery.accepted}
    contents = {c for m in sent if m.id in accepted_ids for c in m.attachments}
    problems += copies_on_both_nodes(machines, contents)
    checked = fsck(machines)
    problems += fsck_problems("fsck", checked)
    try:
        shingles, found = shingle_check(
            machines, own, before, traces, sender.history, scheduler.done
        )
    except Exception as exc:  # the checker's own trouble: said, the summary kept
        shingles, found = {}, [f"shingle check: {type(exc).__name__}: {exc}"]
    problems += found
    lost = [k for k in delivery.accepted if stored[k] == 0]
    duplicated = {k: c for k, c in stored.items() if c > 1}
    codes = Counter(a.what for a in sender.history)
    failovers = [f.failover_seconds for f in scheduler.done if f.failover_seconds is not None]
    # no 250 is looked for after the last letter was handed out (a fault whose machines took
    # long to come back can outlast the corpus): until then, or the faults' end
    gaps_until = min(faults_end, sender.ran_out or faults_end)
    return {
        "seed": seed,
        "patroni": patroni.describe(),
        "fault_seconds": round(faults_end - t0, 1),
        "faults_applied": len(scheduler.done),
        "faults": Counter(f.kind for f in scheduler.done),
        "timeline": [f.line(t0) for f in scheduler.done],
        "letters_sent": len({a.letter for a in sender.history}),
        "deliveries_accepted": len(delivery.accepted),  # (letter, mailbox) answered 250
        "answers": dict(codes),
        "deliveries_stored": sum(stored.values()),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "duplicated_after_a_lost_250": sum(1 for k in duplicated if delivery.broken[k]),
        "broken_transactions": sum(delivery.broken.values()),
        "longest_without_250_seconds": round(
            longest_gap(delivery.accepted_at, t0 + 2.0, gaps_until), 1
        ),
        "slowest_answer_seconds": round(max((a.took for a in sender.history), default=0.0), 1),
        "failover_seconds": [round(s, 1) for s in failovers],
        "guesses": dict(guesses),  # by HTTP status: 401 checked, 429 limited, 503 unavailable
        "login_shard_emptied": emptied,
        "attachments_checked": len(contents),
        "valkyrie_pass": swept,
        "fsck": {k: (len(v) if isinstance(v, list) else v) for k, v in checked.items()},
        "shingles": shingles,
        "deliver_seconds": round(delivered_at - t0, 1),
        "problems": problems,
    }


def main(
    seed: int,
    minutes: float,
    threads: int,
    mailboxes: int,
    base: Path,
    longest: float = 8.0,
    kinds: tuple[str, ...] = KINDS,
    freeze_at_least: float = FREEZE_AT_LEAST,
) -> int:
    """``scripts/several-machines --faults``: the machines, the schedule, a JSON summary."""
    import sys

    started = time.monotonic()
    machines = FaultMachines.start(base / "machines", failover=True)
    try:
        up = time.monotonic() - started

        def say(line: str) -> None:
            print(line, file=sys.stderr, flush=True)

        summary = run(
            machines, seed=seed, seconds=minutes * 60, threads=threads, mailboxes=mailboxes,
            say=say, history=base / "history.jsonl", longest=longest, kinds=kinds,
            freeze_at_least=freeze_at_least,
        )  # fmt: skip
        summary = {"setup_seconds": round(up, 1), **summary}
        summary["total_seconds"] = round(time.monotonic() - started, 1)
        summary["dir"] = str(base)
        print(json.dumps(summary, indent=2))
        return 1 if summary["problems"] else 0
    finally:
        machines.stop()
