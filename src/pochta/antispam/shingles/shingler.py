"""The shingler as the rest of pochta sees it: a letter's shingles and their counters.

shingler = Shingler(Counters(SQLiteStore(path)))        # app.py builds it from settings
shingler.start()                                        # the counters' background flusher
shingler.observe(raw, Envelope(ip, mail_from, rcpts), verdict="ham")   # at delivery
shingler.feedback(raw, "spam")                          # the user moved it to Spam
shingler.feedback(raw, "not_spam")                      # ... out of Spam
shingler.feedback(raw, "read")                          # first opened
shingler.stats(raw, ["24h"])                            # counters of each shingle
shingler.close()                                        # flushes the buffer
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pochta.antispam.shingles.counters import Ref
from pochta.antispam.shingles.counters.buckets import DEFAULT_WINDOWS, Counts, Window, parse_window
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.extract import extract
from pochta.antispam.shingles.registry import Shingle, query_refs, update_refs
from pochta.errors import InvalidInput, StorageError
from pochta.mime.letter import Letter, parse
from pochta.types import Envelope

log = logging.getLogger("pochta.antispam")

VERDICT_KINDS = {None: "ham", "ham": "ham", "spam": "spam", "phishing": "spam"}
"""A delivery's verdict -> the counter it feeds."""

FEEDBACK_KINDS = {
    "spam": "complaint",  # "this is spam"
    "complaint": "complaint",
    "not_spam": "unspam",  # "not spam"
    "unspam": "unspam",
    "read": "read",  # the letter was opened (call once per letter and reader)
}


@dataclass(frozen=True, slots=True)
class ShingleStats:
    shingle: Shingle
    counters: dict[str, Counts]  # window name -> kind -> value


def windows_of(names: Sequence[str] | None) -> list[Window]:
    parsed = [parse_window(n) for n in (names or DEFAULT_WINDOWS)]
    if not parsed or len(parsed) > 16:
        raise InvalidInput("give between 1 and 16 windows")
    return parsed


class Shingler:
    def __init__(self, counters: Counters) -> None:
        self.counters = counters

    def shingles(self, raw: bytes | Letter, envelope: Envelope | None = None) -> list[Shingle]:
        """Every shingle of a letter (pure; never raises)."""
        return extract(_parsed(raw), envelope)

    def observe(
        self, raw: bytes | Letter, envelope: Envelope | None = None, verdict: str | None = None
    ) -> list[Shingle]:
        """A delivered letter: its shingles' ham or spam counters + 1 (one update; buffered,
        so it returns at once; never raises for the counters). Returns the shingles."""
        try:
            kind = VERDICT_KINDS[verdict]
        except KeyError:
            raise InvalidInput(
                f"unknown verdict {verdict!r}; known: ham, spam, phishing, or none"
            ) from None
        shingles = extract(_parsed(raw), envelope)
        self._count(update_refs(shingles), kind)
        return shingles

    def feedback(
        self, raw: bytes | Letter, kind: str, envelope: Envelope | None = None
    ) -> list[Shingle]:
        """A user's word on a letter: "spam" (complaint), "not_spam" (unspam) or "read".
        Pass the delivery's envelope when it is known: without it the sender is the From
        address and the recipients the To/Cc ones, so the envelope-based shingles (return
        path, sender pairs) may differ from the delivery's."""
        try:
            counter = FEEDBACK_KINDS[kind]
        except KeyError:
            raise InvalidInput(
                f"unknown feedback {kind!r}; known: {', '.join(FEEDBACK_KINDS)}"
            ) from None
        shingles = extract(_parsed(raw), envelope)
        self._count(update_refs(shingles), counter)
        return shingles

    def count(self, shingles: list[Shingle], kind: str) -> None:
        """Count shingles already extracted (a delivery's, with its verdict's kind)."""
        self._count(update_refs(shingles), kind)

    def _count(self, refs: list[Ref], kind: str) -> None:
        """The mail flow never waits for, nor fails with, the counters: when the buffer is
        full (the store has been down for a while) this letter's increments are dropped and
        logged."""
        try:
            self.counters.update(refs, kind, wait=0)
        except StorageError as exc:
            log.warning("shingle counters: one letter's %s increments dropped: %s", kind, exc)

    def stats(
        self,
        raw: bytes | Letter,
        windows: Sequence[str] | None = None,
        envelope: Envelope | None = None,
    ) -> list[ShingleStats]:
        shingles = extract(_parsed(raw), envelope)
        values = self.counters.query(query_refs(shingles), windows_of(windows))
        return [ShingleStats(s, v) for s, v in zip(shingles, values, strict=True)]

    def query(
        self, refs: Sequence[Ref], windows: Sequence[str] | None = None
    ) -> list[dict[str, Counts]]:
        return self.counters.query(refs, windows_of(windows))

    def update(self, refs: Sequence[Ref], kind: str, n: int = 1) -> None:
        self.counters.update(refs, kind, n)

    def start(self) -> None:
        """Start the counters' background flusher (``Counters.start``)."""
        self.counters.start()

    def close(self) -> None:
        self.counters.close()


def _parsed(raw: bytes | Letter) -> Letter:
    return raw if isinstance(raw, Letter) else parse(raw)
