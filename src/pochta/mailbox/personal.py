"""The per-recipient step of a delivery: the installation's verdict, made personal by what
each recipient said (their own words, their sender lists), and the
recipients grouped by the verdict they get, so that the common case (nobody's list names the
sender) stays one group: one skeleton, one write.

Two personal inputs, in this order: the words the recipient taught
(``Scanner.for_owner``: the model decides again with the recipient's own word statistic, once
the recipient taught enough; the same verdict object, at no cost, otherwise; a verdict with
the installation's label gives way to the installation's own, so that recipients whose words
agree with it share its letter: one skeleton, one write), then the
recipient's sender lists (:func:`pochta.antispam.personal.personal`: a block or an allow
decides over the words, within the list's own checks). Recipients whose verdict is the
installation's stay in one group; the others are grouped by their label and header (what is
stored of a verdict).

The installation's verdict is the one that teaches (``Scanner.learn``): a personal verdict
never does."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from pochta.antispam import personal as rule
from pochta.antispam.verdict import Analysis, Verdict
from pochta.errors import StorageError
from pochta.mailbox.lists import SenderListService
from pochta.types import ListEntry, User

log = logging.getLogger("pochta.delivery")

Group = tuple[Verdict, list[User]]
ForOwner = Callable[[Verdict, Analysis, int], Verdict]
"""A recipient's verdict by the words it taught (``Scanner.for_owner``)."""


class Personal:
    def __init__(
        self, lists: SenderListService | None = None, words: ForOwner | None = None
    ) -> None:
        self.lists = lists
        self.words = words

    def groups(
        self,
        verdict: Verdict,
        sender: str,
        users: Sequence[User],
        analysis: Analysis | None = None,
        candidates: Sequence[str] | None = None,
    ) -> list[Group]:
        """``users`` grouped by their own verdict on a letter from ``sender`` (its From
        address), in the order of their first member; one group when nobody's differs.
        ``analysis``: the letter's, for the words (without it, only the lists). The lists
        are read once for all the users; a store that cannot be read leaves everyone the
        installation's verdict (logged), as the counters do: the mail flow never fails for
        them. ``candidates``: the list values ``sender`` can match, when the worker that
        parsed the letter found them (``Prepared.candidates``); else found here."""
        users = list(users)
        found = self._lists(users, sender, candidates)
        words = self.words if analysis is not None else None
        if not found and words is None:
            return [(verdict, users)]
        groups: dict[tuple[str, str] | None, Group] = {}
        for user in users:
            mine = verdict
            if words is not None and analysis is not None:
                own = words(verdict, analysis, user.id)
                if own.label != verdict.label:  # agreeing words change nothing stored
                    mine = own
            if found:
                mine = rule.personal(mine, found.get(user.id, ()), sender)
            # what is stored of a verdict: its label and its header (not which entry matched)
            key = None if mine is verdict else (mine.label, mine.header())
            groups.setdefault(key, (mine, []))[1].append(user)
        return list(groups.values())

    def _lists(
        self, users: list[User], sender: str, candidates: Sequence[str] | None
    ) -> dict[int, Sequence[ListEntry]]:
        if self.lists is None or not sender or not users:
            return {}
        try:
            return dict(self.lists.lookup([u.id for u in users], sender, candidates))
        except StorageError as exc:
            log.warning("sender lists: not read, the installation's verdict for all: %s", exc)
            return {}
