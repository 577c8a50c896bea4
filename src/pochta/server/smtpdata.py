"""The DATA phase of SMTP as pure byte logic: where the letter ends, what it holds, what it costs.

pochta reads DATA itself instead of through aiosmtpd's ``smtp_DATA``, which gathers every line
of the letter in memory and joins them (two copies of the letter per connection before the
handler sees it) and offers no hook for streaming. The protocol (:mod:`pochta.server.smtp`)
feeds the bytes it receives to a :class:`DataReader`, which writes the letter to a
:class:`Spool` (memory up to a threshold, then a file) as they come.

The rules (RFC 5321 §4.1.1.4, §4.5.2), and why they are safe against SMTP smuggling:

- Only ``CRLF . CRLF`` ends the letter: a line that is exactly ``.`` after a CRLF (or at the
  very start). ``LF . LF``, ``CR . CR``, ``LF . CRLF``, ``CRLF . LF``, ``CR . LF`` and the
  like are letter content, stored as they came; so a second ``MAIL FROM`` hidden behind one
  of them stays text inside the one letter and is never read as a command.
- A line starting with ``.`` after a CRLF loses that dot (dot-stuffing); nowhere else.
- Bare LF and bare CR are kept byte for byte (pochta stores letters, it does not relay them;
  reassembly returns exactly what was received).
- Line length is counted between LF bytes (a bare LF ends a line too), so a letter written
  with bare LFs is not one giant "line"; past ``line_limit`` the letter is refused with 500
  once it has ended.
- Past ``size_limit`` bytes of content the spool is dropped at once and the rest of the
  letter is only scanned for its end, never kept; the answer is 552 once it has ended.

:class:`CommandWatch` follows the command stream the other way round: it finds where a
``DATA`` command line ends, so that bytes a client sends after ``DATA`` without waiting for
the 354 reply (forbidden by RFC 2920 §3.1) are caught instead of being read as commands.
"""

from __future__ import annotations

import io
import os
import secrets
from pathlib import Path
from typing import Literal

from pochta.budget import Budget, Share

END = b"\r\n.\r\n"
COMMAND_LIMIT = 512  # aiosmtpd's command_size_limit: a longer DATA line is not a command

State = Literal["ok", "too_big", "too_long"]


class Spool:
    """The letter being received: in memory up to ``threshold`` bytes, then in a file of
    ``directory`` (mode 0600, a random name) that the owner removes with :meth:`discard`.

    With a ``budget`` (:mod:`pochta.budget`, shared by every connection of the server)
    the bytes kept in memory are taken from it first, into the share ``held``; when it has
    none left the letter goes to the file at once, so that many letters at once cannot
    together fill the memory. They are given back at :meth:`discard`: the letter that
    :meth:`finish` hands over is these very bytes, not a copy, so the share counts it until
    then (its holder may take more into it for the same letter, given back with it)."""

    def __init__(self, directory: Path, threshold: int, budget: Budget | None = None) -> None:
        self.directory = directory
        self.threshold = threshold
        self.size = 0
        self._memory: io.BytesIO | None = io.BytesIO()
        self._file: int | None = None  # a descriptor
        self.held: Share | None = budget.share() if budget is not None else None
        self.path: Path | None = None

    def write(self, data: bytes | memoryview) -> None:
        if not data:
            return
        if self._memory is not None and (
            self.size + len(data) > self.threshold
            or (self.held is not None and not self.held.take(len(data)))
        ):
            self.directory.mkdir(parents=True, exist_ok=True)
            self.path = self.directory / f"{secrets.token_hex(8)}.letter"
            self._file = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            pending, self._memory = self._memory, None
            self._write_all(pending.getbuffer())
            pending.close()
            if self.held is not None:
                self.held.release()
        if self._memory is not None:
            self._memory.write(data)
        else:
            self._write_all(data)
        self.size += len(data)

    def _write_all(self, data: bytes | bytearray | memoryview) -> None:
        assert self._file is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self._file, view) :]

    def finish(self) -> bytes | Path:
        """The letter: its bytes (the spool's own, not a copy: nothing is written after), or
        the path of its file (closed for writing)."""
        if self._file is not None:
            os.close(self._file)
            self._file = None
        if self.path is not None:
            return self.path
        return self._memory.getvalue() if self._memory is not None else b""

    def discard(self) -> None:
        """Forget the letter: memory freed (and given back to the budget), the file closed
        and removed. Idempotent."""
        self._memory = io.BytesIO()
        if self.held is not None:
            self.held.release()
        if self._file is not None:
            os.close(self._file)
            self._file = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None


