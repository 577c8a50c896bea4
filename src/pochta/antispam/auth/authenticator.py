"""SPF, DKIM and DMARC of the letters the server receives, with no worker process and no
thread ever waiting for a DNS answer.

    end of DATA    ``Authenticator.begin(ip, mail_from, helo)``: SPF starts at once (it needs
                   only the envelope); its questions are asked on the event loop, pyspf runs
                   on the answers (:func:`~pochta.antispam.auth.spf.check_async`)
    worker         the letter is parsed, analyzed (all but authentication) and split; the
                   analysis carries an :class:`~pochta.antispam.auth.results.AuthPlan`: the
                   DKIM keys and DMARC policies the letter needs
    ``finish``     the keys and policies are asked, together (SPF may still be asking); the
                   signatures that have a key are verified by ``verify`` (the body hash and
                   RSA are CPU: a second, short task in a worker); DMARC is judged on the
                   answers (microseconds)

The results are those of the blocking :func:`~pochta.antispam.auth.results.authenticate` for
the same answers (the same checks run on them). One letter's questions go through one
:class:`LetterDns`: at most MAX_QUERIES, all within ``lifetime`` seconds of ``begin``
(``antispam.dns_lifetime``); past either, the check that needed more is ``temperror``.

Where the runs of pyspf and of DMARC on the answers execute: on the event loop while the
letter's runs have taken less than :data:`INLINE_CPU` of its CPU (a real sender's records:
0.6 ms for SPF and DMARC of a chain like Google's), then where ``run`` says (the server: a
thread of its ``checks`` pool), each within the letter's lifetime and :data:`CHECK_SLACK`
more; a check whose run could not finish by then is ``temperror``. Every run in a thread
costs the loop a hand-off (and the process about 0.15 ms more CPU than inline), so most
letters never pay it, and a sender whose records are costly to evaluate costs the loop its
allowance, one run and the hand-offs, never more (a chain of 11 records at the bounds of
:mod:`~pochta.antispam.auth.spf`: 25-60 ms of CPU a letter, 4-7 ms of it on the loop).
Where a run executes never changes its result.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pochta.antispam.auth import replay, spf
from pochta.antispam.auth.resolver import AsyncResolver, DnsTempError, RType, question
from pochta.antispam.auth.results import (
    DNS_LIFETIME,
    MAX_QUERIES,
    AuthPlan,
    AuthResults,
    DkimResult,
    DkimStep,
    DmarcResult,
    Keys,
    check_dmarc,
    finish_dkim,
    policy_domains,
    to_verify,
)
from pochta.config import CHECK_SLACK

T = TypeVar("T")

INLINE_CPU = 0.001
"""Seconds of CPU one letter's runs may take on the event loop before the rest go to
``run``'s threads."""

Verify = Callable[[tuple[DkimStep, ...], Keys], Awaitable[tuple[DkimResult, ...]]]
"""Verifies a letter's signatures given their keys (:func:`~pochta.antispam.auth.results.
finish_dkim` where the letter's bytes are)."""


class LetterDns:
    """One letter's questions: at most ``max_queries``, and none after ``lifetime`` seconds
    (from now); each waits at most the time left. Past either, DnsTempError."""

    def __init__(
        self,
        dns: AsyncResolver,
        *,
        max_queries: int = MAX_QUERIES,
        lifetime: float = DNS_LIFETIME,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dns = dns
        self.max_queries = max_queries
        self.lifetime = lifetime
        self.clock = clock
        self.deadline = clock() + lifetime
        self.queries = 0

    async def ask(self, name: str, rtype: RType) -> list[str]:
        if self.queries >= self.max_queries:
            raise DnsTempError(f"more than {self.max_queries} DNS questions for one letter")
        left = self.deadline - self.clock()
        if left <= 0:
            raise DnsTempError(f"DNS took more than {self.lifetime:g} s for one letter")
        self.queries += 1
        return await self.dns.query(name, rtype, left)


class Authenticator:
    """Begins each letter's authentication (one per server process, over its shared DNS).
    ``run``: where pyspf's and DMARC's runs execute once a letter's runs took
    :data:`INLINE_CPU` on the event loop (the server: :func:`~pochta.antispam.auth.replay.
    in_executor`; None: on the event loop, all of them)."""

    def __init__(
        self,
        dns: AsyncResolver,
        *,
        lifetime: float = DNS_LIFETIME,
        run: replay.Runner | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dns = dns
        self.lifetime = lifetime
        self.run = run
        self.clock = clock

    def begin(self, ip: str, mail_from: str, helo: str) -> LetterAuth:
        """At the end of DATA, on the event loop: SPF starts now."""
        dns = LetterDns(self.dns, lifetime=self.lifetime, clock=self.clock)
        return LetterAuth(ip, mail_from, helo, dns, self.run)


class LetterAuth:
    """One letter's authentication in progress. ``finish`` it with the worker's plan, or
    ``close`` it (the letter was not analyzed): SPF is then dropped."""

    def __init__(
        self, ip: str, mail_from: str, helo: str, dns: LetterDns, run: replay.Runner | None
    ) -> None:
        self.dns = dns
        self.mail_from = mail_from
        self.helo = helo
        self.execute = run
        self.inline = 0.0  # seconds of CPU the letter's runs took on the event loop
        self._spf = asyncio.ensure_future(
            spf.check_async(ip, mail_from, helo, dns.ask, run=self.run)
        )

    async def run(self, fn: Callable[[], T]) -> T:
        """One run of a check: here, within :data:`INLINE_CPU` (or without ``execute``),
        else by ``execute``, by the letter's lifetime and :data:`CHECK_SLACK` (TimeoutError
        past it)."""
        if self.execute is None or self.inline < INLINE_CPU:
            started = time.thread_time()
            try:
                return fn()
            finally:
                self.inline += time.thread_time() - started
        left = self.dns.deadline + CHECK_SLACK - self.dns.clock()
        async with asyncio.timeout(max(left, 0.0)):
            return await self.execute(fn)

    def _late(self) -> str:
        return f"not finished within {self.dns.lifetime + CHECK_SLACK:g} s"

    async def finish(self, plan: AuthPlan, verify: Verify) -> AuthResults:
        got: replay.Answers = {}
        asked = [question(name, "TXT") for name in (*plan.keys, *plan.dmarc)]
        await replay.gather(asked, self.dns.ask, got)
        try:
            spf_result = await self._spf
        except TimeoutError:
            spf_result = spf.unfinished(self.mail_from, self.helo, f"SPF check {self._late()}")
        keys = {name: got[question(name, "TXT")] for name in plan.keys}
        if to_verify(plan.dkim, keys):
            dkim = await verify(plan.dkim, keys)
        else:  # every result is known without the letter's bytes
            dkim = finish_dkim(b"", plan.dkim, keys)

        def dmarc(resolver: replay.Replay) -> DmarcResult:
            return check_dmarc(plan.from_domain, spf_result, dkim, resolver, plan.sample_key)

        try:
            result = await replay.replayed(dmarc, self.dns.ask, answers=got, run=self.run)
        except TimeoutError:
            domain = policy_domains(plan.from_domain)[0] if plan.from_domain else ""
            result = DmarcResult("temperror", domain, reason=f"DMARC check {self._late()}")
        return AuthResults(spf_result, dkim, result)

    def close(self) -> None:
        if not self._spf.done():
            self._spf.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            if self._spf.done():
                self._spf.exception()
