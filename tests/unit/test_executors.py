"""Blocking calls of the SMTP edge run on pools of their own (pochta.executors, issue 27): a
stalled mailbox index holds the recipient lookups, not the event loop's default pool (six
threads on two cores) that the rest of the process shares."""

from __future__ import annotations

import asyncio
import contextvars
import smtplib
import threading
import time
from pathlib import Path

from pochta.config import SmtpSettings
from pochta.executors import Executors, run_in
from pochta.server import smtp
from pochta.types import User


class StalledIndex:
    """A mailbox whose index does not answer until ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.waiting = 0

    def user(self, email: str) -> User | None:
        self.waiting += 1
        self.release.wait(30)
        return None


def _rcpt(port: int, codes: list[int]) -> None:
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
        client.ehlo()
        client.mail("a@example.net")
        codes.append(client.rcpt("b@example.org")[0])


def test_stalled_recipient_lookups_leave_the_default_pool_free(tmp_path: Path) -> None:
    index = StalledIndex()
    executors = Executors.start(lookups=4, deliveries=2)

    async def go() -> float:
        settings = SmtpSettings(host="127.0.0.1", port=0, lmtp_port=0, hostname="mx.test")
        servers = await smtp.start(
            index,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            settings,
            tmp_path / "spool",
            executors=executors,
        )
        port = servers[0].sockets[0].getsockname()[1]
        codes: list[int] = []
        clients = [threading.Thread(target=_rcpt, args=(port, codes)) for _ in range(10)]
        for c in clients:
            c.start()
        while index.waiting < 4:  # the lookup pool is full; six lookups wait behind
            await asyncio.sleep(0.01)
        t0 = time.monotonic()
        await asyncio.wait_for(asyncio.to_thread(lambda: None), 5)  # anyone else's thread work
        took = time.monotonic() - t0
        index.release.set()
        await asyncio.gather(*(asyncio.to_thread(c.join, 30) for c in clients))
        for server in servers:
            server.close()
        assert codes == [550] * 10  # the lookups went on once the index answered
        return took

    try:
        assert asyncio.run(go()) < 1.0
    finally:
        index.release.set()
        executors.close()


def test_run_in_carries_the_callers_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="-")
    executors = Executors.start(lookups=1, deliveries=1)

    async def go() -> str:
        var.set("queue 1")
        return await run_in(executors.local, var.get)

    try:
        assert asyncio.run(go()) == "queue 1"
    finally:
        executors.close()
