"""pochta's own MAIL FROM / RCPT TO (plain paths) answer exactly as aiosmtpd's do.

Each line is given to both, on fresh connections in the same state: pochta's
``PochtaSMTP.smtp_MAIL`` / ``smtp_RCPT`` and aiosmtpd's ``SMTP.smtp_MAIL`` / ``SMTP.smtp_RCPT``
(the public methods pochta overrides). The replies, the envelope after the command and what the
handler was given must be the same."""

from __future__ import annotations

import asyncio
from typing import Any

import aiosmtpd.smtp
import pytest
from aiosmtpd.smtp import SMTP, Session
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pochta.server.smtp import PochtaSMTP, plain_path


class Recorder:
    """A handler that takes every address, as aiosmtpd does without hooks, and notes them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, list[str]]] = []

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        self.calls.append(("MAIL", address, list(options)))
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        self.calls.append(("RCPT", address, list(options)))
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        return "250 2.1.5 OK"


class Probe(PochtaSMTP):
    error_limit = 1000

    def __init__(self, handler: Any, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.replies: list[str] = []

    async def push(self, status: Any) -> None:
        self.replies.append(str(status))


def _state(
    hooks: bool,
    *,
    helo: bool = True,
    extended: bool = True,
    mail_from: str | None = None,
    limit: int = 0,
    decode_data: bool = False,
) -> tuple[Probe, Recorder | None]:
    handler = Recorder() if hooks else None
    proto = Probe(
        handler if handler is not None else object(),
        data_size_limit=10_000,
        enable_SMTPUTF8=True,
        decode_data=decode_data,
        loop=asyncio.get_running_loop(),
    )
    proto.local_part_limit = limit
    session = Session(asyncio.get_running_loop())
    session.host_name = "client.example" if helo else None
    session.extended_smtp = extended
    proto.session = session
    proto.envelope = aiosmtpd.smtp.Envelope()
    proto.envelope.mail_from = mail_from
    return proto, handler


def _outcome(proto: Probe, handler: Recorder | None) -> tuple[Any, ...]:
    env = proto.envelope
    assert env is not None
    return (
        proto.replies,
        env.mail_from,
        env.mail_options,
        env.rcpt_tos,
        env.rcpt_options,
        env.smtp_utf8,
        handler.calls if handler is not None else None,
    )


def both(command: str, arg: str | None, **state: Any) -> tuple[Any, Any]:
    """(pochta's outcome, aiosmtpd's outcome) of one command on two fresh connections."""

    async def run() -> tuple[Any, Any]:
        outcomes = []
        for ours in (True, False):
            for hooks in (True, False):
                proto, handler = _state(hooks, **state)
                if command == "MAIL":
                    method = proto.smtp_MAIL if ours else SMTP.smtp_MAIL.__get__(proto)
                else:
                    method = proto.smtp_RCPT if ours else SMTP.smtp_RCPT.__get__(proto)
                try:
                    await method(arg)
                    raised = None
                except Exception as exc:  # aiosmtpd's parse fails on some ("FROM:<")
                    raised = type(exc).__name__
                outcomes.append((*_outcome(proto, handler), raised))
        return tuple(outcomes[:2]), tuple(outcomes[2:])

    return asyncio.run(run())


MAIL_ARGS = [
    "FROM:<alice@example.org>",
    "from:<alice@example.org>",
    "From: <alice@example.org>",
    "FROM:  <alice@example.org>  ",
    "FROM:<alice@example.org> SIZE=100",
    "FROM:<alice@example.org> size=100 body=8bitmime",
    "FROM:<alice@example.org> BODY=7BIT SMTPUTF8",
    "FROM:<alice@example.org> BODY=BINARYMIME",
    "FROM:<alice@example.org> SMTPUTF8=yes",
    "FROM:<alice@example.org> SIZE",
    "FROM:<alice@example.org> SIZE=abc",
    "FROM:<alice@example.org> SIZE=0",
    "FROM:<alice@example.org> SIZE=99999999",
    "FROM:<alice@example.org> FOO=1",
    "FROM:<alice@example.org> FOO=",
    "FROM:<alice@example.org> =1",
    "FROM:<alice@example.org> X-Y",
    "FROM:<alice@example.org>SIZE=10",
    "FROM:<alice@example.org> \t SIZE=10",
    "FROM:<alice@example.org> \x0bSIZE=10",
    "FROM:<alice@example.org>\x0bSIZE=10",
    "FROM:<alice@example.org> (a comment) SIZE=10",
    "FROM:<alice@example.org>(a comment)",
    "FROM:<alice@example.org>>",
    "FROM:<alice@example.org> ",
    "FROM:<>",
    "FROM:<> SIZE=10",
    "FROM:<>SIZE=10",
    "FROM:<> ",
    "FROM:<> (c)",
    "FROM:<SRS0=AbCd=XY=example.net=bob@example.org>",
    "FROM:<a.b-c+d_e'f!g#h$i%j&k*l/m=n?o^p`q{r|s}t~u@sub.example-1.org>",
    "FROM:<=?utf-8?q?x?=@example.org>",
    "FROM:<x=?utf-8?q?x?=@example.org>",
    "FROM:<a..b@example.org>",
    "FROM:<.a@example.org>",
    "FROM:<a.@example.org>",
    "FROM:<a@example..org>",
    "FROM:<a@.example.org>",
    "FROM:<a@example.org.>",
    "FROM:<a@-example.org>",
    "FROM:<a@localhost>",
    "FROM:<a@[192.0.2.1]>",
    'FROM:<"a b"@example.org>',
    "FROM:<@relay.example:a@example.org>",
    "FROM:<postmaster>",
    "FROM:<a@b",
    "FROM:a@example.org",
    "FROM:a@example.org SIZE=1",
    "FROM:<é@example.org>",
    "FROM:<a@exämple.org>",
    "FROM:<\udcff@example.org>",
    "FROM:<a(b)@example.org>",
    "FROM: (c) <a@example.org>",
    "FROM:",
    "FROM",
    "TO:<a@example.org>",
    "FROMM:<a@example.org>",
    "<a@example.org>",
    "",
    None,
]
RCPT_ARGS = [a.replace("FROM:", "TO:").replace("From:", "To:") if a else a for a in MAIL_ARGS] + [
    "TO:<alice@example.org> NOTIFY=NEVER",
    "TO:<alice@example.org> ORCPT=rfc822;a@b",
    "FROM:<alice@example.org>",
]
STATES: list[dict[str, Any]] = [
    {},
    {"extended": False},
    {"helo": False},
    {"mail_from": "bob@example.org"},
    {"limit": 3},
    {"decode_data": True},
]


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("arg", MAIL_ARGS)
def test_mail_answers_as_aiosmtpd(arg: str | None, state: dict[str, Any]) -> None:
    ours, theirs = both("MAIL", arg, **state)
    assert ours == theirs


@pytest.mark.parametrize("state", [{**s, "mail_from": "bob@example.org"} for s in STATES] + [{}])
@pytest.mark.parametrize("arg", RCPT_ARGS)
def test_rcpt_answers_as_aiosmtpd(arg: str | None, state: dict[str, Any]) -> None:
    ours, theirs = both("RCPT", arg, **state)
    assert ours == theirs


def test_the_common_forms_take_pochtas_path() -> None:
    """The forms clients send are parsed by pochta (else nothing would be saved)."""
    assert plain_path("FROM:<alice@example.org> SIZE=1000", "FROM:") == (
        "alice@example.org",
        "SIZE=1000",
    )
    assert plain_path("FROM:<> BODY=8BITMIME", "FROM:") == ("<>", " BODY=8BITMIME")
    assert plain_path("TO:<box7@example.org>", "TO:") == ("box7@example.org", "")
    for odd in ('FROM:<"a b"@x.org>', "FROM:<a@[192.0.2.1]>", "FROM:a@x.org", "FROM:<a@x> (c)"):
        assert plain_path(odd, "FROM:") is None


PIECES = st.sampled_from(
    [
        *("<", ">", "@", ".", " ", "\t", "\x0b", "(", ")", '"', "=?", "?=", "[", "]", ":", ","),
        *(";", "\\", "é", "\udcff", "a", "Z", "0", "-", "_", "+", "=", "SIZE=10", "BODY=8BITMIME"),
        *("SMTPUTF8", "x.org", "example.org", "box", "FOO", "=", "\r"),
    ]
)
ODD = st.lists(PIECES, max_size=14).map("".join)


@st.composite
def paths(draw: st.DrawFn, keyword: str) -> str:
    head = draw(st.sampled_from([keyword, keyword.lower(), keyword + " ", ""]))
    if draw(st.booleans()):
        return head + draw(ODD)
    local = draw(st.from_regex(r"[a-z0-9=.+'?-]{0,6}", fullmatch=True))
    domain = draw(st.from_regex(r"[a-z0-9.-]{0,8}", fullmatch=True))
    return head + "<" + local + "@" + domain + ">" + draw(ODD)


@settings(max_examples=400, deadline=None)
@given(paths("FROM:"), st.sampled_from(STATES[:2] + STATES[4:]))
@example("FROM:<a@b> \x0b(c)", {})
def test_any_mail_line_answers_as_aiosmtpd(arg: str, state: dict[str, Any]) -> None:
    ours, theirs = both("MAIL", arg, **state)
    assert ours == theirs


@settings(max_examples=400, deadline=None)
@given(paths("TO:"), st.sampled_from(STATES[:2] + STATES[4:]))
def test_any_rcpt_line_answers_as_aiosmtpd(arg: str, state: dict[str, Any]) -> None:
    ours, theirs = both("RCPT", arg, **{**state, "mail_from": "bob@example.org"})
    assert ours == theirs
