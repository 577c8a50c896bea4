"""The server's shared DNS (``auth.asyncdns.SharedDns``) and its breaker, on the in-memory
fake (``AsyncFixture``): one question in flight per name, a bound on questions out at once,
and a server that never answers costing a letter nothing once it is found out, while a
sender's silent name servers alone never trip it. dnspython against a real server (nsd) and a
silent socket: tests/integration/antispam/test_dns_server.py."""

from __future__ import annotations

import asyncio
import time

import pytest

from pochta.antispam.auth.asyncdns import SharedDns
from pochta.antispam.auth.breaker import Breaker
from pochta.antispam.auth.resolver import AsyncFixture, DnsTempError, FixtureResolver, RType

ZONE = FixtureResolver({"example.org": {"TXT": ["v=spf1 -all"]}})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- the breaker (pure) -------------------------------------------------------------------
def test_timeouts_in_a_row_make_the_server_suspect_and_a_reply_resets_them() -> None:
    b = Breaker(after=3, pause=10, clock=Clock())
    b.timed_out()
    b.timed_out()
    b.replied()
    b.timed_out()
    b.timed_out()
    assert (b.state, b.take_probe()) == ("up", False)
    b.timed_out()
    assert b.state == "suspect" and b.allows()  # questions still go out meanwhile
    assert b.take_probe() and not b.take_probe()  # one probe at a time


def test_a_probe_unanswered_puts_it_down_then_every_pause_one_probe_until_one_answers() -> None:
    clock = Clock()
    b = Breaker(after=1, pause=10, clock=clock)
    b.timed_out()
    assert b.take_probe()
    b.probed(replied=False)
    assert (b.state, b.allows(), b.downs) == ("down", False, 1)
    clock.now += 9.9
    assert not b.take_probe()
    clock.now += 0.2
    assert b.take_probe()
    b.probed(replied=False)
    assert (b.state, b.downs) == ("down", 1)
    clock.now += 10
    assert b.take_probe()
    b.probed(replied=True)
    assert (b.state, b.allows(), b.streak) == ("up", True, 0)


def test_a_probe_that_answers_keeps_it_up() -> None:
    b = Breaker(after=2, pause=5, clock=Clock())
    b.timed_out()
    b.timed_out()
    assert b.take_probe()
    b.probed(replied=True)
    assert (b.state, b.allows(), b.downs) == ("up", True, 0)


def test_bad_breaker_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="after must be"):
        Breaker(after=0)
    with pytest.raises(ValueError, match="pause positive"):
        Breaker(pause=0)


# -- SharedDns ----------------------------------------------------------------------------
def test_letters_asking_the_same_question_together_share_one() -> None:
    async def go() -> None:
        fake = AsyncFixture(ZONE, delay=0.05)
        dns = SharedDns(fake, timeout=1.0)
        answers = await asyncio.gather(*(dns.query("Example.org.", "TXT", 1.0) for _ in range(20)))
        assert answers == [["v=spf1 -all"]] * 20
        assert (fake.asked, dns.asked, dns.shared) == (1, 1, 19)
        await dns.query(
            "example.org", "TXT", 1.0
        )  # landed: a new question (the cache is dnspython's)
        assert fake.asked == 2

    asyncio.run(go())


def test_at_most_max_in_flight_questions_are_out_at_once() -> None:
    out = peak = 0

    class Counting(AsyncFixture):
        async def query(self, name: str, rtype: RType, timeout: float) -> list[str]:
            nonlocal out, peak
            out += 1
            peak = max(peak, out)
            try:
                return await super().query(name, rtype, timeout)
            finally:
                out -= 1

    async def go() -> None:
        dns = SharedDns(Counting(ZONE, delay=0.02), timeout=1.0, max_in_flight=3)
        await asyncio.gather(*(dns.query(f"n{i}.example.org", "A", 2.0) for i in range(12)))

    asyncio.run(go())
    assert peak == 3


def test_a_caller_waits_only_its_own_time_and_the_question_goes_on_for_others() -> None:
    async def go() -> None:
        fake = AsyncFixture(ZONE, delay=0.2)
        dns = SharedDns(fake, timeout=1.0)
        patient = asyncio.ensure_future(dns.query("example.org", "TXT", 1.0))
        t0 = time.monotonic()
        with pytest.raises(DnsTempError, match="within the letter's time"):
            await dns.query("example.org", "TXT", 0.05)
        assert time.monotonic() - t0 < 0.15
        assert await patient == ["v=spf1 -all"] and fake.asked == 1

    asyncio.run(go())


def test_a_server_that_never_answers_costs_nothing_once_found_out() -> None:
    async def go() -> None:
        fake = AsyncFixture(ZONE, dead=True)
        dns = SharedDns(fake, timeout=0.1, breaker=Breaker(after=3, pause=0.3))
        for i in range(3):  # three timeouts in a row; then the probe, unanswered
            with pytest.raises(DnsTempError):
                await dns.query(f"n{i}.example.org", "TXT", 1.0)
        await asyncio.sleep(0.2)  # the probe's own timeout
        assert fake.probes == 1 and not dns.breaker.allows()
        asked = fake.asked
        t0 = time.monotonic()
        for i in range(100):
            with pytest.raises(DnsTempError, match="not answering"):
                await dns.query(f"m{i}.example.org", "TXT", 1.0)
        assert time.monotonic() - t0 < 0.05  # 100 letters' questions: at once, none sent
        assert fake.asked == asked and dns.refused == 100
        fake.dead = False  # the server is back: the next probe (after pause) finds it
        await asyncio.sleep(0.35)
        with pytest.raises(DnsTempError):
            await dns.query("example.org", "TXT", 1.0)  # still down: this one starts a probe
        await asyncio.sleep(0.05)
        assert dns.breaker.allows()
        assert await dns.query("example.org", "TXT", 1.0) == ["v=spf1 -all"]

    asyncio.run(go())


def test_a_senders_silent_name_servers_do_not_trip_it() -> None:
    """Timeouts of one sender's names alone: the probe of the server answers, so every other
    letter's questions still go out (a stranger cannot switch DMARC off for everyone)."""

    async def go() -> None:
        fake = AsyncFixture(ZONE, silent=[f"n{i}.evil.example" for i in range(10)])
        dns = SharedDns(fake, timeout=0.05, breaker=Breaker(after=3, pause=10))
        await asyncio.gather(
            *(dns.query(f"n{i}.evil.example", "TXT", 1.0) for i in range(10)),
            return_exceptions=True,
        )
        await asyncio.sleep(0.01)
        assert fake.probes >= 1 and dns.breaker.allows() and dns.breaker.downs == 0
        assert await dns.query("example.org", "TXT", 1.0) == ["v=spf1 -all"]

    asyncio.run(go())
