"""Device tokens: what a browser (a cookie) or an API client keeps after a successful login,
so that it stays a known client of that account wherever it connects from.

A token is ``<device id>.<expiry>.<mac>``: a random id, the second it expires, and an
HMAC-SHA256 (truncated to 128 bits) of both, of the account and of the account's password
``binding`` under a key derived from the guard secret. It is checked without any store: a
token another account issued, a token past its expiry, a forged one, and every token issued
before the account's password changed (the binding differs) are simply not a device. A
password change is what someone does when the password was stolen; a device that logged in
with the stolen password must not outlive it.

Python's ``hmac`` does the signing, as it does the pages' CSRF tokens: a signing library
(itsdangerous) would add a dependency for the same dozen lines.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time

from pochta.errors import InvalidInput
from pochta.guard.ratelimit import MIN_SECRET
from pochta.types import Clock

MAX_TOKEN = 128  # characters; a token is 22 + 1 + 10 + 1 + 22
MAC_BYTES = 16
ID_BYTES = 16


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Devices:
    """Issues and checks device tokens valid for ``ttl`` seconds."""

    def __init__(self, secret: bytes | str, ttl: float, *, clock: Clock = time.time) -> None:
        raw = secret.encode() if isinstance(secret, str) else bytes(secret)
        if len(raw) < MIN_SECRET:
            raise InvalidInput(f"the device-token secret has at least {MIN_SECRET} bytes")
        if not ttl > 0:
            raise InvalidInput("device tokens live > 0 seconds")
        self._key = hmac.new(raw, b"pochta device tokens", hashlib.sha256).digest()
        self.ttl = ttl
        self._clock = clock

    def _mac(self, account: str, binding: str, device: str, expires: str) -> str:
        message = "\0".join(("device", account, binding, device, expires)).encode()
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest()[:MAC_BYTES])

    def issue(self, account: str, binding: str, device: str | None = None) -> str:
        """A token for ``device`` (a new id when None) of ``account``, valid for ``ttl``."""
        device = device or _b64(secrets.token_bytes(ID_BYTES))
        expires = str(int(self._clock() + self.ttl))
        return f"{device}.{expires}.{self._mac(account, binding, device, expires)}"

    def verify(self, token: str | None, account: str, binding: str) -> str | None:
        """The device id when ``token`` is a valid token of ``account`` under ``binding``;
        None for anything else (never an error: a bad token is just no device)."""
        if not token or len(token) > MAX_TOKEN or not token.isascii() or not binding:
            return None
        parts = token.split(".")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[0]:
            return None
        device, expires, mac = parts
        if not hmac.compare_digest(mac, self._mac(account, binding, device, expires)):
            return None
        return device if int(expires) > self._clock() else None
