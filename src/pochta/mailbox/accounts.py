"""Accounts: users, their passwords and sessions (``Users``), and the user store as the
leaked-credential audit sees it (``IndexAccounts``, a ``pochta.types.Accounts``)."""

from __future__ import annotations

import functools
import hashlib
import secrets
import time
from collections.abc import Collection
from dataclasses import replace

from pochta import metrics
from pochta.errors import InvalidCredentials, InvalidInput, RateLimited, ResetRequired
from pochta.guard.logins import LoginGuard
from pochta.guard.passwords import hash_password, verify_password
from pochta.types import Activity, Clock, MailIndex, User

MIN_PASSWORD = 8


class Users:
    """Adds users, sets and checks passwords, and opens, checks and ends sessions (a random
    token; the index keeps only its SHA-256)."""

    def __init__(
        self,
        index: MailIndex,
        *,
        session_ttl: float = 30 * 86400,
        logins: LoginGuard | None = None,
        activity: Activity | None = None,
        clock: Clock = time.time,
    ) -> None:
        self.index = index
        self.session_ttl = session_ttl
        self.logins = logins
        self.activity = activity
        self._clock = clock

    def add_user(self, email: str, password: str, *, admin: bool = False) -> User:
        if len(password) < MIN_PASSWORD:
            raise InvalidInput(f"a password needs at least {MIN_PASSWORD} characters")
        return self.index.add_user(email, hash_password(password), admin=admin)

    def set_admin(self, email: str, admin: bool) -> User:
        """Grant or revoke the admin role (the admin pages); the user as it is now."""
        user = self.index.user(email)
        if user is None or not self.index.set_admin(user.id, admin):
            raise InvalidInput(f"no user {email}")
        return replace(user, admin=admin)

    def set_password(self, email: str, password: str) -> None:
        if len(password) < MIN_PASSWORD:
            raise InvalidInput(f"a password needs at least {MIN_PASSWORD} characters")
        user = self.index.user(email)
        if user is None:
            raise InvalidInput(f"no user {email}")
        self.index.set_password(user.id, hash_password(password))

    def check_password(self, email: str, password: str) -> User:
        """The user whose password this is; the same InvalidCredentials for an unknown e-mail
        and a wrong password (an unknown e-mail costs one hash too, so timing tells nothing)."""
        return self._check(self.index.user(email), password)

    def _check(self, user: User | None, password: str) -> User:
        if user is None:
            verify_password(_dummy_hash(), password)
            raise InvalidCredentials("wrong e-mail or password")
        if not verify_password(user.password_hash, password):
            raise InvalidCredentials("wrong e-mail or password")
        if user.reset_required:
            raise ResetRequired(
                "this password appeared in a leak and no longer works; set a new one"
            )
        return user

    def login(self, email: str, password: str, ip: str = "local") -> tuple[User, str]:
        """A session token; RateLimited when this IP or this account failed too often, or
        this IP logged in too often (checked before the password is looked at; a failure is
        charged to the IP and the account, a success to the IP's much larger allowance)."""
        user = self.verify(email, password, ip)
        token = secrets.token_urlsafe(32)
        self.index.add_session(_token_hash(token), user.id, self._clock() + self.session_ttl)
        return user, token

    def verify(self, email: str, password: str, ip: str = "local") -> User:
        """The user, under the same login limits as ``login`` but with no session (IMAP
        logs in once per connection)."""
        try:
            if self.logins is not None:
                self.logins.check(ip, email)
        except RateLimited:
            metrics.login_failed("rate_limited")
            raise
        found = self.index.user(email)
        try:
            user = self._check(found, password)
        except InvalidCredentials:
            metrics.login_failed("invalid_credentials")
            if self.logins is not None:
                self.logins.failed(ip, email)
            if self.activity is not None:  # what was typed is kept only when it is a user
                self.activity.login_failed(ip, None if found is None else found.email)
            raise
        except ResetRequired:  # a right (leaked) password: what credential stuffing finds
            metrics.login_failed("password_reset_required")
            if self.logins is not None:
                self.logins.succeeded(ip)
            raise
        if self.logins is not None:
            self.logins.succeeded(ip)
        return user

    def authenticate(self, token: str) -> int:
        user_id = self.index.session_user(_token_hash(token), self._clock())
        if user_id is None:
            raise InvalidCredentials("the session token is not valid (log in again)")
        return user_id

    def logout(self, token: str) -> None:
        self.index.drop_session(_token_hash(token))

    def user(self, email: str) -> User | None:
        return self.index.user(email)


class IndexAccounts:
    def __init__(self, index: MailIndex) -> None:
        self.index = index

    def password_hash(self, email: str) -> str | None:
        user = self.index.user(email)
        return None if user is None else user.password_hash

    def require_reset(self, emails: Collection[str]) -> int:
        return self.index.require_reset(emails)


def _token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@functools.cache
def _dummy_hash() -> str:
    return hash_password(secrets.token_urlsafe(16))
