"""The one feedback rule: what a user's change to a stored letter teaches, whatever the path
(the HTTP API's and webmail's moves, IMAP MOVE, COPY then EXPUNGE, STORE of ``$Junk`` /
``$NotJunk``, the first \\Seen).

The owner's word on a letter (:func:`says_spam`) is its ``$Junk`` / ``$NotJunk`` keyword
when it carries one of them (RFC 9051 §2.3.2; Thunderbird sets them, and moves the letter
itself), else its folder: in Spam = spam. A change that turns the word over teaches, as
:func:`decide` says:

- the learned words, of the installation and of the owner (owner = the account's id), through
  ``Scanner.feedback``: a word against pochta's verdict teaches the letter's words as
  ``FEEDBACK_WEIGHT`` letters of the owner's class, a word back to the verdict takes exactly
  that off. A letter moved to and fro teaches at most once, without any state: what is
  taught is a function of the word now and the verdict;
- the shingles' counters (complaint / unspam) and the admin history: once per letter and
  direction. The letter keeps a hidden flag (``COMPLAINED`` / ``UNSPAMMED``) set in the same
  atomic step of the index that says whether it was already set, so a double click, or a
  letter moved to and fro a hundred times, counts one complaint and one unspam;
- \\Seen set for the first time: the shingles' read counter.

A copy (IMAP COPY) has no verdict of its own: it carries ``SAID_SPAM`` when pochta called
the original spam, and the original's hidden flags, so that the copy goes on as the letter.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pochta.errors import MessageNotFound
from pochta.mime.letter import Letter, parse
from pochta.types import Activity, FlagIndex, LetterFlag

if TYPE_CHECKING:
    from pochta.antispam.shingles.registry import Shingle
    from pochta.antispam.shingles.shingler import Shingler
    from pochta.antispam.verdict import Scanner

log = logging.getLogger("pochta.mailbox")

SPAM = "Spam"
Word = Literal["spam", "not_spam"]


@dataclass(frozen=True, slots=True)
class State:
    """A letter as the rule sees it: its folder and flags."""

    folder: str
    flags: LetterFlag


def says_spam(state: State) -> bool:
    """The owner's word: its keyword when it has exactly one of ``$Junk`` / ``$NotJunk``,
    else whether it is in Spam."""
    junk = LetterFlag.JUNK in state.flags
    if junk != (LetterFlag.NOT_JUNK in state.flags):
        return junk
    return state.folder == SPAM


def placed_flags(folder: str, flags: LetterFlag) -> LetterFlag:
    """The flags of a letter its owner puts in ``folder`` (IMAP APPEND, an import): it has no
    verdict but its owner's word (:func:`says_spam`: a keyword, else the folder), kept as
    ``SAID_SPAM`` when that word is spam. Turning the word over later then teaches it, instead
    of taking off what nobody taught (pure)."""
    flags &= ~LetterFlag.SAID_SPAM
    return flags | LetterFlag.SAID_SPAM if says_spam(State(folder, flags)) else flags


def said_spam(verdict: str | None, flags: LetterFlag) -> bool:
    """Whether pochta called the letter (or the original of this copy) spam."""
    return verdict in ("spam", "phishing") or LetterFlag.SAID_SPAM in flags


@dataclass(frozen=True, slots=True)
class FeedbackEffect:
    read: bool  # \\Seen for the first time: the shingles' read counter
    word: Word | None  # the owner's word turned over: teach (words), count (shingles, history)
    counted: LetterFlag  # the hidden flag that says this direction was counted (or NONE)


def decide(before: State, after: State) -> FeedbackEffect:
    """What a change from ``before`` to ``after`` teaches (pure)."""
    read = LetterFlag.SEEN in after.flags and LetterFlag.SEEN not in before.flags
    was, now = says_spam(before), says_spam(after)
    if was == now:
        return FeedbackEffect(read, None, LetterFlag.NONE)
    if now:
        return FeedbackEffect(read, "spam", LetterFlag.COMPLAINED)
    return FeedbackEffect(read, "not_spam", LetterFlag.UNSPAMMED)


def moved_flags(flags: LetterFlag, folder: str) -> LetterFlag:
    """A letter's keywords once its owner moves it to ``folder``: the latest word wins, so a
    move into Spam drops ``$NotJunk`` and a move out of it drops ``$Junk``."""
    return flags & ~(LetterFlag.NOT_JUNK if folder == SPAM else LetterFlag.JUNK)


class Feedback:
    """The rule's effects. ``raw(letter_id)``: a stored letter's bytes (read only when some
    effect needs its content). Every effect is best effort: the user's change is made, and
    learning must not undo it (failures are logged)."""

    def __init__(
        self,
        index: FlagIndex,
        raw: Callable[[int], bytes],
        *,
        inline_limit: int = 4096,
        shingler: Shingler | None = None,
        scanner: Scanner | None = None,
        activity: Activity | None = None,
    ) -> None:
        self.index = index
        self.raw = raw
        self.inline_limit = inline_limit
        self.shingler = shingler
        self.scanner = scanner
        self.activity = activity

    def changed(
        self,
        user_id: int,
        letter_id: int,
        before: State,
        after: State,
        verdict: str | None,
        parsed: Letter | None = None,
    ) -> FeedbackEffect:
        """Teach what the change of this user's letter from ``before`` to ``after`` says;
        ``verdict``: pochta's at delivery; ``parsed``: the letter when the caller has it."""
        effect = decide(before, after)
        read = effect.read and self.shingler is not None
        if not read and (effect.word is None or (self.shingler is None and self.scanner is None)):
            return effect  # nothing to teach: the letter is not even read
        if parsed is None:
            try:
                parsed = parse(self.raw(letter_id), inline_limit=self.inline_limit)
            except MessageNotFound:
                return effect
        if read:
            self._shingles(parsed, "read")
        if effect.word is None:
            return effect
        if self.scanner is not None:
            word_verdict = "spam" if said_spam(verdict, after.flags) else "ham"
            self.scanner.feedback(parsed, effect.word, word_verdict, owner=user_id)
        if self._first(user_id, letter_id, effect.counted):
            shingles = self._shingles(parsed, effect.word)
            if self.activity is not None and shingles is not None:
                self.activity.feedback(
                    "complaint" if effect.word == "spam" else "unspam",
                    [(int(s.type), s.hash, s.value) for s in shingles],
                )
        return effect

    def _first(self, user_id: int, letter_id: int, flag: LetterFlag) -> bool:
        """Set ``flag`` on the letter; whether it was not set before (one atomic step)."""
        try:
            changed = self.index.set_flags(user_id, [letter_id], flag, LetterFlag.NONE)
        except Exception:
            log.exception("feedback: the letter's counted flag not set; not counted")
            return False
        return bool(changed) and flag not in changed[0][0]

    def _shingles(self, parsed: Letter, kind: str) -> list[Shingle] | None:
        if self.shingler is None:
            return []
        try:
            return self.shingler.feedback(parsed, kind)
        except Exception:
            log.exception("shingle counters: one letter's %s dropped", kind)
            return None

    def copied(self, flags: LetterFlag, verdict: str | None) -> LetterFlag:
        """The flags a copy of a letter is stored with: its own, and ``SAID_SPAM`` when
        pochta called the original spam."""
        if said_spam(verdict, flags):
            return flags | LetterFlag.SAID_SPAM
        return flags
