"""An hour of password guessing at one account (issue 27, item 3), against the real LoginGuard
on its real stores: 10,000 guesses from 1,000 addresses (10 each, at random moments), while
the account's owner logs in every 5 minutes four ways: from her usual address, from a new
address in her usual network, with her device token from a network never seen, and with
nothing from a network never seen (as a person would: when told "try again in N s", she
comes back N s later). Counted: the guesses whose password would be checked, and what each
of the owner's logins waited for.

Time is compressed two ways, said in the output:

- ``memory`` and ``sqlite`` (the embedded store, a real SQLite file): the stores take an
  injected clock, so the hour is simulated event by event at full length, in a second;
- ``redis`` (a real redis-server started here on a loopback port): Redis reads its own clock
  (TIME) inside each script, so every period and wait of the guard is divided by ``--scale``
  (default 100: the hour lasts 36 s) and the figures are multiplied back.

The guard's settings are pochta's defaults (``[guard]``). The password check itself (argon2)
is not run: what is counted is which attempts the guard lets through to it.

    python benchmarks/login_attack.py                 # all three stores
    python benchmarks/login_attack.py --stores sqlite --quick
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.servers

from tests.servers import RedisServer

from _common import emit, machine, note
from pochta.config import GuardSettings
from pochta.errors import RateLimited
from pochta.guard.devices import Devices
from pochta.guard.known import KnownClients
from pochta.guard.known.memory import MemoryKnownClients
from pochta.guard.known.redis import RedisKnownClients
from pochta.guard.known.sqlite import SqliteKnownClients
from pochta.guard.logins import Admission, LoginGuard
from pochta.guard.ratelimit import RateLimiter
from pochta.guard.ratelimit.memory import MemoryRateLimitBackend
from pochta.guard.ratelimit.redis import RedisRateLimitBackend
from pochta.guard.ratelimit.sqlite import SqliteRateLimitBackend
from pochta.types import Clock, Limit, Schedule

SECRET = b"benchmark-secret-0123456789abcdef"
ACCOUNT = "alice@example.org"
BINDING = "0123456789abcdef0123456789abcdef"  # her password's fingerprint
HOUR = 3600.0
USUAL = "192.0.2.10"
GIVE_UP = 1800.0  # the owner at a new network stops trying after half an hour


def guard(limits: Any, known: Any, scale: float, clock: Clock) -> LoginGuard:
    g = GuardSettings()
    return LoginGuard(
        RateLimiter(limits, SECRET, tag="login"),
        KnownClients(known, SECRET, remember_for=g.login_known_days * 86400 / scale),
        per_ip=Limit("login-ip", g.login_ip_max, g.login_ip_period / scale),
        per_client=Limit("login-client", g.login_client_max, g.login_client_period / scale),
        per_account=Schedule(
            "login-account-slots",
            free=g.login_account_free,
            checks=g.login_account_checks,
            period=g.login_account_period / scale,
            max_wait=g.login_max_wait / scale,
        ),
        per_ip_success=Limit(
            "login-ip-ok", g.login_ip_success_max, g.login_ip_success_period / scale
        ),
        devices=Devices(SECRET, g.login_known_days * 86400 / scale, clock=clock),
    )


# -- the hour, as events ------------------------------------------------------------------
@dataclass(order=True)
class Event:
    at: float  # seconds into the hour (unscaled)
    seq: int
    kind: str = field(compare=False)  # guess | usual | nearby | device | stranger | check
    ip: str = field(compare=False)
    started: float = field(compare=False, default=0.0)  # a stranger's first attempt
    admission: Admission | None = field(compare=False, default=None)
    took: float = field(compare=False, default=0.0)  # the owner: first attempt to her slot


def plan(guesses: int, addresses: int, rng: random.Random) -> list[Event]:
    seq = itertools.count()
    events = [
        Event(rng.uniform(0, HOUR), next(seq), "guess", f"10.{a // 250}.{a % 250}.1")
        for a in range(addresses)
        for _ in range(guesses // addresses)
    ]
    for k in range(12):  # the owner, every 5 minutes
        at = 150.0 + 300.0 * k
        events.append(Event(at, next(seq), "usual", USUAL))
        events.append(Event(at + 1, next(seq), "nearby", f"192.0.2.{20 + k}"))
        events.append(Event(at + 2, next(seq), "device", f"100.64.{k}.1"))
        events.append(Event(at + 3, next(seq), "stranger", f"198.51.{k}.1", at + 3))
    return sorted(events)


@dataclass
class Tally:
    guesses: int = 0
    checked: int = 0  # guesses whose password the guard let through to the check
    refused: int = 0
    checks_at: list[float] = field(default_factory=list)
    owner: dict[str, list[float]] = field(default_factory=dict)  # kind -> seconds to success
    owner_failed: dict[str, int] = field(default_factory=dict)  # kind -> gave up / refused
    stranger_tries: list[int] = field(default_factory=list)

    def summary(self, scale_note: str) -> dict[str, Any]:
        def waits(kind: str) -> dict[str, Any]:
            got = sorted(self.owner.get(kind, []))
            return {
                "logins": len(got) + self.owner_failed.get(kind, 0),
                "succeeded": len(got),
                "within_5s": sum(1 for w in got if w <= 5.0),
                "median_s": round(statistics.median(got), 2) if got else None,
                "max_s": round(got[-1], 2) if got else None,
            }

        return {
            "time": scale_note,
            "guesses": self.guesses,
            "checked": self.checked,
            "refused": self.refused,
            "checked_first_10_min": sum(1 for t in self.checks_at if t < 600),
            "owner_usual_address": waits("usual"),
            "owner_new_address_in_her_network": waits("nearby"),
            "owner_device_token_new_network": waits("device"),
            "owner_never_seen_network": {
                **waits("stranger"),
                "tries_median": statistics.median(self.stranger_tries)
                if self.stranger_tries
                else None,
            },
        }


class Hour:
    """What happens at each event; ``later(event)`` puts an event back on the queue."""

    def __init__(self, g: LoginGuard, later: Callable[[Event], None]) -> None:
        self.g = g
        self.later = later
        self.tally = Tally()
        owner = g.admit(USUAL, ACCOUNT, binding=BINDING)  # she logged in before the attack
        g.succeeded(owner)
        self.device = g.device_token(owner)

    def step(self, e: Event, now: float, scale: float) -> None:
        t = self.tally
        if e.kind == "check":  # a granted attempt's slot has come: its password is checked
            assert e.admission is not None
            if e.ip == "guess":
                t.checked += 1
                t.checks_at.append(now)
                self.g.failed(e.admission)
            else:
                self.g.succeeded(e.admission)
                t.owner.setdefault(e.ip, []).append(e.took)
            return
        if e.kind == "guess":
            t.guesses += 1
        device = self.device if e.kind == "device" else None
        start = e.started if e.kind == "stranger" else now
        try:
            a = self.g.admit(e.ip, ACCOUNT, binding=BINDING, device=device)
        except RateLimited as exc:
            if e.kind == "guess":
                t.refused += 1
            elif e.kind == "stranger" and now + exc.retry_after * scale - start < GIVE_UP:
                back = now + max(1.0, float(int(exc.retry_after * scale + 0.999)))
                self.later(Event(back, e.seq, "stranger", e.ip, start))  # "try again in N s"
            else:
                t.owner_failed[e.kind] = t.owner_failed.get(e.kind, 0) + 1
            return
        label = "guess" if e.kind == "guess" else e.kind
        took = now - start + a.wait * scale  # the guard's part (not the loop's jitter)
        self.later(Event(now + a.wait * scale, e.seq, "check", label, start, a, took))


def simulated(g: LoginGuard, clock: Any, events: list[Event]) -> Tally:
    """The hour event by event on the stores' injected clock."""
    queue = list(events)
    heapq.heapify(queue)
    seq = itertools.count(len(events))
    tries: dict[int, int] = {}

    def later(e: Event) -> None:
        e.seq = next(seq) if e.kind == "check" else e.seq
        heapq.heappush(queue, e)

    base = clock.now
    hour = Hour(g, later)
    while queue:
        e = heapq.heappop(queue)
        clock.now = base + e.at
        if e.kind == "stranger":
            tries[e.seq] = tries.get(e.seq, 0) + 1
        hour.step(e, e.at, 1.0)
    hour.tally.stranger_tries = list(tries.values())
    return hour.tally


