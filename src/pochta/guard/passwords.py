"""Password hashing with argon2id (argon2-cffi); the only place that knows the parameters.

New hashes take the cost an installation sets (``[guard] password_time_cost``,
``password_memory_kib``, ``password_lanes``; by default RFC 9106's second recommended option,
argon2-cffi's own: 3 passes over 64 MiB in 4 lanes). A stored hash carries its parameters, so
one made with another cost still verifies. The dummy hash an unknown account is checked
against (so that timing does not tell whether an account exists) is made with the same cost as
a real one.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError


@dataclass(frozen=True, slots=True)
class Cost:
    """argon2id's parameters for new hashes."""

    time: int = 3  # passes over the memory
    memory_kib: int = 65536
    lanes: int = 4

    def __post_init__(self) -> None:
        if not (1 <= self.lanes <= 64 and self.time >= 1 and self.memory_kib >= 8 * self.lanes):
            raise ValueError(f"argon2 cost {self}: needs memory_kib >= 8 x lanes, time >= 1")


class Passwords:
    """Hashes and checks passwords at one cost."""

    def __init__(self, cost: Cost = Cost()) -> None:
        self.cost = cost
        self._hasher = PasswordHasher(
            time_cost=cost.time, memory_cost=cost.memory_kib, parallelism=cost.lanes
        )
        self._dummy: str | None = None
        self._lock = threading.Lock()

    def hash(self, password: str) -> str:
        """An argon2id hash string with its own salt and parameters."""
        return self._hasher.hash(password)

    def verify(self, hashed: str, password: str) -> bool:
        """True when ``password`` matches; False on a mismatch or an unreadable hash."""
        try:
            return self._hasher.verify(hashed, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False

    def needs_rehash(self, hashed: str) -> bool:
        """True when the hash was made with other parameters than this cost's."""
        return self._hasher.check_needs_rehash(hashed)

    def dummy(self) -> str:
        """A hash of a random password at this cost, made once: what an unknown account's
        password is checked against."""
        with self._lock:
            if self._dummy is None:
                self._dummy = self.hash(secrets.token_urlsafe(16))
            return self._dummy


DEFAULT = Passwords()


def hash_password(password: str) -> str:
    """An argon2id hash at the default cost."""
    return DEFAULT.hash(password)


def verify_password(hashed: str, password: str) -> bool:
    """True when ``password`` matches ``hashed`` (whatever cost made it)."""
    return DEFAULT.verify(hashed, password)


def needs_rehash(hashed: str) -> bool:
    """True when the hash was made with other parameters than the default cost's."""
    return DEFAULT.needs_rehash(hashed)
