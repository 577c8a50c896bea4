"""The intake authenticates letters in the server (issue 27): the analyzer it runs asks no DNS
and plans; the server's answers give the analysis the blocking analyzer would have given,
features included. Worker processes and a real DNS server: tests/integration/antispam/
test_dns_server.py; a silent one through ``pochta serve``: test_slow_dependency.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.unit.antispam_phishing.helpers import Key, cases, make_key, zone

from pochta.antispam.auth.authenticator import Authenticator
from pochta.antispam.auth.resolver import AsyncFixture
from pochta.antispam.verdict import Analyzer
from pochta.mailbox.intake import AnalysisSettings, Intake, make_analyzer
from pochta.mime.letter import parse
from pochta.types import Envelope


@pytest.fixture(scope="module")
def key() -> Key:
    return make_key(1024)


def intake(key: Key, **fixture: Any) -> Intake:
    planning = make_analyzer(AnalysisSettings(dns="system"), deferred=True)
    assert planning.resolver is None and planning.plan_auth
    auth = Authenticator(AsyncFixture(zone(key), **fixture), lifetime=2.0)
    return Intake(
        planning, None, inline_limit=4096, deadline=10, authserv_id="mx.pochta.test", auth=auth
    )


def test_the_phishing_set_gets_the_blocking_analysis(key: Key) -> None:
    blocking = Analyzer(resolver=zone(key))
    served = intake(key)

    async def go() -> None:
        for case in cases():
            raw = case.raw(key)
            env = Envelope(case.envelope["ip"], case.envelope["mail_from"])
            want = blocking.analyze(parse(raw), env, case.envelope["helo"])
            got, _ = await served.analyze(raw, env, case.envelope["helo"])
            assert (got.auth, got.features, got.plan) == (want.auth, want.features, None)
            prepared = await served.prepare(
                raw, env, case.envelope["helo"], analyze=True, shingles=True
            )
            assert prepared.analysis is not None
            assert prepared.analysis.auth == want.auth, case.file
            assert prepared.analysis.features == want.features, case.file

    asyncio.run(go())


def test_without_an_ip_or_without_analysis_nothing_is_asked(key: Key) -> None:
    served = intake(key)
    raw = cases()[0].raw(key)

    async def go() -> None:
        a, _ = await served.analyze(raw, Envelope(None, "x@example.org"), "h")
        assert a.auth.spf.reason == "not checked" and a.plan is None
        p = await served.prepare(
            raw, Envelope("192.0.2.1", "x@example.org"), "h", analyze=False, shingles=True
        )
        assert p.analysis is None

    asyncio.run(go())
    assert served.auth is not None and served.auth.dns.asked == 0  # type: ignore[attr-defined]


def test_a_fault_in_authentication_leaves_the_verdict_partial_not_the_letter_refused(
    key: Key, caplog: pytest.LogCaptureFixture
) -> None:
    served = intake(key)

    async def broken(*_: Any) -> Any:
        raise RuntimeError("a bug")

    assert served.auth is not None
    served.auth.dns.query = broken  # type: ignore[method-assign,assignment]
    case = cases()[0]
    env = Envelope(case.envelope["ip"], case.envelope["mail_from"])

    async def go() -> None:
        a, _ = await served.analyze(case.raw(key), env, case.envelope["helo"])
        assert "auth" in a.partial and a.plan is None

    asyncio.run(go())
    assert "sender authentication failed" in caplog.text
