"""Password hashing with argon2id (argon2-cffi); the only place that knows the parameters."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

_hasher = PasswordHasher()


def hash_password(password: str) -> str:
    """An argon2id hash string with its own salt and parameters."""
    return _hasher.hash(password)


def verify_password(hashed: str, password: str) -> bool:
    """True when ``password`` matches; False on a mismatch or an unreadable hash."""
    try:
        return _hasher.verify(hashed, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(hashed: str) -> bool:
    """True when the hash was made with weaker parameters than the current ones."""
    return _hasher.check_needs_rehash(hashed)
