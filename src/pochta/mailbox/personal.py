"""The per-recipient step of a delivery: the installation's verdict, made personal by what
each recipient said (today their sender lists, :mod:`pochta.antispam.personal`), and the
recipients grouped by the verdict they get, so that the common case (nobody's list names the
sender) stays one group: one skeleton, one write.

The installation's verdict is the one that teaches (``Scanner.learn``): a personal verdict
never does.

Another personal input (a user's own learned words) joins here the same way: read what it
needs for all the recipients in one call, decide each recipient's verdict with a pure function
(as :func:`pochta.antispam.personal.personal` does), and let the grouping below do the rest;
whatever a group's verdict adds to its header must then be part of the group's key."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pochta.antispam import personal as rule
from pochta.antispam.verdict import Verdict
from pochta.errors import StorageError
from pochta.mailbox.lists import SenderListService
from pochta.types import User

log = logging.getLogger("pochta.delivery")

Group = tuple[Verdict, list[User]]


class Personal:
    def __init__(self, lists: SenderListService | None = None) -> None:
        self.lists = lists

    def groups(self, verdict: Verdict, sender: str, users: Sequence[User]) -> list[Group]:
        """``users`` grouped by their own verdict on a letter from ``sender`` (its From
        address), in the order of their first member; one group when nobody's differs. The
        lists are read once for all the users; a store that cannot be read leaves everyone
        the installation's verdict (logged), as the counters do: the mail flow never fails
        for them."""
        if self.lists is None or not sender or len(users) == 0:
            return [(verdict, list(users))]
        try:
            found = self.lists.lookup([u.id for u in users], sender)
        except StorageError as exc:
            log.warning("sender lists: not read, the installation's verdict for all: %s", exc)
            return [(verdict, list(users))]
        if not found:
            return [(verdict, list(users))]
        groups: dict[tuple[str, str | None], Group] = {}
        for user in users:
            mine = rule.personal(verdict, found.get(user.id, ()), sender)
            # what is stored of a verdict: its label and its header (not which entry matched)
            key = (mine.label, None if mine.listed is None else mine.listed.header())
            groups.setdefault(key, (mine, []))[1].append(user)
        return list(groups.values())
