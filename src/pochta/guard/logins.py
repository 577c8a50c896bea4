"""Login protection that stops attackers, not offices.

Three rolling limits (seed 003's formula, :mod:`pochta.guard.ratelimit`):

- ``per_ip`` counts **failed** logins from one IP: a password guesser or sprayer behind one
  address runs out; an office of hundreds behind one NAT address, logging in with correct
  passwords, never does.
- ``per_account`` counts failed logins to one account, from any IP: a botnet guessing one
  password from many addresses runs out.
- ``per_ip_success`` counts **successful** logins from one IP, at a much higher rate: an IP
  that logs into account after account with valid passwords (credential stuffing with a
  leaked list) is slowed down, a NAT full of real users is not.

:meth:`LoginGuard.check` runs before the password is looked at and refuses (``RateLimited``,
429 with Retry-After) when any of the three is used up; the outcome is then charged with
:meth:`failed` or :meth:`succeeded`. The check and the charge are two steps, so concurrent
guesses can pass the limit by the number in flight at once (each costs an argon2 hash, and
the server runs a bounded number at a time). Unknown accounts are charged like real ones, so
the answer tells nothing about which e-mails exist. Keys hold keyed hashes, never the IP or
the address. :meth:`reset` lifts the limits of an IP or an account (``pochta guard reset``).
"""

from __future__ import annotations

from pochta import metrics
from pochta.errors import RateLimited
from pochta.guard.ratelimit import RateLimiter
from pochta.types import Limit


class LoginGuard:
    def __init__(
        self,
        limiter: RateLimiter,
        per_ip: Limit,
        per_account: Limit,
        per_ip_success: Limit | None = None,
    ) -> None:
        self.limiter = limiter
        self.per_ip = per_ip
        self.per_account = per_account
        self.per_ip_success = per_ip_success

    def check(self, ip: str, email: str) -> None:
        """RateLimited when this IP or this account may not try now; charges nothing."""
        checks = [(self.per_ip, ip), (self.per_account, _account(email))]
        if self.per_ip_success is not None:
            checks.append((self.per_ip_success, ip))
        decision = self.limiter.peek(*checks)
        if not decision.allowed:
            metrics.rate_limited("login")
            raise RateLimited(
                "too many login attempts; try again later", retry_after=decision.retry_after
            )

    def failed(self, ip: str, email: str) -> None:
        """A wrong password (or an unknown account): one failure for the IP and the account."""
        self.limiter.hit((self.per_ip, ip), (self.per_account, _account(email)))

    def succeeded(self, ip: str) -> None:
        """A correct password: one success for the IP (failures are not forgiven)."""
        if self.per_ip_success is not None:
            self.limiter.hit((self.per_ip_success, ip))

    def reset(self, *, ip: str | None = None, email: str | None = None) -> None:
        """Lift the limits of ``ip`` (failures and successes) and / or ``email``."""
        checks: list[tuple[Limit, str]] = []
        if ip is not None:
            checks.append((self.per_ip, ip))
            if self.per_ip_success is not None:
                checks.append((self.per_ip_success, ip))
        if email is not None:
            checks.append((self.per_account, _account(email)))
        if checks:
            self.limiter.reset(*checks)


def _account(email: str) -> str:
    return email.strip().lower()
