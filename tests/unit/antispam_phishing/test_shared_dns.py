"""The server's shared DNS (``auth.asyncdns.SharedDns``) and its breaker, on the in-memory
fake (``AsyncFixture``): one question in flight per name, dropped once no letter waits on it,
bounds on questions out at once (in all and per zone) and on the queue, and a server that
never answers costing a letter nothing once it is found out, while a sender's silent name
servers alone never trip it. dnspython against a real server (nsd) and a silent socket:
tests/integration/antispam/test_dns_server.py. These tests count calls, not seconds: CI runs
them on a loaded machine."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from pochta import metrics
from pochta.antispam.auth.asyncdns import SharedDns, zone_of
from pochta.antispam.auth.breaker import Breaker
from pochta.antispam.auth.resolver import AsyncFixture, DnsTempError, FixtureResolver, RType

ZONE = FixtureResolver({"example.org": {"TXT": ["v=spf1 -all"]}})


class Counting(AsyncFixture):
    """The fake, counting the questions out at once (``out``, ``peak``) and by zone."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.out = self.peak = 0
        self.zones: dict[str, int] = {}
        self.zone_peak: dict[str, int] = {}

    async def query(self, name: str, rtype: RType, timeout: float) -> list[str]:
        zone = zone_of(name)
        self.out += 1
        self.peak = max(self.peak, self.out)
        self.zones[zone] = self.zones.get(zone, 0) + 1
        self.zone_peak[zone] = max(self.zone_peak.get(zone, 0), self.zones[zone])
        try:
            return await super().query(name, rtype, timeout)
        finally:
            self.out -= 1
            self.zones[zone] -= 1


def at_once(coro: Coroutine[Any, Any, list[str]]) -> BaseException:
    """What ``coro`` raises on its first step: it ends without waiting on anything."""
    try:
        coro.send(None)
    except BaseException as exc:  # StopIteration would be an answer; the tests want errors
        return exc
    finally:
        coro.close()
    raise AssertionError("the question waited instead of failing at once")


def gauge(name: str, **labels: str) -> float:
    from prometheus_client import REGISTRY

    metrics.m()
    return REGISTRY.get_sample_value(name, labels) or 0.0


def counted(result: str) -> float:
    return gauge("pochta_dns_questions_total", result=result)


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
    fake = Counting(ZONE, delay=0.02)

    async def go() -> None:
        dns = SharedDns(fake, timeout=1.0, max_in_flight=3)
        await asyncio.gather(*(dns.query(f"n.example{i}.org", "A", 5.0) for i in range(12)))

    asyncio.run(go())
    assert (fake.peak, fake.asked) == (3, 12)


def test_a_caller_waits_only_its_own_time_and_the_question_goes_on_for_others() -> None:
    async def go() -> None:
        fake = AsyncFixture(ZONE, delay=0.2)
        dns = SharedDns(fake, timeout=5.0)
        patient = asyncio.ensure_future(dns.query("example.org", "TXT", 5.0))
        with pytest.raises(DnsTempError, match="within the letter's time"):
            await dns.query("example.org", "TXT", 0.05)
        assert not patient.done()  # the impatient one gave up before the answer came
        assert await patient == ["v=spf1 -all"] and fake.asked == 1

    asyncio.run(go())


# -- abandoned questions, zones, deep queues (issue 27 review) -----------------------------
def test_a_question_no_letter_waits_on_is_dropped_in_flight_or_in_the_queue() -> None:
    """The letters waiting gave up: the question gives up its slot at once (it asked with the
    whole dns_timeout, 5 s here, and held the slot for it), and one still waiting for a slot
    never goes out. A letter that asks it again starts a new one."""
    fake = Counting(ZONE, silent=[f"n{i}.evil.example" for i in range(10)])

    async def go() -> None:
        dns = SharedDns(fake, timeout=5.0, max_in_flight=4)  # 2 per zone
        abandoned = counted("abandoned")
        letters = [
            asyncio.ensure_future(dns.query(f"n{i}.evil.example", "TXT", 5.0)) for i in range(10)
        ]
        await asyncio.sleep(0.05)
        assert (fake.out, fake.asked) == (2, 2)
        for letter in letters:  # their letters are closed at once (their lifetimes ended)
            letter.cancel()
        await asyncio.gather(*letters, return_exceptions=True)
        await asyncio.sleep(0)  # the dropped questions end
        assert (fake.out, fake.asked) == (0, 2)  # 2 went out and were dropped, 8 never did
        assert dns.abandoned == 10
        assert counted("abandoned") - abandoned == 10
        assert dns.waiting == 0
        with pytest.raises(DnsTempError):
            await dns.query("n0.evil.example", "TXT", 0.05)
        assert fake.asked == 3

    asyncio.run(go())


