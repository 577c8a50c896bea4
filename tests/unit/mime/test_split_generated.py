"""Hypothesis-generated MIME trees: split -> reassemble is the identity, and exactly the parts
that should be extracted are, with their decoded bytes and names."""

from __future__ import annotations

import email
import email.policy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.unit.mime.mimegen import INLINE_LIMIT, Node, render, roundtrip, trees

from pochta.mime import parse, refs, split

EOLS = st.sampled_from([b"\n", b"\r\n"])
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(tree=trees(), eol=EOLS)
def test_generated_letters_round_trip_and_extract_what_they_should(tree: Node, eol: bytes) -> None:
    raw, expected = render(tree, eol=eol)
    result = split(raw, inline_limit=INLINE_LIMIT)
    assert roundtrip(raw)[0] == raw
    got = [(p.content, p.content_type, p.filename) for p in result.parts]
    assert got == [(e.content, e.content_type, e.filename) for e in expected]
    assert [p.index for p in result.parts] == list(range(len(expected)))
    assert [(r.key, r.size, r.crc32) for r in refs(result.skeleton)] == [
        (p.key, p.size, p.crc32) for p in result.parts
    ]
    saved = sum(p.encoded_size for p in result.parts)
    # a reference costs its fixed fields plus the part's name and type, which it keeps
    named = sum(len((p.filename or "").encode()) + len(p.content_type) for p in result.parts)
    assert len(result.skeleton) <= len(raw) - saved + 6 + 100 * len(result.parts) + named


@SETTINGS
@given(tree=trees(), eol=EOLS)
def test_extracted_parts_are_what_the_standard_library_decodes(tree: Node, eol: bytes) -> None:
    raw, _ = render(tree, eol=eol)
    message = email.message_from_bytes(raw, policy=email.policy.compat32)
    payloads = [p.get_payload(decode=True) for p in message.walk() if not p.is_multipart()]
    for part in split(raw, inline_limit=INLINE_LIMIT).parts:
        assert part.content in payloads


@SETTINGS
@given(tree=trees(), eol=EOLS)
def test_summary_lists_every_extracted_part_under_its_index(tree: Node, eol: bytes) -> None:
    raw, _ = render(tree, eol=eol)
    parts = split(raw, inline_limit=INLINE_LIMIT).parts
    summary = parse(raw, inline_limit=INLINE_LIMIT)
    listed = {a.index: a for a in summary.attachments if a.index is not None}
    assert sorted(listed) == [p.index for p in parts]
    for p in parts:
        a = listed[p.index]
        assert (a.content, a.size, a.filename, a.content_type) == (
            p.content,
            p.size,
            p.filename,
            p.content_type,
        )
    assert [a.n for a in summary.attachments] == list(range(len(summary.attachments)))


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A generated letter, then truncated, with bytes flipped, or with NUL/8-bit bytes."""
    raw, _ = render(draw(trees()), eol=draw(EOLS))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete"]))
        at = draw(st.integers(0, len(raw)))
        if kind == "truncate":
            raw = raw[:at]
        elif kind == "flip" and at < len(raw):
            raw = raw[:at] + bytes([raw[at] ^ draw(st.integers(1, 255))]) + raw[at + 1 :]
        elif kind == "insert":
            raw = (
                raw[:at]
                + draw(st.sampled_from([b"\x00", b"\xff\xfe", b"\r", b"\n", b"--"]))
                + raw[at:]
            )
        else:
            raw = raw[:at] + raw[at + draw(st.integers(1, 20)) :]
    return raw


@SETTINGS
@given(raw=damaged())
def test_damaged_letters_round_trip(raw: bytes) -> None:
    assert roundtrip(raw)[0] == raw
    assert roundtrip(raw, inline_limit=0)[0] == raw
    parse(raw)  # never raises


@settings(max_examples=100, deadline=None)
@given(raw=st.binary(max_size=2000))
def test_arbitrary_bytes_round_trip(raw: bytes) -> None:
    assert roundtrip(raw, inline_limit=0)[0] == raw
    parse(raw)
