"""Valkyrie's I/O budget: a token bucket over the bytes a scrubber reads."""

from __future__ import annotations

import time
from collections.abc import Callable


class Throttle:
    """A token bucket over bytes read: ``spend(n)`` sleeps as long as needed to keep the
    average at ``mb_per_s`` (bursts of up to one second's worth)."""

    def __init__(
        self,
        mb_per_s: float | None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = None if mb_per_s is None or mb_per_s <= 0 else mb_per_s * 1e6
        self._monotonic = monotonic
        self._sleep = sleep
        self._allowance = self.rate or 0.0
        self._last = monotonic()

    def spend(self, n: int) -> None:
        if self.rate is None:
            return
        now = self._monotonic()
        self._allowance = min(self._allowance + (now - self._last) * self.rate, self.rate)
        self._last = now
        self._allowance -= n
        if self._allowance < 0:
            wait = -self._allowance / self.rate
            self._sleep(wait)
            self._allowance = 0.0
            self._last = self._monotonic()
