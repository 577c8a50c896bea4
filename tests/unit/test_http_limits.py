"""The pure half of the HTTP bounds: JSON nesting measured on pieces of a stream."""

from __future__ import annotations

import json

import pytest

from pochta.server.api.limits import JsonDepth


def deepest(text: bytes, max_depth: int, piece: int) -> bool:
    depth = JsonDepth(max_depth)
    return any(depth.feed(text[i : i + piece]) for i in range(0, len(text), piece))


DOCS = [
    ({"a": [[1, 2], {"b": "[[[[{{{{"}]}, 3),
    ({"s": 'quote \\" and backslash \\\\ then ]]]] [[[[ "'}, 1),
    ([[[[[[[[]]]]]]]], 8),
    ({"k": "\\\\[", "l": ["\\"]}, 2),
]


@pytest.mark.parametrize(("doc", "depth"), DOCS)
@pytest.mark.parametrize("piece", [1, 2, 3, 7, 1000])
def test_depth_is_counted_outside_strings_whatever_the_pieces(
    doc: object, depth: int, piece: int
) -> None:
    text = json.dumps(doc).encode()
    assert not deepest(text, depth, piece)
    assert deepest(text, depth - 1, piece)


def test_a_deep_document_is_caught_before_its_end() -> None:
    depth = JsonDepth(32)
    assert not depth.feed(b"[" * 32)
    assert depth.feed(b"[")
