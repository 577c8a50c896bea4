"""The incoming queue's pure parts: an entry's record, its name, the retries' backoff, what its
runner's watch tells /healthz (no I/O).

With ``smtp.answer = "queued"`` an SMTP letter is answered 250 once it is durable in the
incoming queue (:mod:`pochta.mailbox.queuedb`), and delivered from there
(:mod:`pochta.mailbox.queuerunner`): Postfix's queue in front of its content filter. An entry is
the letter's bytes (or the file they are in) beside its :class:`Entry`, the envelope and the
client's facts the delivery needs, written as one record (:func:`encode`): a version byte, the
fields as JSON, and a CRC-32 of both, so that a record cut short or damaged is refused
(:class:`BadRecord`) rather than read as another letter.
"""

from __future__ import annotations

import json
import secrets
import zlib
from dataclasses import dataclass

VERSION = 1


class BadRecord(ValueError):
    """A queue record that cannot be read (cut short, damaged, of an unknown version)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One queued letter: ``id`` (the queue id of its 250 and of its Received header),
    ``sender`` (MAIL FROM, '' for the null path), ``recipients`` (as accepted at RCPT), the
    client's ``ip`` (None: a unix socket) and ``helo``, the ``trace`` header pochta put in
    front of it, its ``size`` in bytes (without the trace), ``at`` (when it was queued)."""

    id: str
    sender: str
    recipients: tuple[str, ...]
    ip: str | None
    helo: str | None
    trace: bytes
    size: int
    at: float


def new_id() -> str:
    """A queue id: 16 random hex digits (64 bits: the index remembers delivered ids for
    ``smtp.queue_remember_days``, and two letters must never share one meanwhile)."""
    return secrets.token_hex(8)


def valid_id(text: str) -> bool:
    return len(text) == 16 and all(c in "0123456789abcdef" for c in text)


def encode(entry: Entry) -> bytes:
    """The record of ``entry``: version byte, JSON, CRC-32 (4 bytes, big-endian) of both."""
    body = bytes([VERSION]) + json.dumps(
        {
            "id": entry.id,
            "sender": entry.sender,
            "recipients": list(entry.recipients),
            "ip": entry.ip,
            "helo": entry.helo,
            "trace": entry.trace.decode("latin-1"),
            "size": entry.size,
            "at": entry.at,
        },
        ensure_ascii=True,
        separators=(",", ":"),
    ).encode("ascii")
    return body + zlib.crc32(body).to_bytes(4, "big")


def decode(record: bytes) -> Entry:
    """The entry of a record :func:`encode` made; BadRecord for anything else."""
    if len(record) < 6:
        raise BadRecord(f"a record of {len(record)} bytes is too short")
    body, crc = record[:-4], record[-4:]
    if zlib.crc32(body).to_bytes(4, "big") != crc:
        raise BadRecord("the record's checksum does not match (cut short or damaged)")
    if body[0] != VERSION:
        raise BadRecord(f"unknown record version {body[0]}")
    try:
        d = json.loads(body[1:])
        entry = Entry(
            id=_str(d["id"]),
            sender=_str(d["sender"]),
            recipients=tuple(_str(r) for r in d["recipients"]),
            ip=None if d["ip"] is None else _str(d["ip"]),
            helo=None if d["helo"] is None else _str(d["helo"]),
            trace=_str(d["trace"]).encode("latin-1"),
            size=_int(d["size"]),
            at=float(d["at"]),
        )
    except (ValueError, KeyError, TypeError, UnicodeError) as exc:
        raise BadRecord(f"the record's fields cannot be read: {exc}") from exc
    if not valid_id(entry.id) or not entry.recipients or entry.size < 0:
        raise BadRecord("the record's fields are out of range")
    return entry


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not a string: {value!r}")
    return value


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"not an integer: {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Watch:
    """How the incoming queue's runner is doing (``QueueRunner.watch``, read by the health
    check for ``/healthz``): ``stalled``, seconds it has made no progress (no try ended, no
    read of the queue) while letters are due or being tried, or since its loop ended (0:
    nothing due, or progress); ``oldest``, the age in seconds of the oldest letter waiting in
    its slots, held ones left out (None: none)."""

    stalled: float
    oldest: float | None

    def problem(self, stalled_after: float) -> str | None:
        """Why the service is degraded, when the runner has made no progress for more than
        ``stalled_after`` seconds while letters are due (None: it is fine)."""
        if self.stalled <= stalled_after:
            return None
        return (
            f"the incoming queue's runner has made no progress for {self.stalled:.0f} s"
            " while letters are due"
        )


def backoff(attempts: int, first: float, most: float) -> float:
    """Seconds before the next try of an entry that failed ``attempts`` times (>= 1): ``first``,
    doubled at each failure, at most ``most`` (Postfix's minimal/maximal_backoff_time)."""
    if attempts < 1:
        return 0.0
    return min(most, first * 2.0 ** min(attempts - 1, 60))


def over(letters: int, size: int, *, max_letters: int, max_bytes: int) -> bool:
    """Whether a queue holding ``letters`` letters of ``size`` bytes in all is full."""
    return letters >= max_letters or size >= max_bytes


Outcome = str
"""How a try of an entry ended: ``done`` (delivered, or found delivered already), ``drop``
(it can never be delivered: none of its recipients has a mailbox any more; logged), ``hold``
(kept, never tried again: pochta cannot take the letter as it is; logged for an operator),
``retry`` (a temporary failure: tried again after :func:`backoff`)."""
OUTCOMES = ("done", "drop", "hold", "retry")
