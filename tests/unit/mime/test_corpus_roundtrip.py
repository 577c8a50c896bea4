"""The whole public SpamAssassin corpus through split -> dict blob store -> reassemble."""

from __future__ import annotations

import time

import pytest

from pochta.mime import Ref, parse, reassemble, split
from pochta_factory import corpus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def letters() -> list[corpus.CorpusLetter]:
    try:
        return list(corpus.unsealed())  # a sealed letter is never read
    except corpus.CorpusUnavailable as exc:
        pytest.skip(f"the SpamAssassin corpus cannot be fetched: {exc}")


def test_every_corpus_letter_round_trips_byte_for_byte(
    letters: list[corpus.CorpusLetter], capsys: pytest.CaptureFixture[str]
) -> None:
    store: dict[str, bytes] = {}
    received = skeletons = parts = encoded = 0
    started = time.perf_counter()
    for letter in letters:
        result = split(letter.raw)
        for p in result.parts:
            store[p.key] = p.content

        def fetch(index: int, ref: Ref) -> bytes:
            return store[ref.key]

        assert reassemble(result.skeleton, fetch) == letter.raw, f"{letter.group}/{letter.name}"
        received += len(letter.raw)
        skeletons += len(result.skeleton)
        parts += len(result.parts)
        encoded += sum(p.encoded_size for p in result.parts)
    elapsed = time.perf_counter() - started
    stored = skeletons + sum(len(c) for c in store.values())
    with capsys.disabled():
        print(
            f"\ncorpus: {len(letters)} letters, {received} bytes; {parts} parts extracted "
            f"({len(store)} distinct), {encoded} encoded bytes out of the skeletons; "
            f"skeletons {skeletons} bytes + blobs {stored - skeletons} = {stored} bytes "
            f"({100 * (received - stored) / received:.2f}% saved); {elapsed:.1f} s"
        )
    assert len(letters) == 4847  # the unsealed letters of 6,046
    assert parts >= 60  # the unsealed letters have 62 extractable parts: extraction must not stop
    assert skeletons < received


def test_every_corpus_letter_summarizes(letters: list[corpus.CorpusLetter]) -> None:
    with_sender = with_body = 0
    for letter in letters:
        summary = parse(letter.raw)
        with_sender += summary.from_ is not None
        with_body += summary.body_text is not None or summary.body_html is not None
    assert with_sender >= len(letters) - 10
    assert with_body == len(letters)
