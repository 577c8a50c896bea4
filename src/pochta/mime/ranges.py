"""A stored letter read in pieces, from its skeleton: any byte range of the letter as it was
delivered, streamed, and its MIME tree, without reassembling the letter.

The letter is a row of segments: literal bytes of the skeleton, and extracted parts that
are re-encoded as they are read (:func:`encoded`, in blocks: a base64 block is a whole
number of lines, a quoted-printable block ends after a line break, so the blocks join into
exactly :func:`pochta.mime.codec.encode` of the whole content). A range only reads the
segments it overlaps, and stops reading a part once the range ends.

The MIME tree comes from the skeleton's literal alone (:func:`tree`): the literal is the
letter with some leaf bodies cut out, and cutting a leaf's body changes no boundary, no
header and no other part (a leaf body holds no delimiter of any ancestor, and the line
break before the next delimiter is not part of it), so the scanner finds the same entities;
their offsets are then moved back to the letter's. A cut body starts where the literal has
the cut: offsets at a cut count it after them, except the body start of the part cut there.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from pochta.mime.codec import Encoding, Method, encode
from pochta.mime.headers import Field, HeaderBlock
from pochta.mime.skeleton import Ref, unpack
from pochta.mime.tree import Entity, scan

BLOCK = 1 << 18  # about how many decoded bytes are re-encoded at once

Content = Callable[[Ref], Iterable[bytes]]
"""``content(ref)``: the decoded content of an extracted part, checked, in chunks."""


@dataclass(frozen=True, slots=True)
class Segment:
    start: int  # where it begins in the letter
    size: int
    literal: int  # where its bytes begin in the skeleton (literal segments)
    ref: Ref | None = None  # the extracted part it stands for, else None


@dataclass(frozen=True, slots=True)
class Layout:
    skeleton: bytes
    segments: tuple[Segment, ...]
    literal_start: int
    size: int  # the letter's size

    @property
    def literal(self) -> bytes:
        return self.skeleton[self.literal_start :]

    def cuts(self) -> list[tuple[int, int]]:
        """(offset in the literal, encoded size) of each extracted part."""
        out = []
        pos = 0
        for seg in self.segments:
            if seg.ref is None:
                pos += seg.size
            else:
                out.append((pos, seg.size))
        return out


def layout(skeleton: bytes) -> Layout:
    """The segments of a letter; IntegrityError when the skeleton is not a valid one."""
    lay = unpack(skeleton)
    segments: list[Segment] = []
    pos = lay.literal_start
    at = 0
    for ref, gap in zip(lay.refs, lay.gaps, strict=True):
        if gap:
            segments.append(Segment(at, gap, pos))
            at += gap
            pos += gap
        segments.append(Segment(at, ref.encoded_size, 0, ref))
        at += ref.encoded_size
    if pos < len(skeleton):
        segments.append(Segment(at, len(skeleton) - pos, pos))
        at += len(skeleton) - pos
    return Layout(skeleton, tuple(segments), lay.literal_start, at)


def read_range(lay: Layout, start: int, end: int, content: Content) -> Iterator[bytes]:
    """Bytes [start, end) of the letter, in chunks; extracted parts are read only when the
    range overlaps them."""
    start, end = max(0, start), min(end, lay.size)
    if start >= end:
        return
    starts = [s.start for s in lay.segments]
    i = max(0, bisect.bisect_right(starts, start) - 1)
    for seg in lay.segments[i:]:
        if seg.start >= end:
            break
        lo = max(start, seg.start) - seg.start
        hi = min(end, seg.start + seg.size) - seg.start
        if hi <= lo:
            continue
        if seg.ref is None:
            yield lay.skeleton[seg.literal + lo : seg.literal + hi]
        else:
            yield from _slice(encoded(seg.ref.encoding, content(seg.ref)), lo, hi)


def _slice(chunks: Iterator[bytes], lo: int, hi: int) -> Iterator[bytes]:
    pos = 0
    try:
        for chunk in chunks:
            end = pos + len(chunk)
            if end > lo:
                yield chunk[max(0, lo - pos) : hi - pos]
            pos = end
            if pos >= hi:
                return
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def encoded(encoding: Encoding, chunks: Iterable[bytes], block: int = BLOCK) -> Iterator[bytes]:
    """The body of a part re-encoded from its decoded content, about ``block`` decoded bytes
    at a time: exactly ``encode(encoding, b"".join(chunks))``."""
    if encoding.method is Method.IDENTITY:
        yield from chunks
    elif encoding.method is Method.BASE64:
        yield from _base64(encoding, chunks, block)
    else:
        yield from _quoted_printable(encoding, chunks, block)


def _base64(encoding: Encoding, chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    lines = Encoding(Method.BASE64, encoding.line_length, encoding.crlf)
    step = 3 * encoding.line_length  # decoded bytes that make whole lines (4 * length chars)
    block = max(1, size // step) * step
    buf = bytearray()
    first = True
    for chunk in chunks:
        buf += chunk
        while len(buf) >= block:
            if not first:
                yield encoding.eol
            yield encode(lines, bytes(buf[:block]))
            del buf[:block]
            first = False
    if buf:
        if not first:
            yield encoding.eol
        yield encode(lines, bytes(buf))
    if encoding.tail:
        yield encoding.tail


def _quoted_printable(encoding: Encoding, chunks: Iterable[bytes], block: int) -> Iterator[bytes]:
    buf = bytearray()
    for chunk in chunks:
        buf += chunk
        if len(buf) >= block:
            cut = buf.rfind(b"\n") + 1  # encoding is line by line: a block ends after a \n
            if cut:
                yield encode(encoding, bytes(buf[:cut]))
                del buf[:cut]
    if buf:
        yield encode(encoding, bytes(buf))


# -- the MIME tree ------------------------------------------------------------------------


def tree(lay: Layout) -> Entity:
    """The letter's MIME tree with offsets in the letter: ``scan`` of the letter, read from
    the skeleton alone."""
    root = scan(lay.literal)
    cuts = lay.cuts()
    if not cuts:
        return root
    at = [c for c, _ in cuts]
    before = [0]
    for _, size in cuts:
        before.append(before[-1] + size)

    def start(pos: int) -> int:  # cuts strictly before pos
        return pos + before[bisect.bisect_left(at, pos)]

    def end(pos: int) -> int:  # cuts at or before pos
        return pos + before[bisect.bisect_right(at, pos)]

    def move(e: Entity) -> Entity:
        block = e.block
        fields = tuple(Field(f.name, start(f.start), start(f.end)) for f in block.fields)
        return replace(
            e,
            block=HeaderBlock(
                start(block.start), start(block.end), start(block.body_start), fields
            ),
            body_start=start(e.body_start),
            body_end=end(e.body_end),
            children=tuple(move(c) for c in e.children),
        )

    return move(root)
