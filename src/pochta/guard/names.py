"""Names the guard stores things under: lock and resource names, and the keyed hash that keeps
IP addresses and e-mail addresses out of rate-limit keys.

A lock name becomes a Redis Cluster hash tag (``pochta:lock:{NAME}``), so every key of one
lock lives in one slot; that is why braces are refused.
"""

from __future__ import annotations

import hashlib
import hmac

from pochta.errors import InvalidInput

MAX_NAME = 200
SUBJECT_BYTES = 16  # 128 bits of HMAC-SHA256: collisions are out of reach at any user count


def check_name(name: str, what: str = "lock name") -> str:
    """``name`` if it can be used as a lock or resource name; InvalidInput otherwise."""
    if not 0 < len(name) <= MAX_NAME:
        raise InvalidInput(f"a {what} has 1 to {MAX_NAME} characters")
    if "{" in name or "}" in name or not name.isprintable() or any(c.isspace() for c in name):
        raise InvalidInput(f"a {what} has no braces, spaces or control characters: {name!r}")
    return name


def subject_digest(secret: bytes, scope: str, subject: str) -> str:
    """HMAC-SHA256 of ``subject`` (an IP, an e-mail address) under ``secret``, bound to
    ``scope`` (a limit's name) and truncated: stable per subject, meaningless without the
    secret, and not linkable across scopes."""
    mac = hmac.new(secret, scope.encode() + b"\0" + subject.encode(), hashlib.sha256)
    return mac.digest()[:SUBJECT_BYTES].hex()