class DataReader:
    """Reads one letter's DATA from the bytes of the connection, chunk by chunk.

    :meth:`feed` returns None while the letter goes on, and the bytes after its end (the next
    commands of a pipelining client) once ``CRLF . CRLF`` was seen. ``state`` says whether the
    letter is usable (``ok``) or was refused while it came (``too_big``, ``too_long``)."""

    def __init__(self, spool: Spool | None, *, size_limit: int, line_limit: int) -> None:
        self.spool = spool
        self.size_limit = size_limit
        self.line_limit = line_limit
        self.state: State = "ok"
        self.size = 0  # content bytes (after dot-stuffing is undone), counted past the limit
        self.longest = 0  # the longest line seen (at least as long as any line refused)
        self.eol: bytes | None = None  # the first line ending: b"\r\n" or b"\n"
        self._last = b""  # the byte before the chunk
        self._run = 0  # bytes since the last LF
        self._carry = b"\r\n"  # a virtual CRLF: the first line starts a line
        self._skip = 2  # bytes of output still to drop (the virtual CRLF)
        self.done = False

    def feed(self, chunk: bytes) -> bytes | None:
        if self.done:
            raise RuntimeError("the letter has ended")
        buf = self._carry + chunk
        start = 0
        while True:
            pos = buf.find(b"\r\n.", start)
            if pos < 0:
                # keep a tail that may begin CRLF. for the next chunk
                keep = 2 if buf.endswith(b"\r\n") else 1 if buf.endswith(b"\r") else 0
                cut = max(start, len(buf) - keep)
                self._emit(buf, start, cut)
                self._carry = buf[cut:]
                break
            after = buf[pos + 3 : pos + 5]
            if after == b"\r\n":  # CRLF . CRLF: the end; the CRLF before the dot is content
                self._emit(buf, start, pos + 2)
                self._count_lines(buf, len(self._carry), pos + 5)
                self.done = True
                self._carry = b""
                return buf[pos + 5 :]
            if b"\r\n".startswith(after):  # "" or "\r": cannot tell yet
                self._emit(buf, start, pos)
                self._carry = buf[pos:]
                break
            self._emit(buf, start, pos + 2)  # a dot-stuffed line: drop its first dot
            start = pos + 3
        self._count_lines(chunk, 0, len(chunk))
        return None

    def _emit(self, buf: bytes, start: int, end: int) -> None:
        if end <= start:
            return
        if self._skip:
            drop = min(self._skip, end - start)
            self._skip -= drop
            start += drop
            if end <= start:
                return
        self.size += end - start
        if self.state == "ok" and self.size > self.size_limit:
            self._refuse("too_big")
        if self.state == "ok" and self.spool is not None:
            self.spool.write(memoryview(buf)[start:end])

    def _count_lines(self, data: bytes, start: int, end: int) -> None:
        """Line lengths on the wire, between LFs, for data[start:end] (not seen before)."""
        if end <= start:
            return
        if self.eol is None:
            nl = data.find(b"\n", start, end)
            if nl >= 0:
                before = data[nl - 1 : nl] if nl > start else self._last
                self.eol = b"\r\n" if before == b"\r" else b"\n"
        self._last = data[end - 1 : end]
        if self._run + (end - start) <= self.line_limit:  # no line can be too long here
            last = data.rfind(b"\n", start, end)
            self._run = end - last - 1 if last >= 0 else self._run + end - start
            self.longest = max(self.longest, self._run)
            return
        pos = start
        while pos < end:
            nl = data.find(b"\n", pos, end)
            if nl < 0:
                self._run += end - pos
                self.longest = max(self.longest, self._run)
                break
            self._run += nl + 1 - pos
            self.longest = max(self.longest, self._run)
            self._run = 0
            pos = nl + 1
        if self.longest > self.line_limit and self.state == "ok":
            self._refuse("too_long")

    def _refuse(self, state: State) -> None:
        self.state = state
        if self.spool is not None:
            self.spool.discard()
            self.spool = None


class CommandWatch:
    """Follows the command stream and finds where a ``DATA`` command line ends, reading lines
    as aiosmtpd does: a line ends at LF; trailing CRs and LFs are stripped; a line longer than
    ``reader_limit`` or, stripped, than :data:`COMMAND_LIMIT` is refused, not run; the first
    word (up to a space) is the command, in any case (``DATA x`` is DATA too: answered 501)."""

    def __init__(self, reader_limit: int) -> None:
        self.reader_limit = reader_limit
        self._head = bytearray()  # the current line's first bytes
        self._length = 0  # its length so far
        self._crlf = 0  # how many of its last bytes are CR or LF

    def find_data(self, data: bytes) -> int | None:
        """The offset just after the first DATA command line in ``data``, or None."""
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            piece = data[pos:] if nl < 0 else data[pos : nl + 1]
            if len(self._head) < 8:
                self._head += piece[: 8 - len(self._head)]
            self._length += len(piece)
            stripped = len(piece.rstrip(b"\r\n"))
            self._crlf = len(piece) - stripped if stripped else self._crlf + len(piece)
            if nl < 0:
                return None
            head, length, crlf = bytes(self._head), self._length, self._crlf
            self._head.clear()
            self._length = self._crlf = 0
            pos = nl + 1
            command = length - crlf  # the line's length once stripped
            if length <= self.reader_limit and command <= COMMAND_LIMIT and _is_data(head, command):
                return pos
        return None


def _is_data(head: bytes, stripped: int) -> bool:
    """Whether a line beginning with ``head`` (its first 8 bytes), ``stripped`` bytes long
    without its trailing CRs and LFs, is the DATA command."""
    return head[:4].upper() == b"DATA" and (stripped == 4 or head[4:5] == b" ")
