"""Login protection: rolling limits per client IP and per account, checked together."""

from __future__ import annotations

from pochta.errors import RateLimited
from pochta.guard.ratelimit import RateLimiter
from pochta.types import Limit


class LoginGuard:
    """``check`` charges one attempt to the IP and to the account (all or nothing) and raises
    RateLimited when either is used up. Unknown accounts are charged like real ones, so the
    answer tells nothing about which e-mails exist. Keys hold keyed hashes, never the IP or
    the address."""

    def __init__(self, limiter: RateLimiter, per_ip: Limit, per_account: Limit) -> None:
        self.limiter = limiter
        self.per_ip = per_ip
        self.per_account = per_account

    def check(self, ip: str, email: str) -> None:
        decision = self.limiter.hit((self.per_ip, ip), (self.per_account, email.strip().lower()))
        if not decision.allowed:
            raise RateLimited(
                "too many login attempts; try again later", retry_after=decision.retry_after
            )
