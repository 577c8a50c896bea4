"""Personal sender lists: each account's "never spam from" (allow) and "always spam from"
(block) entries, an address or a domain (:mod:`pochta.antispam.personal` says how they match
and what they do to a verdict).

    SenderListService   what the doors call (HTTP API, webmail, CLI): validates, bounds
    SenderLists         the store Protocol (pochta.types): memory.py, sqlite.py (a table of
                        the mailbox database), postgres.py (when the mailbox lives there)

Bounded: at most ``max_entries`` (``mailbox.sender_list_max``) per account, each at most
:data:`pochta.antispam.personal.MAX_ENTRY` characters; a bad value is an InvalidInput (a 400)
that says why.
"""

from __future__ import annotations

from collections.abc import Sequence

from pochta.antispam.personal import candidates, entry_value
from pochta.errors import InvalidInput, NotFound
from pochta.mailbox.lists.memory import MemorySenderLists
from pochta.types import ListAction, ListEntry, SenderLists

__all__ = ["MemorySenderLists", "SenderListService"]

MAX_ENTRIES = 1000
ACTIONS: tuple[ListAction, ...] = ("allow", "block")


class EntryNotFound(NotFound):
    """The account has no such entry."""

    code = "entry_not_found"


class SenderListService:
    def __init__(self, store: SenderLists, *, max_entries: int = MAX_ENTRIES) -> None:
        self.store = store
        self.max_entries = max_entries

    def entries(self, user_id: int) -> list[ListEntry]:
        return self.store.entries(user_id, self.max_entries)

    def add(self, user_id: int, value: str, action: str) -> ListEntry:
        """Add an entry (or change the action of the same one); the entry as stored."""
        if action not in ACTIONS:
            raise InvalidInput(f"the action is allow or block, not {action[:20]!r}")
        entry = ListEntry(entry_value(value), "allow" if action == "allow" else "block")
        self.store.add(user_id, entry, self.max_entries)
        return entry

    def remove(self, user_id: int, value: str) -> ListEntry:
        """Remove an entry; the entry removed (EntryNotFound: there was none)."""
        normal = entry_value(value)
        own = {e.value: e for e in self.store.lookup([user_id], [normal]).get(user_id, [])}
        if normal not in own or not self.store.remove(user_id, normal):
            raise EntryNotFound(f"no entry {normal!r} in the list")
        return own[normal]

    def forget(self, user_id: int) -> int:
        """Drop the account's whole list (the account is being deleted)."""
        return self.store.forget(user_id)

    def lookup(
        self, user_ids: Sequence[int], sender: str, values: Sequence[str] | None = None
    ) -> dict[int, list[ListEntry]]:
        """In one store read: the entries of each account that can match the From address
        (``values``: its ``candidates``, when they are known already)."""
        values = candidates(sender) if values is None else values
        if not values or not user_ids:
            return {}
        return self.store.lookup(user_ids, values)

    def close(self) -> None:
        self.store.close()
