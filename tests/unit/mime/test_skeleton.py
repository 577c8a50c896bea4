"""The skeleton format and reassembly's checks."""

from __future__ import annotations

import base64
import hashlib
import random
import zlib
from collections.abc import Callable

import pytest
from tests.mailtools import letter

from pochta.errors import IntegrityError
from pochta.mime import Ref, iter_reassemble, reassemble, refs, split
from pochta.mime.codec import Method
from pochta.mime.skeleton import MAGIC, VERSION

DATA = random.Random(7).randbytes(20_000)
RAW = letter(attachments=[("data.bin", DATA), ("отчёт.txt", b"small")])


def fetch_from(store: dict[str, bytes]) -> Callable[[int, Ref], bytes]:
    def fetch(index: int, ref: Ref) -> bytes:
        return store[ref.key]

    return fetch


def test_refs_describe_each_part_and_where_it_was() -> None:
    result = split(RAW)
    found = refs(result.skeleton)
    assert [(r.index, r.key, r.size, r.crc32) for r in found] == [
        (0, hashlib.sha256(DATA).hexdigest(), len(DATA), zlib.crc32(DATA)),
        (1, hashlib.sha256(b"small").hexdigest(), 5, zlib.crc32(b"small")),
    ]
    assert [(r.content_type, r.filename) for r in found] == [
        ("application/octet-stream", "data.bin"),
        ("application/octet-stream", "отчёт.txt"),
    ]
    first = found[0]
    assert first.encoding.method is Method.BASE64
    assert (first.encoding.line_length, first.encoding.crlf) == (76, True)
    body = RAW[first.offset : first.offset + first.encoded_size]
    assert base64.b64decode(body) == DATA


def test_skeleton_is_the_letter_less_the_bodies() -> None:
    result = split(RAW)
    assert result.skeleton.startswith(MAGIC + bytes([VERSION]))
    literal_size = len(RAW) - sum(p.encoded_size for p in result.parts)
    assert result.skeleton.endswith(RAW[-45:])  # the close delimiter
    assert len(result.skeleton) - literal_size < 200  # the header and two references
    plain = b"From: a@example.org\n\nno attachments\n"
    assert split(plain).skeleton == MAGIC + bytes([VERSION, 0]) + plain


def test_reassemble_in_chunks_and_as_bytes() -> None:
    result = split(RAW)
    store = {p.key: p.content for p in result.parts}
    chunks = list(iter_reassemble(result.skeleton, fetch_from(store)))
    assert b"".join(chunks) == RAW
    assert DATA not in result.skeleton
    assert reassemble(result.skeleton, fetch_from(store)) == RAW


def test_fetched_content_that_differs_is_refused() -> None:
    result = split(RAW)
    store = {p.key: p.content for p in result.parts}
    store[result.parts[0].key] = DATA[:-1] + bytes([DATA[-1] ^ 1])
    with pytest.raises(IntegrityError, match="crc32"):
        reassemble(result.skeleton, fetch_from(store))
    store[result.parts[0].key] = DATA[:-1]
    with pytest.raises(IntegrityError, match="expects 20000 bytes"):
        reassemble(result.skeleton, fetch_from(store))


@pytest.mark.parametrize(
    "mangle",
    [
        pytest.param(lambda s: b"", id="empty"),
        pytest.param(lambda s: b"From: a@example.org\n\nnot a skeleton", id="a letter"),
        pytest.param(lambda s: s[:4] + b"\x02" + s[5:], id="future version"),
        pytest.param(lambda s: s[:40], id="truncated in the references"),
        pytest.param(lambda s: s[:6] + b"\xff" * 12 + s[18:], id="garbage varints"),
    ],
)
def test_a_damaged_skeleton_raises_integrity_error(mangle: Callable[[bytes], bytes]) -> None:
    skeleton = mangle(split(RAW).skeleton)
    with pytest.raises(IntegrityError):
        reassemble(skeleton, lambda i, r: b"")
    with pytest.raises(IntegrityError):
        refs(skeleton)


def test_one_content_in_many_letters_has_one_key() -> None:
    other = letter(subject="another", attachments=[("copy.bin", DATA)])
    assert split(other).parts[0].key == split(RAW).parts[0].key
