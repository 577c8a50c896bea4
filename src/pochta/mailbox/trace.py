"""The header fields pochta prepends to a letter it accepts, folded as the standard library folds.

The Received trace header, on every letter (RFC 5321 §4.4):

    Received: from <helo> ([<client ip>]) by <hostname> (pochta) with <ESMTP|SMTP|LMTP|UTF8SMTP>
     id <id> for <recipient>; <date>

``for`` is given only for a single recipient (as Postfix does), so that one letter to many
recipients stays one byte string and its skeleton is stored once.

``X-Pochta-Spam`` and ``Authentication-Results``, on a letter scored at delivery.

And what pochta takes away before it adds its own (:func:`without_claims`): fields that arrive
with a letter claiming to be pochta's, ``Authentication-Results`` with pochta's authserv-id (RFC
8601 §5: an MTA must remove them) and every ``X-Pochta-*`` field, so that a sender cannot write
``spf=pass`` or ``X-Pochta-Spam: ham`` for pochta; every other byte of the letter is kept.

Every field is folded as :data:`email.policy.compat32` folds it (the stdlib's
``email.header.Header`` algorithm, redone by :func:`_folded` at a quarter of its cost; a test
compares the two): lines of at most 78 characters where the value allows it, broken first after a
``;`` (so each result of Authentication-Results, and the date of Received, starts a line of its
own), then at a space; a word longer than a line is kept whole, never turned into an RFC 2047
encoded word. What a client said (HELO, recipient) is reduced to printable ASCII without
``;`` or ``,`` first, so no value can carry a line break or a second header, nor choose where
the field is folded. The header uses the letter's own line ending
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
_SHAPING = frozenset("()<>;,")  # the characters :func:`_clean` replaces beside the unprintable


def _clean(text: str, limit: int = 255) -> str:
    """Printable ASCII only, and none of the characters that shape the field (comments,
    the address's brackets, and the ``;`` and ``,`` a fold breaks after): whatever a client
    said can neither break the header nor move where its lines are folded (a HELO name
    ending in ``,`` made the stdlib's fold break after it and leave a line of 150 characters
    with spaces in it). A value with nothing to replace (the usual HELO, address, id) is
    returned as it is, without the loop over its characters."""
    if text.isascii() and text.isprintable() and " " not in text and _SHAPING.isdisjoint(text):
        return text[:limit]
    return "".join(c if 32 < ord(c) < 127 and c not in "()<>;," else "?" for c in text)[:limit]


def line_ending(raw: bytes) -> bytes:
    end = raw.find(b"\n")
    return b"\r\n" if end > 0 and raw[end - 1 : end] == b"\r" else b"\n"


def field(name: str, value: str, eol: bytes = b"\r\n") -> bytes:
    """One header field as bytes, folded as the stdlib folds it: ``value`` reduced to
    printable ASCII (anything else, a line break included, becomes ``?``), each line ending
    with ``eol``."""
    if value.isascii() and value.isprintable():  # the common case: nothing to replace
        clean = value
    else:
        clean = "".join(c if 32 <= ord(c) < 127 else "?" for c in value)
    if not clean.strip(" "):  # nothing to fold: the stdlib's own corner cases
        policy = compat32.clone(linesep=eol.decode("ascii"), max_line_length=MAX_LINE)
        return policy.fold_binary(name, clean)
    sep = eol.decode("ascii")
    if len(name) + 2 + len(clean) > MAX_LINE:
        clean = _folded(len(name) + 2, clean, sep)
    return f"{name}: {clean}{sep}".encode("ascii")


_SPLITCHARS = ";, "  # email.header's default (";, \t"): a printable value has no tab


def _folded(headerlen: int, value: str, eol: str) -> str:
    """``value`` (printable ASCII, not only spaces) folded exactly as
    ``email.header.Header(value, header_name=...).encode(linesep=eol, maxlinelen=MAX_LINE)``
    does (its ``_ValueFormatter`` for ASCII; checked against it by the tests), without its
    cost: the words between runs of spaces are put on a line until it passes
    :data:`MAX_LINE`; then the line is broken before the last word that follows a ``;``,
    else a ``,``, else a space; a word that fits nowhere stays whole on a line of its own."""
    lines: list[str] = []
    line: list[tuple[str, str]] = []  # (the spaces before a word, the word)
    size = headerlen  # the line's length; the first line has the field's name in front

    def newline() -> None:
        nonlocal line, size
        if line and line[-1] == (" ", ""):
            line.pop()
            size -= 1
        if size > 0:
            text = "".join(f + w for f, w in line)
            if headerlen == 0 and lines and (not line or text.isspace()):
                lines[-1] += text
            else:
                lines.append(text)
        line, size = [], 0

    for fws, word in _chunks(value):
        line.append((fws, word))
        size += len(fws) + len(word)
        if size <= MAX_LINE:
            continue
        at = _split_point(line)
        if at is None:  # no place to break: the word goes on a line of its own
            line.pop()
            size -= len(fws) + len(word)
            if headerlen > 0:
                newline()
                headerlen = 0
                fws = fws or " "
            line.append((fws, word))
            size += len(fws) + len(word)
            continue
        lines.append("".join(f + w for f, w in line[:at]))
        line = line[at:]
        headerlen = 0
        size = sum(len(f) + len(w) for f, w in line)
    line.append((" ", ""))  # as the stdlib's formatter ends a value
    size += 1
    newline()
    return eol.join(lines)


def _split_point(line: list[tuple[str, str]]) -> int | None:
    """The index of the word to start the next line with (see :func:`_folded`)."""
    for ch in _SPLITCHARS:
        for i in range(len(line) - 1, 0, -1):
            if ch == " ":
                fws = line[i][0]
                if fws and fws[0] == ch:
                    return i
            before = line[i - 1][1]
            if before and before[-1] == ch:
                return i
    return None


def _chunks(value: str) -> list[tuple[str, str]]:
    """``value`` as (run of spaces, word) pairs, the first run empty unless the value starts
    with spaces, the last word empty if it ends with them."""
    out: list[tuple[str, str]] = []
    spaces = -1  # each piece of the split but the first follows one space
    for word in value.split(" "):
        spaces += 1
        if word:
            out.append((" " * spaces, word))
            spaces = 0
    if spaces:
        out.append((" " * spaces, ""))
    return out


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


def header_end(raw: bytes) -> int:
    """Where the letter's header block ends: the offset just after the empty line that ends it
    (CRLF or LF), or the letter's length when it has none (all header)."""
    if raw.startswith((b"\r\n", b"\n")):
        return 2 if raw[:1] == b"\r" else 1
    ends = [i for i in (raw.find(b"\n\r\n"), raw.find(b"\n\n")) if i >= 0]
    if not ends:
        return len(raw)
    end = min(ends)
    return end + (3 if raw[end + 1 : end + 2] == b"\r" else 2)


_CLAIMS = (b"x-pochta-", b"authentication-results")
_WSP = b" \t"


def without_claims(raw: bytes, authserv_id: str) -> tuple[bytes, int]:
    """``raw`` without the header fields that claim to be pochta's: every ``X-Pochta-*`` field
    and every ``Authentication-Results`` whose authserv-id is ``authserv_id`` (compared without
    case), whatever their case, folding or repetition; and how many were removed. Only the
    letter's own header block is looked at (the fields of attached letters are their content);
    everything else is returned byte for byte, the same object when nothing was removed. Linear
    in the header's size: the header block is searched, not split into lines."""
    end = header_end(raw)
    lowered = b"\n" + raw[:end].lower()  # offset i here is offset i - 1 in raw
    ours = authserv_id.strip().lower().encode("ascii", "replace")
    cuts: list[tuple[int, int]] = []
    for claim in _CLAIMS:
        at = lowered.find(b"\n" + claim)
        while at >= 0:
            start = at  # the field starts at raw offset `start` (the byte after the LF)
            stop = _field_end(raw, start, end)
            name_end = raw.find(b":", start, stop)
            if name_end > 0 and _claims(raw, start, name_end, stop, claim, ours):
                cuts.append((start, stop))
            at = lowered.find(b"\n" + claim, at + 1)
    if not cuts:
        return raw, 0
    cuts.sort()
    out, pos = [], 0
    for start, stop in cuts:
        out.append(raw[pos:start])
        pos = stop
    out.append(raw[pos:])
    return b"".join(out), len(cuts)


def _field_end(raw: bytes, start: int, end: int) -> int:
    """The offset after the last line of the field that starts at ``start`` (its continuation
    lines begin with a space or a tab), within the header block ending at ``end``."""
    pos = start
    while True:
        lf = raw.find(b"\n", pos, end)
        if lf < 0:
            return end
        pos = lf + 1
        if pos >= end or raw[pos : pos + 1] not in (b" ", b"\t"):
            return pos


def _claims(raw: bytes, start: int, colon: int, stop: int, claim: bytes, ours: bytes) -> bool:
    """Whether the field ``raw[start:stop]`` (its name ending at ``colon``) is one of pochta's."""
    name = raw[start:colon].rstrip(_WSP).lower()  # "Name :" (obsolete syntax) counts too
    if claim == b"x-pochta-":
        return name.startswith(claim) and not any(c in name for c in b" \t\r\n")
    if name != claim:
        return False
    return _authserv_id(raw[colon + 1 : stop]) == ours


def _authserv_id(value: bytes) -> bytes:
    """The authserv-id of an Authentication-Results value (RFC 8601 §2.2): its first token
    after comments and folding whitespace (a quoted string unquoted), lower-cased."""
    text = value.replace(b"\r", b" ").replace(b"\n", b" ")
    pos, depth = 0, 0
    while pos < len(text):  # skip CFWS: whitespace and (nested (comments))
        c = text[pos : pos + 1]
        if depth:
            if c == b"\\":
                pos += 1
            depth += {b"(": 1, b")": -1}.get(c, 0)
        elif c == b"(":
            depth = 1
        elif c not in (b" ", b"\t"):
            break
        pos += 1
    rest = text[pos:]
    if rest.startswith(b'"'):
        close = rest.find(b'"', 1)
        return rest[1 : close if close > 0 else len(rest)].strip().lower()
    token = rest
    for stop in (b";", b" ", b"\t", b"("):
        token = token.split(stop, 1)[0]
    return token.lower()
