"""RCPT's recipients found lately (``pochta.server.recipients``): answered on the loop without
a lookup in the index, within ``smtp.recipient_cache_seconds``; unknown ones looked up every
time."""

from __future__ import annotations

import asyncio
from typing import Any

import aiosmtpd.smtp
from aiosmtpd.smtp import Session

from pochta.errors import StorageError
from pochta.server.recipients import KnownRecipients
from pochta.server.smtp import STORAGE_UNAVAILABLE, DeliveryHandler


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_recipient_found_is_known_for_ttl_seconds_then_forgotten() -> None:
    clock = Clock()
    known = KnownRecipients(60.0, clock=clock)
    assert not known.known("a@example.org")
    known.found("a@example.org")
    clock.now += 59.9
    assert known.known("a@example.org")
    assert not known.known("A@example.org")  # as given: a different string is looked up
    clock.now += 0.2
    assert not known.known("a@example.org")
    assert len(known) == 0  # dropped once seen expired


def test_ttl_zero_keeps_none() -> None:
    known = KnownRecipients(0.0, clock=Clock())
    known.found("a@example.org")
    assert not known.known("a@example.org")
    assert len(known) == 0


def test_at_its_size_the_oldest_lookup_goes_first() -> None:
    clock = Clock()
    known = KnownRecipients(60.0, size=3, clock=clock)
    for name in ("a", "b", "c"):
        known.found(f"{name}@example.org")
        clock.now += 1
    known.found("a@example.org")  # looked up again: now the newest
    known.found("d@example.org")
    assert len(known) == 3
    assert not known.known("b@example.org")
    assert all(known.known(f"{n}@example.org") for n in ("a", "c", "d"))


class Index:
    """The mailbox as RCPT sees it: who has a mailbox, and how often it was asked."""

    def __init__(self, *users: str) -> None:
        self.users = set(users)
        self.asked: list[str] = []
        self.down = False

    def user(self, email: str) -> object | None:
        self.asked.append(email)
        if self.down:
            raise StorageError("the index is unreachable")
        return object() if email in self.users else None


def rcpt(handler: DeliveryHandler, address: str) -> str:
    async def main() -> str:
        envelope = aiosmtpd.smtp.Envelope()
        envelope.mail_from = "s@example.net"
        server: Any = None
        return await handler.handle_RCPT(
            server, Session(asyncio.get_running_loop()), envelope, address, []
        )

    return asyncio.run(main())


def test_rcpt_looks_a_found_recipient_up_once_and_an_unknown_one_every_time() -> None:
    index = Index("bob@example.org")
    clock = Clock()
    handler = DeliveryHandler(
        index,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        "mx.test",
        False,
        recipients=KnownRecipients(60.0, clock=clock),
    )
    assert rcpt(handler, "bob@example.org").startswith("250 ")
    assert rcpt(handler, "bob@example.org").startswith("250 ")
    assert index.asked == ["bob@example.org"]
    assert rcpt(handler, "eve@example.org").startswith("550 ")
    index.users.add("eve@example.org")  # added after her 550: found at once
    assert rcpt(handler, "eve@example.org").startswith("250 ")
    assert index.asked == ["bob@example.org", "eve@example.org", "eve@example.org"]
    clock.now += 61  # past the ttl: looked up again; the index down is a 451, not a 250
    index.down = True
    assert rcpt(handler, "bob@example.org") == STORAGE_UNAVAILABLE


def test_without_the_cache_every_rcpt_is_looked_up() -> None:
    index = Index("bob@example.org")
    handler = DeliveryHandler(index, None, "mx.test", False)  # type: ignore[arg-type]
    for _ in range(3):
        assert rcpt(handler, "bob@example.org").startswith("250 ")
    assert index.asked == ["bob@example.org"] * 3
