"""Accounts: users, their passwords and sessions (``Users``), and the user store as the
leaked-credential audit sees it (``IndexAccounts``, a ``pochta.types.Accounts``)."""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from pochta import metrics
from pochta.errors import InvalidCredentials, InvalidInput, RateLimited, ResetRequired
from pochta.guard.logins import Admission, LoginGuard
from pochta.guard.passwords import DEFAULT, Passwords
from pochta.types import AccountIndex, Activity, Clock, User, UserIndex

MIN_PASSWORD = 8


@dataclass(frozen=True, slots=True)
class Entry:
    """A login: the user, a session token, and a device token for the next login (None
    when login limits are off)."""

    user: User
    token: str = field(repr=False)
    device: str | None = field(default=None, repr=False)


class Users:
    """Adds users, sets and checks passwords, and opens, checks and ends sessions (a random
    token; the index keeps only its SHA-256)."""

    def __init__(
        self,
        index: AccountIndex,
        *,
        session_ttl: float = 30 * 86400,
        logins: LoginGuard | None = None,
        activity: Activity | None = None,
        passwords: Passwords = DEFAULT,
        clock: Clock = time.time,
    ) -> None:
        self.index = index
        self.session_ttl = session_ttl
        self.logins = logins
        self.activity = activity
        self.passwords = passwords
        self._clock = clock

    def add_user(self, email: str, password: str, *, admin: bool = False) -> User:
        if len(password) < MIN_PASSWORD:
            raise InvalidInput(f"a password needs at least {MIN_PASSWORD} characters")
        return self.index.add_user(email, self.passwords.hash(password), admin=admin)

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
        self.index.set_password(user.id, self.passwords.hash(password))

    def check_password(self, email: str, password: str) -> User:
        """The user whose password this is; the same InvalidCredentials for an unknown e-mail
        and a wrong password (an unknown e-mail costs one hash too, so timing tells nothing)."""
        return self._check(self.index.user(email), password)

    def _check(self, user: User | None, password: str) -> User:
        if user is None:
            self.passwords.verify(self.passwords.dummy(), password)
            raise InvalidCredentials("wrong e-mail or password")
        if not self.passwords.verify(user.password_hash, password):
            raise InvalidCredentials("wrong e-mail or password")
        if user.reset_required:
            raise ResetRequired(
                "this password appeared in a leak and no longer works; set a new one"
            )
        return user

    def login(
        self, email: str, password: str, ip: str = "local", device: str | None = None
    ) -> tuple[User, str]:
        """A session token, under the login limits (``verify``)."""
        user = self.verify(email, password, ip, device)
        return user, self.open_session(user)

    def verify(
        self, email: str, password: str, ip: str = "local", device: str | None = None
    ) -> User:
        """The user, under the login limits but with no session: ``admit``, then (in this
        thread: a server waits asynchronously instead) the wait the guard asks for, then
        ``verify_admitted``."""
        admission = self.admit(email, ip, device)
        if admission.wait > 0:
            time.sleep(admission.wait)
        return self.verify_admitted(admission, password)

    def admit(self, email: str, ip: str = "local", device: str | None = None) -> Admission:
        """Before the password: who is asking and how long it waits (``LoginGuard.admit``);
        RateLimited when this client may not try now. ``device``: the device token the
        client sent, if any."""
        if self.logins is None:
            return Admission(email, ip, "", None)
        user = self.index.user(email)
        try:
            return self.logins.admit(ip, email, binding=_binding(user), device=device)
        except RateLimited:
            metrics.login_failed("rate_limited")
            raise

    def verify_admitted(self, admission: Admission, password: str) -> User:
        """The user whose password this is, once admitted (and waited); the outcome is
        charged to the client (a failure) or remembered (a success)."""
        found = self.index.user(admission.email)
        try:
            user = self._check(found, password)
        except InvalidCredentials:
            metrics.login_failed("invalid_credentials")
            if self.logins is not None:
                self.logins.failed(admission)
            if self.activity is not None:  # what was typed is kept only when it is a user
                self.activity.login_failed(admission.ip, None if found is None else found.email)
            raise
        except ResetRequired:  # a right (leaked) password: what credential stuffing finds
            metrics.login_failed("password_reset_required")
            if self.logins is not None:
                self.logins.leaked(admission)
            raise
        if self.logins is not None:
            self.logins.succeeded(replace(admission, binding=_binding(user)))
        return user

    def enter(self, admission: Admission, password: str) -> Entry:
        """``verify_admitted``, then a session and a device token for the next login."""
        user = self.verify_admitted(admission, password)
        device = None
        if self.logins is not None:
            device = self.logins.device_token(replace(admission, binding=_binding(user)))
        return Entry(user, self.open_session(user), device)

    def open_session(self, user: User) -> str:
        token = secrets.token_urlsafe(32)
        self.index.add_session(_token_hash(token), user.id, self._clock() + self.session_ttl)
        return token

    def trust(self, email: str, ip: str) -> None:
        """Make ``ip`` a known client of the account (``pochta guard trust``)."""
        user = self.index.user(email)
        if user is None:
            raise InvalidInput(f"no user {email}")
        if self.logins is None:
            raise InvalidInput("login limits are off")
        self.logins.trust(email, _binding(user), ip)

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
    def __init__(self, index: UserIndex) -> None:
        self.index = index

    def password_hash(self, email: str) -> str | None:
        user = self.index.user(email)
        return None if user is None else user.password_hash

    def require_reset(self, emails: Collection[str]) -> int:
        return self.index.require_reset(emails)


def _token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _binding(user: User | None) -> str:
    """What binds an account's known clients and device tokens to its current password: a
    fingerprint of the password hash ("" for no account). A new password, a new binding."""
    if user is None:
        return ""
    return hashlib.sha256(b"pochta binding\0" + user.password_hash.encode()).hexdigest()[:32]
