"""Split a letter into a skeleton and its extracted parts; reassemble it byte for byte.

What is extracted (:func:`plan`): every leaf part that is an attachment (Content-Disposition
``attachment``, or a file name in Content-Disposition or Content-Type), and every other leaf
whose type is not text/*, message/* or multipart/* and whose encoded body is larger than
``inline_limit`` bytes — but only when :func:`pochta.mime.codec.exact` can re-encode its decoded
bytes into exactly its body. Everything else stays in the skeleton as it is: text bodies, empty
bodies, parts in unknown or irreproducible encodings (odd base64 line shapes, broken base64,
quoted-printable from other encoders, uuencode), and all of any entity the scanner does not
look into (see :mod:`pochta.mime.tree`). Parts of a forwarded letter (message/rfc822) are
extracted like the letter's own.

The skeleton is the letter with the extracted bodies cut out (:mod:`pochta.mime.skeleton`), so
reassembly is concatenation and cannot reorder, re-fold or re-wrap anything.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from pochta.errors import IntegrityError
from pochta.mime.codec import Encoding, encode, exact
from pochta.mime.skeleton import Ref, pack, prepend, unpack
from pochta.mime.tree import Entity, Kind, scan
from pochta.pickling import by_fields

DEFAULT_INLINE_LIMIT = 4096
_TEXTUAL = frozenset({"text", "message", "multipart"})

Fetch = Callable[[int, Ref], bytes]
"""``fetch(index, ref)``: the decoded content of extracted part ``index`` (from the blob store)."""


@by_fields  # read back by the server: pochta.pickling
@dataclass(frozen=True, slots=True)
class Extracted:
    """One part taken out of the letter into the blob store."""

    index: int  # 0-based order among extracted parts of this letter
    content: bytes  # the decoded bytes: what gets stored; its SHA-256 is the blob key
    key: str  # sha256 hex of content
    size: int  # len(content)
    crc32: int  # zlib.crc32(content)
    content_type: str  # e.g. "application/pdf"
    filename: str | None  # decoded file name, None if absent
    encoded_size: int  # size of the encoded body in the letter (what the skeleton saves)

    def __repr__(self) -> str:
        return (
            f"Extracted(index={self.index}, key={self.key[:12]}..., size={self.size}, "
            f"content_type={self.content_type!r}, filename={self.filename!r})"
        )


@by_fields  # read back by the server: pochta.pickling
@dataclass(frozen=True, slots=True)
class Split:
    skeleton: bytes  # see pochta.mime.skeleton for the format
    parts: tuple[Extracted, ...]


@dataclass(frozen=True, slots=True)
class Planned:
    """A leaf chosen for extraction, with its decoded content and how to re-encode it."""

    entity: Entity
    content: bytes
    encoding: Encoding
    key: str  # SHA-256 of content, hex


def is_attachment(entity: Entity) -> bool:
    info = entity.info
    return info.disposition == "attachment" or info.filename is not None


def wanted(entity: Entity, inline_limit: int) -> bool:
    """Whether a part should go to the blob store if it can be re-encoded exactly."""
    if entity.kind is not Kind.LEAF or entity.body_end <= entity.body_start:
        return False
    if is_attachment(entity):
        return True
    maintype = entity.info.content_type.partition("/")[0]
    return maintype not in _TEXTUAL and entity.body_end - entity.body_start > inline_limit


def plan(raw: bytes, root: Entity, inline_limit: int) -> list[Planned]:
    """The parts of a scanned letter that :func:`split` extracts, in document order."""
    out: list[Planned] = []
    for entity in root.walk():
        if not wanted(entity, inline_limit):
            continue
        decoded = exact(entity.info.transfer_encoding, raw[entity.body_start : entity.body_end])
        if decoded is not None and decoded[0]:
            content = decoded[0]
            out.append(Planned(entity, content, decoded[1], hashlib.sha256(content).hexdigest()))
    return out


def split(raw: bytes, *, inline_limit: int = DEFAULT_INLINE_LIMIT) -> Split:
    """Cut the extractable parts out of ``raw``. Never raises on malformed input: a letter that
    cannot be read is kept whole in the skeleton with no parts. (A delivery, which has parsed
    the letter already, calls :func:`cut` with the parsed letter's ``planned``.)"""
    try:
        planned = plan(raw, scan(raw), inline_limit)
    except Exception:  # a reader bug met on a hostile letter: keep the letter whole
        planned = []
    return cut(raw, planned)


def prefixed(split: Split, prefix: bytes) -> Split:
    """The split of ``prefix + letter`` from the split of ``letter``."""
    return Split(prepend(split.skeleton, prefix), split.parts) if prefix else split


def whole(raw: bytes) -> Split:
    """The letter kept whole: a skeleton with no parts cut out (needs no parsing)."""
    return Split(pack(raw, []), ())


def cut(raw: bytes, planned: Sequence[Planned]) -> Split:
    """Cut ``planned`` (from :func:`plan` over ``raw``) out of ``raw``."""
    parts: list[Extracted] = []
    refs: list[Ref] = []
    for index, p in enumerate(planned):
        info = p.entity.info
        part = Extracted(
            index=index,
            content=p.content,
            key=p.key,
            size=len(p.content),
            crc32=zlib.crc32(p.content),
            content_type=info.content_type,
            filename=info.filename,
            encoded_size=p.entity.body_end - p.entity.body_start,
        )
        parts.append(part)
        refs.append(
            Ref(
                index=index,
                key=part.key,
                size=part.size,
                crc32=part.crc32,
                content_type=part.content_type,
                filename=part.filename,
                encoding=p.encoding,
                encoded_size=part.encoded_size,
                offset=p.entity.body_start,
            )
        )
    return Split(pack(raw, refs), tuple(parts))


def refs(skeleton: bytes) -> list[Ref]:
    """The references in a skeleton, in order; IntegrityError when it is not a valid one."""
    return unpack(skeleton).refs


def iter_reassemble(skeleton: bytes, fetch: Fetch) -> Iterator[bytes]:
    """The letter as chunks: literal pieces and re-encoded parts. Each fetched content is
    checked against its reference (size, CRC-32); a mismatch raises IntegrityError."""
    layout = unpack(skeleton)
    pos = layout.literal_start
    for ref, gap in zip(layout.refs, layout.gaps, strict=True):
        if gap:
            yield skeleton[pos : pos + gap]
            pos += gap
        content = fetch(ref.index, ref)
        if len(content) != ref.size or zlib.crc32(content) != ref.crc32:
            raise IntegrityError(
                f"part {ref.index} ({ref.key}): got {len(content)} bytes with crc32 "
                f"{zlib.crc32(content):08x}, the letter expects {ref.size} bytes "
                f"with crc32 {ref.crc32:08x}"
            )
        body = encode(ref.encoding, content)
        if len(body) != ref.encoded_size:
            raise IntegrityError(
                f"part {ref.index} ({ref.key}) re-encodes to {len(body)} bytes, "
                f"the letter had {ref.encoded_size}"
            )
        yield body
    if pos < len(skeleton):
        yield skeleton[pos:]


def reassemble(skeleton: bytes, fetch: Fetch) -> bytes:
    """Exactly the bytes that were given to :func:`split`."""
    return b"".join(iter_reassemble(skeleton, fetch))
