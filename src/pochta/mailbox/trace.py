"""The header fields pochta prepends to a letter it accepts.

The Received trace header, on every letter (RFC 5321 §4.4):

    Received: from <helo> ([<client ip>])
    <TAB>by <hostname> (pochta) with <ESMTP|SMTP|LMTP|UTF8SMTP> id <id>
    <TAB>for <recipient>; <date>

``for`` is given only for a single recipient (as Postfix does), so that one letter to many
recipients stays one byte string and its skeleton is stored once. The header uses the letter's
own line ending (CRLF from SMTP; LF from an imported file that uses LF).

``X-Pochta-Spam`` and ``Authentication-Results``, on a letter scored at delivery: printable
ASCII only, long values folded at spaces.
"""

from __future__ import annotations

from datetime import datetime
from email.utils import format_datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pochta.antispam.verdict import Verdict


def _clean(text: str, limit: int = 255) -> str:
    """Printable ASCII only: whatever a client said cannot break the header."""
    return "".join(c if 32 < ord(c) < 127 and c not in "()<>;" else "?" for c in text)[:limit]


def line_ending(raw: bytes) -> bytes:
    end = raw.find(b"\n")
    return b"\r\n" if end > 0 and raw[end - 1 : end] == b"\r" else b"\n"


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
    sep = eol + b"\t"
    parts = [
        f"Received: from {_clean(helo) or 'unknown'} ([{_clean(ip, 64)}])".encode(),
        f"by {_clean(hostname)} (pochta) with {protocol} id {_clean(queue_id, 32)}".encode(),
    ]
    date = format_datetime(when).encode()
    if recipient is not None:
        parts.append(f"for <{_clean(recipient, 320)}>; ".encode() + date)
    else:
        parts[-1] += b"; " + date
    return sep.join(parts) + eol


def verdict_headers(verdict: Verdict, authserv_id: str, eol: bytes = b"\r\n") -> bytes:
    """The verdict's header fields, ``authserv_id`` naming this host in the results."""
    ar = verdict.auth.header(authserv_id)
    lines = [f"X-Pochta-Spam: {verdict.header()}", f"Authentication-Results: {ar}"]
    return b"".join(_header_line(line, eol) for line in lines)


def _header_line(text: str, eol: bytes) -> bytes:
    """One header field as bytes: printable ASCII, long values folded at spaces."""
    clean = "".join(c if 32 <= ord(c) < 127 else "?" for c in text)
    words, lines, line = clean.split(" "), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > 76:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return (eol + b"\t").join(x.encode() for x in lines) + eol
