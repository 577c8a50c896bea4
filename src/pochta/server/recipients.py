"""The recipients an RCPT TO found a mailbox for lately, so that the next RCPT for one of them
is answered on the event loop, without a lookup in the index (a thread's hop there and back:
a futex wake, the loop's wake-up, a query).

Only addresses that have a mailbox are kept (an unknown one is looked up every time, so a
mailbox just added is found at once, and what a client sends cannot fill this), for ``ttl``
seconds from their lookup, ``size`` at most (the oldest lookup goes first). A mailbox deleted
meanwhile is still accepted at RCPT until then; its letter is not stored for it: the
delivery looks every recipient up again (``DeliveryHandler._store``), as for a mailbox deleted
between RCPT and the end of DATA. Dovecot's auth cache and Postfix's verify cache keep
positive answers in the same way. Pure: no I/O, the clock passed in.
"""

from __future__ import annotations

import time

from pochta.types import Clock


class KnownRecipients:
    """Addresses found to have a mailbox within the last ``ttl`` seconds (``ttl`` 0: none is
    kept, every RCPT is looked up)."""

    def __init__(self, ttl: float, size: int = 10_000, clock: Clock = time.monotonic) -> None:
        self.ttl = ttl
        self.size = size
        self._clock = clock
        self._until: dict[str, float] = {}  # address -> when it stops counting, oldest first

    def known(self, address: str) -> bool:
        """Whether ``address`` was found to have a mailbox less than ``ttl`` seconds ago."""
        until = self._until.get(address)
        if until is None:
            return False
        if until > self._clock():
            return True
        del self._until[address]
        return False

    def found(self, address: str) -> None:
        """``address`` was just looked up and has a mailbox."""
        if self.ttl <= 0:
            return
        self._until.pop(address, None)  # to the end: the oldest lookups are first
        while len(self._until) >= self.size:
            del self._until[next(iter(self._until))]
        self._until[address] = self._clock() + self.ttl

    def __len__(self) -> int:
        return len(self._until)
