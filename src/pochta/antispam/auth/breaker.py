"""When the DNS server itself stops answering: stop asking it for a while, so that a resolver
that never answers costs each letter microseconds instead of ``antispam.dns_timeout`` seconds.
Pure logic, the clock passed in; :class:`~pochta.antispam.auth.asyncdns.SharedDns` drives it.

    up        questions go to the server. Each one that gets no reply within its timeout adds
              to a streak; a reply ends the streak.
    suspect   the streak reached ``after``: one probe is sent, a question the server answers
              at once if it is there at all (see ``DnsAsyncResolver.probe``); questions still
              go to the server meanwhile.
    down      the probe got no reply either: every question fails at once (``temperror``),
              and every ``pause`` seconds one probe is sent again; the first that gets a reply
              (any: an answer, REFUSED, SERVFAIL) brings the server up.

This is libevent's evdns (three timeouts in a row: the server is down, tried again after 10 s),
with one change. A question also times out when the *sender's* name servers never answer and
the recursive resolver asked waits on them; evdns then marks a healthy resolver dead (it is how
Tor relays' DNS "completely seized up", unbound-users, April 2016). Here, a stranger could send
a few letters from a domain whose name servers keep silent and switch SPF, DKIM and DMARC off
for every letter: a forgery of a domain that publishes ``p=reject`` would pass as
``temperror``. So the timeouts only make the server suspect, and only a server that does not
answer the probe either (the root zone's NS: a recursive resolver answers it from its cache,
an authoritative one refuses it at once) goes down.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

State = Literal["up", "suspect", "down"]


class Breaker:
    """``after``: questions timed out in a row that make the server suspect; ``pause``:
    seconds between two probes of a server that is down."""

    def __init__(
        self,
        *,
        after: int = 3,
        pause: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if after < 1 or pause <= 0:
            raise ValueError("after must be at least 1 and pause positive")
        self.after = after
        self.pause = pause
        self.clock = clock
        self.streak = 0
        self.state: State = "up"
        self.probing = False
        self.downs = 0  # times the server went down (for the log and metrics)
        self._retry_at = 0.0

    def allows(self) -> bool:
        """Whether a question may go to the server now (not while it is down)."""
        return self.state != "down"

    def replied(self) -> None:
        """A question got a reply (an answer, or that there is none)."""
        self.streak = 0

    def timed_out(self) -> None:
        """A question got no reply within its timeout."""
        self.streak += 1
        if self.state == "up" and self.streak >= self.after:
            self.state = "suspect"

    def take_probe(self) -> bool:
        """Whether a probe is to be sent now (then it is counted as in flight until
        :meth:`probed`): once when the server turns suspect, and every ``pause`` while it is
        down."""
        if self.probing:
            return False
        if self.state == "suspect" or (self.state == "down" and self.clock() >= self._retry_at):
            self.probing = True
            return True
        return False

    def probed(self, replied: bool) -> None:
        """What the probe found: a reply brings the server up, none keeps (or puts) it down
        for ``pause`` seconds more."""
        self.probing = False
        if replied:
            self.state, self.streak = "up", 0
            return
        if self.state != "down":
            self.downs += 1
        self.state = "down"
        self._retry_at = self.clock() + self.pause
