"""The CPU half of a delivery: parse the letter once, analyze it, split it. Pure; no I/O.

``prepare`` is what a worker process runs for each letter received over SMTP/LMTP (see
:mod:`pochta.mailbox.intake`), and what an import or a test runs in its own process: the raw
bytes are parsed once into a :class:`~pochta.mime.letter.Letter`, the verdict's analysis reads
it (when an analyzer is given), the shingles are taken from it (the same ones the verdict saw,
and later counted), and the split cuts the parts the parse planned. The result crosses the
process boundary: it holds the skeleton and the extracted parts, not the letter.

A worker process that can decide (:func:`pochta.mailbox.intake.init_pool_process` with a decider)
also decides the verdict there (the counters, the rules, the model: ``Prepared.verdict``).
What is left for the server (:meth:`pochta.mailbox.service.Mailbox.deliver_prepared`): the
decision when no worker made it, the personal step, the verdict's header lines put in front of
the skeleton, storing, and handing the counting back to the workers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

from pochta.antispam.personal import candidates
from pochta.antispam.shingles.counters import Packed
from pochta.antispam.shingles.extract import extract
from pochta.antispam.shingles.registry import Shingle
from pochta.antispam.verdict import Analysis, Analyzer, Verdict
from pochta.mailbox.trace import line_ending
from pochta.mime import normalize
from pochta.mime.letter import parse
from pochta.mime.split import Split, cut, whole
from pochta.types import Envelope

MAX_ADDRESS = 320  # characters of a From address read (64 + @ + 255)


@dataclass(frozen=True)
class Prepared:
    size: int  # bytes of the letter as received
    eol: bytes  # its line ending (for the header lines put in front of it)
    split: Split = field(repr=False)
    sender: str  # "Name <address>" of From, for the index
    subject: str
    date: float | None  # the Date field as a timestamp
    analysis: Analysis | None = None  # None: the letter was not scored
    shingles: tuple[Shingle, ...] = field(default=(), repr=False)  # to count after storing
    from_address: str = ""  # the header From's address, normalized (what sender lists match)
    verdict: Verdict | None = field(default=None, repr=False)  # decided by the worker, if so
    candidates: tuple[str, ...] | None = None  # the sender list values From can match
    refs: tuple[Packed, ...] | None = field(default=None, repr=False)  # see below
    """The counters' refs of the verdict's shingles, packed, when the worker that decided the
    verdict sent them apart (``pochta.mailbox.intake.for_the_server``; the verdict then has
    no shingles): what the server hands back to be counted."""


def prepare(
    raw: bytes,
    envelope: Envelope | None = None,
    helo: str | None = None,
    *,
    inline_limit: int,
    analyzer: Analyzer | None = None,
    shingles: bool = False,
) -> Prepared:
    """Parse once; analyze (``analyzer``) or only take the shingles (``shingles``); split."""
    started = time.monotonic()
    letter = parse(raw, inline_limit=inline_limit)
    analysis = None
    found: tuple[Shingle, ...] = ()
    if analyzer is not None:
        analysis = analyzer.analyze(letter, envelope, helo, started=started)
        found = analysis.shingles
    elif shingles:
        found = tuple(extract(letter, envelope))
    sender = normalize.address(letter.from_address[:MAX_ADDRESS]) or ""
    return Prepared(
        size=len(raw),
        eol=line_ending(raw),
        split=cut(raw, letter.planned),
        sender=letter.sender[:500],
        subject=letter.subject[:1000],
        date=_timestamp(letter.date),
        analysis=analysis,
        shingles=found,
        from_address=sender,
        candidates=tuple(candidates(sender)) if analysis is not None else None,
    )


def unprepared(raw: bytes, analysis: Analysis | None) -> Prepared:
    """A letter no worker could prepare in time: kept whole, not parsed (parsing it is what
    took too long), with whatever analysis stands in for the missing one."""
    return Prepared(len(raw), line_ending(raw), whole(raw), "", "", None, analysis)


def _timestamp(date: datetime | None) -> float | None:
    try:
        return date.timestamp() if date is not None else None
    except (OverflowError, ValueError, OSError):
        return None
