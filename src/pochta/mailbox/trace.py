"""The header fields pochta prepends to a letter it accepts, folded by the standard library.

The Received trace header, on every letter (RFC 5321 §4.4):

    Received: from <helo> ([<client ip>]) by <hostname> (pochta) with <ESMTP|SMTP|LMTP|UTF8SMTP>
     id <id> for <recipient>; <date>

``for`` is given only for a single recipient (as Postfix does), so that one letter to many
recipients stays one byte string and its skeleton is stored once.

``X-Pochta-Spam`` and ``Authentication-Results``, on a letter scored at delivery.

Every field is folded by :data:`email.policy.compat32` (the stdlib's ``email.header.Header``
algorithm): lines of at most 78 characters where the value allows it, broken first after a
``;`` (so each result of Authentication-Results, and the date of Received, starts a line of its
own), then at a space; a word longer than a line is kept whole, never turned into an RFC 2047
encoded word. What a client said (HELO, recipient) is reduced to printable ASCII first, so no
value can carry a line break or a second header. The header uses the letter's own line ending
(CRLF from SMTP; LF from an imported file that uses LF). The same inputs always give the same
bytes.
"""

from __future__ import annotations

from datetime import datetime
from email.policy import compat32
from email.utils import format_datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pochta.antispam.verdict import Verdict

MAX_LINE = 78  # RFC 5322 2.1.1: SHOULD be no more than 78 characters


def _clean(text: str, limit: int = 255) -> str:
    """Printable ASCII only: whatever a client said cannot break the header."""
    return "".join(c if 32 < ord(c) < 127 and c not in "()<>;" else "?" for c in text)[:limit]


def line_ending(raw: bytes) -> bytes:
    end = raw.find(b"\n")
    return b"\r\n" if end > 0 and raw[end - 1 : end] == b"\r" else b"\n"


def field(name: str, value: str, eol: bytes = b"\r\n") -> bytes:
    """One header field as bytes, folded by the stdlib: ``value`` reduced to printable ASCII
    (anything else, a line break included, becomes ``?``), each line ending with ``eol``."""
    clean = "".join(c if 32 <= ord(c) < 127 else "?" for c in value)
    policy = compat32.clone(linesep=eol.decode("ascii"), max_line_length=MAX_LINE)
    return policy.fold_binary(name, clean)


def received(
    *,
    helo: str,
    ip: str,
    hostname: str,
    protocol: str,
    queue_id: str,
    recipient: str | None,
    when: datetime,
    eol: bytes = b"\r\n",
) -> bytes:
    value = (
        f"from {_clean(helo) or 'unknown'} ([{_clean(ip, 64)}])"
        f" by {_clean(hostname)} (pochta) with {protocol} id {_clean(queue_id, 32)}"
    )
    if recipient is not None:
        value += f" for <{_clean(recipient, 320)}>"
    return field("Received", f"{value}; {format_datetime(when)}", eol)


def verdict_headers(verdict: Verdict, authserv_id: str, eol: bytes = b"\r\n") -> bytes:
    """The verdict's header fields, ``authserv_id`` naming this host in the results."""
    return field("X-Pochta-Spam", verdict.header(), eol) + field(
        "Authentication-Results", verdict.auth.header(authserv_id), eol
    )
