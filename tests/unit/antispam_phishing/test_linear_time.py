"""The checks' patterns run in time linear in their input, and the inputs are bounded: a
100 KB display name, host name, link text or header built to make a backtracking pattern
blow up costs well under 50 ms (the checks read a bounded prefix); a 100 KB body, read whole,
stays linear too. The patterns these replaced took seconds on 10 KB of the same input."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from pochta.antispam.signs import checks, extortion, links, protected, wording
from pochta.mime.letter import Link
from pochta.mime.normalize import known_suffix
from pochta.types import Envelope

N = 100_000
BUDGET = 0.5
"""CPU seconds for 100 KB of crafted input: the patterns these checks replaced took seconds
on 10 KB (minutes on 100 KB); a bounded prefix takes milliseconds. A bound far from both, in
CPU time, so that a loaded machine cannot fail it (it did at 50 ms of wall time)."""


def _ms(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(2):  # the better of two runs: a first call warms caches
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _context(**letter: Any) -> checks.Context:
    """A Context over a stand-in letter with just the attributes the checks read."""
    base: dict[str, Any] = {
        "from_name": "",
        "from_address": "a@shop.example.com",
        "from_domain": "shop.example.com",
        "subject": "",
        "text": "",
        "plain_text": "",
        "all_text": "",
        "html": None,
        "links": (),
        "web_links": (),
        "header": lambda name: None,
        "headers": lambda name: [],
    }
    base.update(letter)
    return checks.Context(
        SimpleNamespace(**base),  # type: ignore[arg-type]
        protected.default(),
        protected.shorteners(),
        protected.redirectors(),
        protected.suspicious_tlds(),
        Envelope(),
    )


EVIL = {
    "letters": "a" * N,
    "dots": "a." * (N // 2),
    "ats": "a@" * (N // 2),
    "address-chars": "a.b+c-" * (N // 6),
    "hyphens": "a-" * (N // 2),
    "spaces": " " * N,
    "dot-words": "a dot " * (N // 6),
    "spaced-dots": "a . " * (N // 4),
    "brackets": "a[.]" * (N // 4),
    "hxxp": "hxxp://" * (N // 7),
    "digits": "1" * N,
    "base58": "1A" * (N // 2),
}


@pytest.mark.parametrize("kind", list(EVIL))
def test_a_long_display_name(kind: str) -> None:
    ctx = _context(from_name=EVIL[kind] + "@x")
    for fn in (checks.display_name_address, checks.display_name_brand):
        assert _ms(lambda fn=fn: fn(ctx)) < BUDGET, fn.__name__


@pytest.mark.parametrize("kind", list(EVIL))
def test_a_long_host_name(kind: str) -> None:
    host = EVIL[kind].replace(" ", "a") + ".com"
    assert _ms(lambda: checks.received_hosts([f"from {host} ({host} [192.0.2.1]) by mx"])) < BUDGET
    link = Link(f"https://{host}/", f"https://{host}/", host, "x", "html")
    ctx = _context(links=(link,), web_links=(link,))
    for fn in (
        checks.link_lookalike,
        checks.link_text_mismatch,
        checks.link_off_brand,
        checks.link_suspicious_tld,
        checks.link_userinfo,
    ):
        assert _ms(lambda fn=fn: fn(ctx)) < BUDGET, fn.__name__


@pytest.mark.parametrize("kind", list(EVIL))
def test_a_long_link_text_and_href(kind: str) -> None:
    text = EVIL[kind]
    assert _ms(lambda: links.shown_host(text, known_suffix)) < BUDGET
    assert _ms(lambda: links.shown_host("https://" + text, known_suffix)) < BUDGET
    assert _ms(lambda: links.userinfo("https://" + text)) < BUDGET
    assert _ms(lambda: links.carried_hosts("https://r.example/?u=" + text)) < BUDGET
    link = Link("https://evil.example/?q=" + text, "https://evil.example/", "evil.example", text,
                "html")
    ctx = _context(links=(link,), web_links=(link,))
    assert _ms(lambda: checks.link_text_mismatch(ctx)) < BUDGET


@pytest.mark.parametrize("kind", list(EVIL))
def test_long_headers(kind: str) -> None:
    value = EVIL[kind]
    headers = {"reply-to": value, "sender": value, "list-post": value, "list-id": "<" + value}
    ctx = _context(
        subject="re" + value,
        header=headers.get,
        headers=lambda name: [value, "from " + value, "from a (" + value],
    )
    for fn in (checks.reply_to_mismatch, checks.received_mismatch, checks.fake_reply):
        assert _ms(lambda fn=fn: fn(ctx)) < BUDGET, fn.__name__


BODY_BUDGET = 1.0  # CPU seconds for 100 KB of text read whole; a quadratic pattern takes minutes


@pytest.mark.parametrize("kind", list(EVIL))
def test_a_long_body(kind: str) -> None:
    """Obfuscated links and wallets read the whole text (up to 200,000 characters), so they
    cost more than a name's checks, but stay linear: 3 to 30 ms per 100 KB on a loaded
    2-core machine."""
    text = EVIL[kind]
    folded = wording.fold(text)
    assert _ms(lambda: links.obfuscated(folded, known_suffix)) < BODY_BUDGET
    assert _ms(lambda: extortion.wallets(text)) < BODY_BUDGET
    assert _ms(lambda: extortion.demand(text, folded)) < BODY_BUDGET
