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
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

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
    to_verify,
)

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
    ``run``: where pyspf's and DMARC's runs execute (default: on the event loop)."""

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
        self.run = run
        self._spf = asyncio.ensure_future(spf.check_async(ip, mail_from, helo, dns.ask, run=run))

    async def finish(self, plan: AuthPlan, verify: Verify) -> AuthResults:
        got: replay.Answers = {}
        asked = [question(name, "TXT") for name in (*plan.keys, *plan.dmarc)]
        await replay.gather(asked, self.dns.ask, got)
        spf_result = await self._spf
        keys = {name: got[question(name, "TXT")] for name in plan.keys}
        if to_verify(plan.dkim, keys):
            dkim = await verify(plan.dkim, keys)
        else:  # every result is known without the letter's bytes
            dkim = finish_dkim(b"", plan.dkim, keys)

        def dmarc(resolver: replay.Replay) -> DmarcResult:
            return check_dmarc(plan.from_domain, spf_result, dkim, resolver, plan.sample_key)

        result = await replay.replayed(dmarc, self.dns.ask, answers=got, run=self.run)
        return AuthResults(spf_result, dkim, result)

    def close(self) -> None:
        if not self._spf.done():
            self._spf.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            if self._spf.done():
                self._spf.exception()
