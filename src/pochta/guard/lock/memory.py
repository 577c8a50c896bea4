"""Fences in memory (``MemoryFence``): fencing for a resource inside one process.

Fencing: a protected resource refuses writers whose token is older than one it has seen. A
lease can be lost without its holder noticing in time (a GC pause, SIGSTOP, a partition): the
lock then goes to someone else with a higher token. If every write to the resource carries the
writer's token and the resource keeps the highest token seen, the late writer is refused
(``StaleToken``) instead of overwriting newer state. ``RedisFence`` and ``SqliteFence``
(``pochta.guard.lock.redis``, ``pochta.guard.lock.sqlite``) do it for resources that processes
share. A resource with its own storage can do the same check in its own transaction: compare
with the stored token, refuse if lower, store the new one.
"""

from __future__ import annotations

import threading

from pochta.errors import StaleToken


class MemoryFence:
    """``Fence`` inside one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, bytes | None]] = {}

    def _set(self, resource: str, token: int, value: bytes | None, store: bool) -> None:
        with self._lock:
            top, old = self._seen.get(resource, (0, None))
            if token < top:
                raise StaleToken(f"fencing token {token} for {resource!r} is older than {top}")
            self._seen[resource] = (token, value if store else old)

    def admit(self, resource: str, token: int) -> None:
        self._set(resource, token, None, store=False)

    def write(self, resource: str, token: int, value: bytes) -> None:
        self._set(resource, token, value, store=True)

    def read(self, resource: str) -> tuple[int, bytes | None]:
        with self._lock:
            return self._seen.get(resource, (0, None))