def test_a_legitimate_question_is_answered_while_a_stranger_keeps_a_silent_domain_busy() -> None:
    """The review's case: 4 slots, a stranger's letters keep 40 questions to a domain whose
    name servers never answer going (abandoning each after its letter's time, then asking
    again). Before, every slot was held by an abandoned question for dns_timeout and the
    legitimate question got no answer in 2 s; the breaker never tripped (the server answers
    its probe). Now the silent domain holds at most half the slots, and no abandoned
    question holds one."""
    fake = Counting(ZONE, silent=[f"n{i}.evil.example" for i in range(40)])

    async def go() -> None:
        dns = SharedDns(fake, timeout=5.0, max_in_flight=4, breaker=Breaker(after=3))

        async def stranger(i: int) -> None:
            while True:
                with pytest.raises(DnsTempError):
                    await dns.query(f"n{i}.evil.example", "TXT", 0.05)
                await asyncio.sleep(0.01)  # its next letter

        strangers = [asyncio.ensure_future(stranger(i)) for i in range(40)]
        await asyncio.sleep(0.2)  # rounds of abandoned questions
        # a letter with ample time: before the fix it waited on 4 silent questions of 5 s
        answer = await dns.query("example.org", "TXT", 2.0)
        assert answer == ["v=spf1 -all"]
        for task in strangers:
            task.cancel()
        await asyncio.gather(*strangers, return_exceptions=True)
        assert fake.zone_peak["evil.example"] <= 2 and dns.breaker.allows()

    asyncio.run(go())


def test_one_zone_takes_at_most_its_share_of_the_slots() -> None:
    """Patient letters (they wait their whole lifetime) asking 20 names of one silent domain:
    at most max_per_zone of them out, the others waiting behind each other, never in front
    of another zone's question."""
    fake = Counting(ZONE, silent=[f"n{i}.evil.example" for i in range(20)])

    async def go() -> None:
        dns = SharedDns(fake, timeout=5.0, max_in_flight=4, max_per_zone=3)
        assert dns.max_per_zone == 2  # never more than half
        silent = [
            asyncio.ensure_future(dns.query(f"n{i}.evil.example", "TXT", 10.0)) for i in range(8)
        ]
        await asyncio.sleep(0.05)
        assert (fake.zones["evil.example"], dns.waiting) == (2, 0)  # 6 wait for the zone
        assert await dns.query("example.org", "TXT", 2.0) == ["v=spf1 -all"]
        for task in silent:
            task.cancel()
        await asyncio.gather(*silent, return_exceptions=True)

    asyncio.run(go())
    assert fake.zone_peak["evil.example"] == 2


def test_a_question_whose_queue_is_deep_fails_at_once() -> None:
    fake = Counting(ZONE, silent=[f"n{i}.evil{j}.example" for i in range(20) for j in range(4)])

    async def go() -> None:
        dns = SharedDns(fake, timeout=5.0, max_in_flight=2, max_per_zone=1, max_waiting=3)
        full = counted("queue_full")
        # one zone: 1 out, 4 waiting for the zone; a sixth fails at once
        held = [
            asyncio.ensure_future(dns.query(f"n{i}.evil0.example", "TXT", 10.0)) for i in range(5)
        ]
        await asyncio.sleep(0.01)
        exc = at_once(dns.query("n9.evil0.example", "TXT", 10.0))
        assert isinstance(exc, DnsTempError) and "to evil0.example are out or waiting" in str(exc)
        assert isinstance(at_once(dns.query("n9.evil0.example", "TXT", 10.0)), DnsTempError)
        # other zones: 1 more out (2 slots), 3 waiting for the server; the next fails at once
        held += [
            asyncio.ensure_future(dns.query(f"n0.evil{j}.example", "TXT", 10.0)) for j in (1, 2, 3)
        ]
        held.append(asyncio.ensure_future(dns.query("example.org", "TXT", 10.0)))
        await asyncio.sleep(0.01)
        assert (fake.out, dns.waiting) == (2, 3)
        exc = at_once(dns.query("example.net", "TXT", 10.0))
        assert isinstance(exc, DnsTempError) and "wait for the server already" in str(exc)
        assert (dns.overflowed, counted("queue_full") - full) == (3, 3)
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)

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
        assert gauge("pochta_dns_server_down") == 1
        asked = fake.asked
        down = counted("server_down")
        for i in range(100):  # 100 letters' questions: each fails on its first step, none sent
            exc = at_once(dns.query(f"m{i}.example.org", "TXT", 1.0))
            assert isinstance(exc, DnsTempError) and "not answering" in str(exc)
        assert fake.asked == asked and dns.refused == 100
        assert counted("server_down") - down == 100
        fake.dead = False  # the server is back: the next probe (after pause) finds it
        await asyncio.sleep(0.35)
        with pytest.raises(DnsTempError):
            await dns.query("example.org", "TXT", 1.0)  # still down: this one starts a probe
        await asyncio.sleep(0.05)
        assert dns.breaker.allows() and gauge("pochta_dns_server_down") == 0
        assert await dns.query("example.org", "TXT", 1.0) == ["v=spf1 -all"]

    outages = gauge("pochta_dns_server_outages_total")
    asyncio.run(go())
    assert gauge("pochta_dns_server_outages_total") - outages == 1


def test_questions_given_up_unanswered_count_for_the_breaker() -> None:
    """With dns_lifetime shorter than dns_timeout every question is given up before it times
    out: sent and given up unanswered, it counts as a timeout, so a server that never
    answers is still found out (and the probe still decides)."""
    fake = AsyncFixture(ZONE, dead=True)

    async def go() -> None:
        dns = SharedDns(fake, timeout=0.3, breaker=Breaker(after=3, pause=10))
        for i in range(3):
            with pytest.raises(DnsTempError, match="within the letter's time"):
                await dns.query(f"n{i}.example.org", "TXT", 0.05)
        await asyncio.sleep(0.4)  # the probe's own timeout
        assert fake.probes == 1 and not dns.breaker.allows() and dns.abandoned == 3

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
