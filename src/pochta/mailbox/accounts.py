"""The user store as the leaked-credential audit sees it (``pochta.types.Accounts``)."""

from __future__ import annotations

from collections.abc import Collection

from pochta.types import MailIndex


class IndexAccounts:
    def __init__(self, index: MailIndex) -> None:
        self.index = index

    def password_hash(self, email: str) -> str | None:
        user = self.index.user(email)
        return None if user is None else user.password_hash

    def require_reset(self, emails: Collection[str]) -> int:
        return self.index.require_reset(emails)
