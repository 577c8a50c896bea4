"""The server's authentication (issue 27): DNS asked asynchronously, the checks run on the
answers (``auth.replay``), DKIM split into a plan (no DNS) and a verification with the keys.
Its results are the blocking ``authenticate``'s, letter for letter: the RFC 7208 suite, the
RFC cases of test_spf, the phishing set's letters and zone, any generated SPF records."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.spf_zones import REAL_CASES, REAL_ZONE
from tests.unit.antispam_phishing.helpers import Key, cases, crlf, sign
from tests.unit.antispam_phishing.helpers import zone as manifest_zone
from tests.unit.antispam_phishing.test_auth_bounds import AnyZone, records
from tests.unit.antispam_phishing.test_spf import RFC_CASES, Zone

from pochta.antispam.auth import spf
from pochta.antispam.auth.authenticator import Authenticator, LetterDns
from pochta.antispam.auth.replay import Replay, replayed
from pochta.antispam.auth.resolver import (
    AsyncFixture,
    DnsTempError,
    FixtureResolver,
    NeedAnswer,
    Resolver,
    RType,
)
from pochta.antispam.auth.results import (
    MAX_SIGNATURES,
    AuthResults,
    DkimKey,
    DkimResult,
    DkimStep,
    Keys,
    authenticate,
    finish_dkim,
    plan,
    plan_dkim,
    verify_dkim,
)

SUITE = Path(__file__).resolve().parents[2] / "data" / "spf" / "rfc7208-tests.yml"

LETTER = crlf(
    b"From: Bank <notice@mail.example.org>\nTo: ivan@pochta.test\nSubject: Statement\n"
    b"Date: Tue, 14 Jan 2025 10:00:00 +0000\nMessage-ID: <s1@example.org>\n\nReady.\n"
)


def asking(resolver: Resolver) -> Callable[[str, RType], Awaitable[list[str]]]:
    async def ask(name: str, rtype: RType) -> list[str]:
        return resolver.query(name, rtype)

    return ask


def spf_async(ip: str | None, mail_from: str, helo: str, resolver: Resolver) -> spf.SpfResult:
    return asyncio.run(spf.check_async(ip, mail_from, helo, asking(resolver)))


async def local_verify(raw: bytes) -> Callable[..., Awaitable[tuple[DkimResult, ...]]]:
    async def verify(steps: tuple[DkimStep, ...], keys: Keys) -> tuple[DkimResult, ...]:
        return finish_dkim(raw, steps, keys)

    return verify


def served(
    raw: bytes, ip: str, mail_from: str, helo: str, resolver: Resolver, lifetime: float = 7.0
) -> AuthResults:
    """What the server finds for a letter whose worker returned ``plan(raw)``."""

    async def go() -> AuthResults:
        auth = Authenticator(AsyncFixture(resolver), lifetime=lifetime)
        letter = auth.begin(ip, mail_from, helo)
        try:
            return await letter.finish(plan(raw), await local_verify(raw))
        finally:
            letter.close()

    return asyncio.run(go())


# -- SPF ----------------------------------------------------------------------------------
def test_the_rfc7208_suite_passes_whole_through_the_replay() -> None:
    from tests.spf_suite import load, run_case

    suite = load(SUITE)
    failed = [c.name for c in suite if not run_case(c, spf_async).ok]
    assert len(suite) == 203 and failed == []


@pytest.mark.parametrize(
    ("zone", "ip", "mail_from"),
    [pytest.param(z, ip, mf, id=f"{sec} {what}") for sec, what, z, ip, mf, _ in RFC_CASES],
)
def test_rfc_cases_give_the_same_result_term_and_reason(
    zone: Zone, ip: str, mail_from: str
) -> None:
    blocking = spf.check(ip, mail_from, "mail.example.com", FixtureResolver(zone))
    assert spf_async(ip, mail_from, "mail.example.com", FixtureResolver(zone)) == blocking


@pytest.mark.parametrize(("ip", "mail_from", "helo", "expected"), REAL_CASES)
def test_real_looking_records_through_the_replay(
    ip: str, mail_from: str, helo: str, expected: str
) -> None:
    r = spf_async(ip, mail_from, helo, FixtureResolver(REAL_ZONE))
    assert r == spf.check(ip, mail_from, helo, FixtureResolver(REAL_ZONE))
    assert r.result == expected


@settings(max_examples=100, deadline=None)
@given(
    recs=st.lists(records, min_size=0, max_size=2),
    addresses=st.lists(st.sampled_from(["192.0.2.5", "198.51.100.1", "2001:db8::1"]), max_size=3),
    mx=st.lists(st.sampled_from([f"mx{i}.example.com" for i in range(12)]), max_size=12),
    ip=st.sampled_from(["192.0.2.5", "2001:db8::5"]),
)
def test_any_records_give_the_same_result_within_the_limits(
    recs: list[str], addresses: list[str], mx: list[str], ip: str
) -> None:
    blocking = spf.check(ip, "user@example.com", "mail.example.com", AnyZone(recs, addresses, mx))
    zone = AnyZone(recs, addresses, mx)
    rounds = 0

    def counted(resolver: Replay) -> spf.SpfResult:
        nonlocal rounds
        rounds += 1
        return spf.check(ip, "user@example.com", "mail.example.com", resolver)

    got = asyncio.run(replayed(counted, asking(zone)))
    assert got == blocking
    assert zone.queries <= 1 + spf.MAX_LOOKUPS * 11 + 1 + spf.MAX_LOOKUPS  # as the blocking one
    assert rounds <= zone.queries + 1


def test_the_addresses_of_an_mx_are_asked_together_one_round() -> None:
    """An ``mx`` term with ten exchanges: the exchanges' addresses are asked with the MX
    answer, so pyspf runs 3 times (record; MX; the rest), not 12."""
    zone = FixtureResolver(
        {
            "example.com": {"TXT": ["v=spf1 mx:example.net -all"]},
            "example.net": {"MX": [f"mx{i}.example.net" for i in range(10)]},
            **{f"mx{i}.example.net": {"A": [f"198.51.100.{i}"]} for i in range(10)},
        }
    )
    runs = 0

    def counted(resolver: Replay) -> spf.SpfResult:
        nonlocal runs
        runs += 1
        return spf.check("198.51.100.9", "u@example.com", "h.example", resolver)

    r = asyncio.run(replayed(counted, asking(zone), follow=_mx_follow))
    assert (r.result, r.mechanism, runs) == ("pass", "mx:example.net", 3)
    assert len(zone.queries) == 12
    assert spf_async("198.51.100.9", "u@example.com", "h.example", zone).result == "pass"


def _mx_follow(q: tuple[str, RType], answer: list[str]) -> list[tuple[str, RType]]:
    return [(n, "A") for n in answer] if q[1] == "MX" else []


def test_a_question_swallowed_by_the_check_is_still_asked() -> None:
    """pyspf ignores any error of an exp= lookup (a bare except): the replay still sees the
    question missing, asks it and runs again, so the void count matches the blocking run."""
    zone = {"example.com": {"TXT": ["v=spf1 exp=nowhere.example.com a:x.example.com -all"]}}
    assert spf_async("192.0.2.1", "u@example.com", "h", FixtureResolver(zone)) == spf.check(
        "192.0.2.1", "u@example.com", "h", FixtureResolver(zone)
    )


def test_replay_raises_need_answer_then_answers_and_ends_final() -> None:
    r = Replay({("a.example", "TXT"): ["x"], ("b.example", "A"): DnsTempError("down")})
    assert r.query("A.Example.", "TXT") == ["x"]
    with pytest.raises(DnsTempError, match="down"):
        r.query("b.example", "A")
    with pytest.raises(NeedAnswer):
        r.query("c.example", "MX")
    assert r.missing == [("c.example", "MX")]
    with pytest.raises(DnsTempError, match="not asked"):
        Replay({}, final=True).query("c.example", "MX")

    def endless(resolver: Replay) -> int:  # asks a new name each run
        return len(resolver.query(f"n{len(resolver.answers)}.example", "A"))

    async def nothing(name: str, rtype: RType) -> list[str]:
        return []

    with pytest.raises(DnsTempError, match="not asked"):
        asyncio.run(replayed(endless, nothing, max_rounds=5))


# -- DKIM ---------------------------------------------------------------------------------
def test_the_dkim_plan_names_each_key_and_asks_nothing(key: Key) -> None:
    raw = LETTER
    for i in range(MAX_SIGNATURES + 2):
        raw = sign(raw, key, f"d{i}.example.org", "sel")
    broken = raw.replace(b"a=rsa-sha256", b"a=rsa-md5", 1)  # the top signature, unusable
    steps = plan_dkim(broken)
    assert len(steps) == MAX_SIGNATURES
    assert isinstance(steps[0], DkimResult) and steps[0].result == "permerror"
    assert [s.name for s in steps[1:] if isinstance(s, DkimKey)] == [
        f"sel._domainkey.d{i}.example.org" for i in (5, 4, 3, 2)
    ]


def test_dkim_results_without_the_letter_when_no_key_is_found(key: Key) -> None:
    raw = sign(sign(LETTER, key, "a.example.org", "s"), key, "b.example.org", "s")
    steps = plan_dkim(raw)
    keys: Keys = {
        "s._domainkey.b.example.org": DnsTempError("timeout"),
        "s._domainkey.a.example.org": [],
    }
    got = finish_dkim(b"", steps, keys)  # no verification: the bytes are never read
    assert [(d.result, d.domain) for d in got] == [
        ("temperror", "b.example.org"),
        ("permerror", "a.example.org"),
    ]
    zone = FixtureResolver({"s._domainkey.b.example.org": {"TXT": [key.txt]}}, failing=[])
    assert finish_dkim(raw, steps, {"s._domainkey.b.example.org": [key.txt]})[0].result == "pass"
    assert verify_dkim(raw, zone)[0].result == "pass"


# -- the whole letter ---------------------------------------------------------------------
def test_every_letter_of_the_phishing_set_authenticates_the_same(key: Key) -> None:
    for case in cases():
        raw = case.raw(key)
        env = case.envelope
        blocking = authenticate(
            raw,
            ip=env["ip"],
            mail_from=env["mail_from"],
            helo=env["helo"],
            resolver=manifest_zone(key),
        )
        got = served(raw, env["ip"], env["mail_from"], env["helo"], manifest_zone(key))
        assert got == blocking, case.file


def test_a_letter_whose_dns_never_answers_is_temperror_within_its_lifetime(key: Key) -> None:
    raw = sign(LETTER, key, "example.org", "mail")
    silent = ["example.org", "mail._domainkey.example.org", "_dmarc.mail.example.org"]

    waits: list[float] = []

    class Recording(AsyncFixture):
        async def query(self, name: str, rtype: RType, timeout: float) -> list[str]:
            waits.append(timeout)  # what the letter lets the question wait: what is left
            return await super().query(name, rtype, timeout)

    async def go() -> tuple[AuthResults, float]:
        dns = Recording(FixtureResolver(), silent=[*silent, "_dmarc.example.org"])
        auth = Authenticator(dns, lifetime=0.3)
        t0 = time.monotonic()
        letter = auth.begin("192.0.2.5", "b@example.org", "h")
        try:
            r = await letter.finish(plan(raw), await local_verify(raw))
        finally:
            letter.close()
        return r, time.monotonic() - t0

    r, took = asyncio.run(go())
    assert (r.spf.result, r.dkim_result, r.dmarc.result) == ("temperror",) * 3
    # each question waited what was left of the lifetime, the four of them together
    assert len(waits) == 4 and all(0 < w <= 0.3 for w in waits)
    assert took < 0.3 + 3.0  # wall time, generous: CI runs this on a loaded machine


def test_one_letter_is_bounded_in_questions_and_time() -> None:
    async def go() -> None:
        dns = LetterDns(AsyncFixture(FixtureResolver()), max_queries=2, lifetime=10)
        await dns.ask("a.example", "A")
        await dns.ask("b.example", "A")
        with pytest.raises(DnsTempError, match="more than 2 DNS questions"):
            await dns.ask("c.example", "A")
        clock = [0.0]
        late = LetterDns(AsyncFixture(FixtureResolver()), lifetime=1.0, clock=lambda: clock[0])
        await late.ask("a.example", "A")
        clock[0] = 1.5
        with pytest.raises(DnsTempError, match="more than 1 s"):
            await late.ask("b.example", "A")

    asyncio.run(go())


def test_a_check_whose_runs_cannot_run_in_time_is_temperror(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the loop's allowance a letter's runs wait for a thread of the server's pool; one
    that is not done by the letter's lifetime and CHECK_SLACK is temperror, never later."""
    from pochta.antispam.auth import authenticator

    monkeypatch.setattr(authenticator, "INLINE_CPU", 0.0)  # every run to the pool
    clock = [0.0]
    handed: list[object] = []

    async def stuck(fn: Callable[[], object]) -> object:  # a pool that never gets to it
        handed.append(fn)
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def go() -> AuthResults:
        zone = FixtureResolver({"example.org": {"TXT": ["v=spf1 -all"]}})
        auth = Authenticator(AsyncFixture(zone), lifetime=5.0, run=stuck, clock=lambda: clock[0])
        letter = auth.begin("192.0.2.5", "b@example.org", "h")
        clock[0] = 5.0 + authenticator.CHECK_SLACK  # the letter's time is up
        try:
            return await asyncio.wait_for(
                letter.finish(plan(LETTER), await local_verify(LETTER)), 10
            )
        finally:
            letter.close()

    r = asyncio.run(go())
    assert (r.spf.result, r.dmarc.result) == ("temperror", "temperror")
    assert "not finished within 6 s" in r.spf.reason and r.spf.identity == "b@example.org"
    assert "not finished within 6 s" in r.dmarc.reason and r.dmarc.domain == "mail.example.org"
    assert len(handed) == 2  # SPF's first run and DMARC's, each given up at once
