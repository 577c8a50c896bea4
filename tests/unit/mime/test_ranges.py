"""Reading a stored letter in pieces: any byte range, streamed from the skeleton and the
extracted parts, equals the same slice of the letter; the MIME tree read from the skeleton
alone equals the tree of the letter."""

from __future__ import annotations

import base64
from collections.abc import Iterator

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.unit.mime.mimegen import INLINE_LIMIT, Node, render, trees

from pochta.mime import ranges, split
from pochta.mime.codec import Encoding, Method, encode
from pochta.mime.skeleton import Ref
from pochta.mime.tree import scan

EOLS = st.sampled_from([b"\n", b"\r\n"])
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def stored(raw: bytes) -> tuple[ranges.Layout, ranges.Content, list[str]]:
    """The letter split as a delivery splits it; a content source that notes what it read."""
    result = split(raw, inline_limit=INLINE_LIMIT)
    store = {p.key: p.content for p in result.parts}
    read: list[str] = []

    def content(ref: Ref) -> Iterator[bytes]:
        read.append(ref.key)
        data = store[ref.key]
        for i in range(0, len(data), 7):  # small uneven chunks
            yield data[i : i + 7]

    return ranges.layout(result.skeleton), content, read


@SETTINGS
@given(tree=trees(), eol=EOLS, data=st.data())
def test_every_range_reads_the_same_bytes_as_the_letter(
    tree: Node, eol: bytes, data: st.DataObject
) -> None:
    raw, _ = render(tree, eol=eol)
    lay, content, _ = stored(raw)
    assert lay.size == len(raw)
    assert b"".join(ranges.read_range(lay, 0, lay.size, content)) == raw
    for _ in range(5):
        start = data.draw(st.integers(0, len(raw) + 5))
        end = data.draw(st.integers(start, len(raw) + 10))
        assert b"".join(ranges.read_range(lay, start, end, content)) == raw[start:end]


@SETTINGS
@given(tree=trees(), eol=EOLS)
def test_the_tree_from_the_skeleton_is_the_tree_of_the_letter(tree: Node, eol: bytes) -> None:
    raw, _ = render(tree, eol=eol)
    lay, _, _ = stored(raw)
    assert ranges.tree(lay) == scan(raw)


def test_a_range_in_the_text_reads_no_attachment() -> None:
    text = b"Subject: x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nhello\r\n"
    blob = base64.encodebytes(bytes(range(256)) * 40).replace(b"\n", b"\r\n")
    raw = (
        text + b"--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment;"
        b' filename="a.pdf"\r\nContent-Transfer-Encoding: base64\r\n\r\n' + blob + b"--b--\r\n"
    )
    lay, content, read = stored(raw)
    assert any(s.ref is not None for s in lay.segments)
    assert b"".join(ranges.read_range(lay, 0, len(text), content)) == text
    assert read == []
    assert b"".join(ranges.read_range(lay, len(raw) - 100, len(raw), content)) == raw[-100:]
    assert len(read) == 1


@settings(max_examples=200, deadline=None)
@given(
    content=st.binary(min_size=1, max_size=3000)
    | st.text("ab \t\r\n=é", max_size=3000).map(lambda s: s.encode()),
    method=st.sampled_from([Method.BASE64, Method.QUOTED_PRINTABLE, Method.IDENTITY]),
    length=st.integers(1, 100),
    crlf=st.booleans(),
    tail=st.sampled_from([b"", b"\n", b"\r\n\r\n"]),
    block=st.integers(1, 500),
)
def test_re_encoding_in_blocks_equals_encoding_at_once(
    content: bytes, method: Method, length: int, crlf: bool, tail: bytes, block: int
) -> None:
    encoding = Encoding(method, length if method is Method.BASE64 else 0, crlf)
    if method is Method.BASE64:
        encoding = Encoding(method, length, crlf, tail)
    chunks = [content[i : i + 13] for i in range(0, len(content), 13)]
    got = b"".join(ranges.encoded(encoding, chunks, block))
    assert got == encode(encoding, content)
