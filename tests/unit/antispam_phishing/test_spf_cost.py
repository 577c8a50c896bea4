"""What a sender's own SPF records may cost the server (issue 27 review, item 1).

On main, a chain of 10 includes, each a 53 KB TXT record of ``ip4:`` terms, cost 1,415 ms of
event-loop CPU for one letter: the replay (``auth.replay``) runs pyspf again after each
answer, every run evaluating every record gathered, all on the loop; and the answers being
cached, every later letter from that domain cost the same. Now a record over the bounds is
``permerror`` before pyspf reads it, runs share what they parsed (``spf.Query``'s memo), the
explanation is asked but not expanded, and past a small allowance a letter's runs go to a
thread of the server's ``checks`` pool. Measured here in CPU time of the loop's thread (not
wall time: CI runs this on a loaded machine); the figures: benchmarks/slow_dependency.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pochta.antispam.auth import spf
from pochta.antispam.auth.asyncdns import SharedDns
from pochta.antispam.auth.authenticator import Authenticator
from pochta.antispam.auth.resolver import AsyncFixture, FixtureResolver
from pochta.antispam.auth.results import AuthResults, DkimResult, plan
from pochta.app import authenticator
from pochta.config import load_settings
from pochta.executors import Executors

LETTER = b"From: a@evil.example\r\nTo: b@example.org\r\nSubject: hi\r\n\r\nhello\r\n"
EXPLANATION = "%{d}%{i}%{s}%{l}" * 3700  # 59 KB of macros


def at_most(head: str, tail: str, term: Callable[[int], str]) -> str:
    """``head``, as many terms as the bounds allow, ``tail``: a record at the bounds."""
    terms: list[str] = []
    while True:
        more = " ".join([head, *terms, term(len(terms)), tail])
        if len(more) > spf.MAX_RECORD or len(more.split()) - 1 > spf.MAX_TERMS:
            return " ".join([head, *terms, tail])
        terms.append(term(len(terms)))


def ip4(d: int) -> Callable[[int], str]:
    return lambda i: f"ip4:10.{d}.{i >> 8 & 255}.{i & 255}"


def ip6(d: int) -> Callable[[int], str]:
    return lambda i: f"ip6:::{d * 256 + i:x}"


def chain(term: Callable[[int], Callable[[int], str]], *, exp: bool = True) -> FixtureResolver:
    """evil.example and 10 includes one after another, each at the bounds, each with its own
    exp= of 59 KB of macros: 22 rounds of the replay."""
    zone: dict[str, dict[str, list[str]]] = {}
    for d in range(11):
        name = "evil.example" if d == 0 else f"i{d}.evil.example"
        tail = f"include:i{d + 1}.evil.example" if d < 10 else ""
        tail += f" exp=e{d}.evil.example -all" if exp else " -all"
        zone[name] = {"TXT": [at_most("v=spf1", tail.strip(), term(d))]}
        zone[f"e{d}.evil.example"] = {"TXT": [EXPLANATION]}
    return FixtureResolver(zone)


def reviewers_chain() -> FixtureResolver:
    """The review's case: 10 includes, each a 53 KB record of ip4: terms."""
    terms = " ".join(f"ip4:10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i in range(3600))
    zone = {}
    for d in range(11):
        name = "evil.example" if d == 0 else f"i{d}.evil.example"
        include = f" include:i{d + 1}.evil.example" if d < 10 else ""
        zone[name] = {"TXT": [f"v=spf1 {terms}{include} -all"]}
    assert len(zone["evil.example"]["TXT"][0]) > 53_000
    return FixtureResolver(zone)


@pytest.fixture
def executors() -> Iterator[Executors]:
    pools = Executors.start(lookups=1, deliveries=1)
    yield pools
    pools.close()


def server_authenticator(tmp_path: Path, executors: Executors, zone: FixtureResolver) -> Any:
    """The server's Authenticator as app.py builds it, its DNS server replaced by ``zone``."""
    settings = load_settings(
        data_dir=tmp_path, antispam={"dns": "system", "dns_server": "127.0.0.1:9"}
    )
    auth = authenticator(settings, executors.checks)
    assert auth is not None and isinstance(auth.dns, SharedDns)
    auth.dns.upstream = AsyncFixture(zone)
    return auth


def loop_cpu(auth: Authenticator, ip: str, letters: int = 3) -> tuple[float, float, AuthResults]:
    """CPU seconds per letter of the event loop's thread, and of the whole process."""
    letter_plan = plan(LETTER)

    async def verify(*_: Any) -> tuple[DkimResult, ...]:
        return ()

    async def go() -> tuple[float, float, AuthResults]:
        on_loop, in_all = time.thread_time(), time.process_time()
        for _ in range(letters):
            one = auth.begin(ip, "a@evil.example", "mx.evil.example")
            try:
                result = await one.finish(letter_plan, verify)
            finally:
                one.close()
        on_loop = (time.thread_time() - on_loop) / letters
        return on_loop, (time.process_time() - in_all) / letters, result

    return asyncio.run(go())


def own(record: str) -> FixtureResolver:
    return FixtureResolver({"evil.example": {"TXT": [record]}})


def test_a_record_over_the_bounds_is_permerror_before_pyspf_reads_it() -> None:
    at_bounds = at_most("v=spf1", "-all", ip4(0))
    assert len(at_bounds) <= spf.MAX_RECORD and len(at_bounds.split()) - 1 == spf.MAX_TERMS
    r = spf.check("10.0.0.5", "a@evil.example", "h", own(at_bounds))
    assert (r.result, r.mechanism) == ("pass", "ip4:10.0.0.5")  # read and matched
    wide = " ".join(f"ip6:2001:db8:1234:5678:9abc:def0:1234:{i:04x}/128" for i in range(50))
    long = f"v=spf1 ip4:10.0.0.0/24 {wide} -all"
    assert len(long) > spf.MAX_RECORD and len(long.split()) - 1 < spf.MAX_TERMS
    r = spf.check("10.0.0.5", "a@evil.example", "h", own(long))
    assert r.result == "permerror" and f"longer than {spf.MAX_RECORD} characters" in r.reason
    many = "v=spf1 ip4:10.0.0.5 " + " ".join(f"ip6:::{i:x}" for i in range(spf.MAX_TERMS)) + " -all"
    assert len(many) <= spf.MAX_RECORD
    r = spf.check("10.0.0.5", "a@evil.example", "h", own(many))
    assert r.result == "permerror" and f"more than {spf.MAX_TERMS} terms" in r.reason
    # an included record over the bounds is the include's permerror, as pyspf's own errors
    zone = own("v=spf1 include:big.evil.example -all")
    zone.add("big.evil.example", "TXT", long)
    assert spf.check("10.0.0.5", "a@evil.example", "h", zone).result == "permerror"


def test_the_explanation_is_asked_but_not_expanded() -> None:
    """pochta never uses the exp= text: it is asked (the questions stay pyspf's) but its
    macros are not expanded, so its %{p} asks no PTR, and 59 KB of them cost nothing."""
    zone = own("v=spf1 exp=why.evil.example -all")
    zone.add("why.evil.example", "TXT", "%{p} may not send for %{d}" + EXPLANATION)
    r = spf.check("192.0.2.1", "a@evil.example", "h", zone)
    assert (r.result, r.mechanism) == ("fail", "-all")
    assert zone.queries == [("evil.example", "TXT"), ("why.evil.example", "TXT")]


def test_the_reviewers_chain_costs_the_event_loop_next_to_nothing(
    tmp_path: Path, executors: Executors
) -> None:
    auth = server_authenticator(tmp_path, executors, reviewers_chain())
    on_loop, _, result = loop_cpu(auth, "192.0.2.1")
    assert on_loop < 0.05, f"{on_loop * 1000:.1f} ms of the loop's CPU a letter (main: 1,415)"
    assert result.spf.result == "permerror" and "longer than" in result.spf.reason


@pytest.mark.parametrize(
    ("term", "ip"), [(ip4, "192.0.2.1"), (ip6, "2001:db8::1")], ids=["ip4", "ip6"]
)
def test_the_worst_records_within_the_bounds_stay_cheap(
    tmp_path: Path, executors: Executors, term: Callable[[int], Callable[[int], str]], ip: str
) -> None:
    """11 records at the bounds, each with a 59 KB explanation, 22 runs of pyspf: measured
    4-7 ms of the loop's CPU a letter (its allowance, one run, the hand-offs) and 25-60 ms in
    all; on main the explanations alone cost seconds. The bounds here are generous: CPU
    time grows on a loaded machine too."""
    zone = chain(term)
    auth = server_authenticator(tmp_path, executors, zone)
    on_loop, in_all, result = loop_cpu(auth, ip)
    blocking = spf.check(ip, "a@evil.example", "mx.evil.example", chain(term))
    assert result.spf == blocking and blocking.result == "fail"
    assert on_loop < 0.03, f"{on_loop * 1000:.1f} ms of the loop's CPU a letter"
    assert in_all < 0.5, f"{in_all * 1000:.1f} ms of CPU a letter"