async def realtime(g: LoginGuard, events: list[Event], scale: float) -> Tally:
    """The hour in ``HOUR / scale`` seconds of real time (the store's own clock)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    tasks: set[asyncio.Task[None]] = set()
    tries: dict[int, int] = {}

    async def at(e: Event) -> None:
        await asyncio.sleep(max(0.0, start + e.at / scale - loop.time()))
        now = (loop.time() - start) * scale
        if e.kind == "stranger":
            tries[e.seq] = tries.get(e.seq, 0) + 1
        hour.step(e, now, scale)

    def later(e: Event) -> None:
        task = asyncio.ensure_future(at(e))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    hour = Hour(g, later)
    for e in events:
        later(e)
    while tasks:
        await asyncio.gather(*list(tasks))
    hour.tally.stranger_tries = list(tries.values())
    return hour.tally


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="memory,sqlite,redis")
    parser.add_argument("--guesses", type=int, default=10_000)
    parser.add_argument("--addresses", type=int, default=1_000)
    parser.add_argument("--scale", type=float, default=100.0, help="redis: time compression")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--quick", action="store_true", help="1,000 guesses, redis at x1000")
    args = parser.parse_args()
    if args.quick:
        args.guesses, args.scale = 1_000, 1000.0
    events = plan(args.guesses, args.addresses, random.Random(args.seed))
    shown = {
        "login_ip_max",
        "login_client_max",
        "login_account_free",
        "login_account_checks",
        "login_account_period",
        "login_max_wait",
        "login_known_days",
    }
    result: dict[str, Any] = {
        "benchmark": "login_attack",
        "settings": GuardSettings().model_dump(include=shown),
    }
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        result["machine"] = machine(where)
        for store in args.stores.split(","):
            note(f"{store}: an hour of {args.guesses} guesses from {args.addresses} addresses")
            began = time.perf_counter()
            fresh = [Event(e.at, e.seq, e.kind, e.ip, e.started) for e in events]
            if store in ("memory", "sqlite"):
                clock = FakeClock()
                if store == "memory":
                    limits: Any = MemoryRateLimitBackend(clock)
                    known: Any = MemoryKnownClients(clock)
                else:
                    limits = SqliteRateLimitBackend(where / "guard-limits.sqlite3", clock=clock)
                    known = SqliteKnownClients(where / "guard-known.sqlite3", clock=clock)
                g = guard(limits, known, 1.0, clock)
                tally = simulated(g, clock, fresh)
                how = "simulated hour on an injected clock"
                g.close()
            elif store == "redis":
                server = RedisServer.start(where / "redis")
                try:
                    client = server.client()
                    limits, known = RedisRateLimitBackend(client), RedisKnownClients(client)
                    g = guard(limits, known, args.scale, time.time)
                    tally = asyncio.run(realtime(g, fresh, args.scale))
                    g.close()
                    client.close()
                finally:
                    server.stop()
                how = f"real time, every period and wait divided by {args.scale:g}"
            else:
                raise SystemExit(f"unknown store {store!r}")
            result[store] = tally.summary(how)
            result[store]["wall_seconds"] = round(time.perf_counter() - began, 1)
    emit(result)


if __name__ == "__main__":
    main()
