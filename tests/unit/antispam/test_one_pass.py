"""The sign families read through the one RE2 pass (issue 29, item 3): the same findings as
Python's engine alone.

- ``wording.requests`` / ``wording.asks_for`` search a sentence with Python's engine only where
  RE2 says a family may match in it (``wording._Gate``); the reference searches every sentence.
- ``wording.within``: a body read with its subject's pass (a superset of its own answer).
- ``extortion.demand``'s families joined the set (``wording.search``); the reference is
  Python's ``search``.
- The set: which families match somewhere, as each relaxed copy alone says; warming it
  (``wording.warm``) changes no answer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pochta.antispam.signs import extortion, wording

SLOW = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _words(*patterns: re.Pattern[str]) -> list[str]:
    return sorted({w for rx in patterns for w in re.findall(r"[а-яёa-z]{2,}", rx.pattern)})


REQUEST_WORDS = _words(*wording.CARD_ITEMS.values(), wording.PERSONAL_OBJECTS, wording.REQUEST,
                       wording.NEGATION)  # fmt: skip
PIECES = ["не", "2", "cvv", "sms", "pin", "код", "é", "Ω", "ß", "\u0301", "ё", "x", "-", "'"]
SEPARATORS = [" ", " ", "  ", ". ", "! ", "? ", ".", "\n", "\n\n", "\n \n", ".\n", ", ", "\u2028",
              "\u00a0", "\t", "", "?\u3000"]  # fmt: skip


def _texts(words: list[str]) -> st.SearchStrategy[str]:
    token = st.one_of(st.sampled_from(words), st.sampled_from(PIECES))
    pairs = st.lists(st.tuples(token, st.sampled_from(SEPARATORS)), max_size=24)
    return pairs.map(lambda ps: "".join(t + s for t, s in ps))


def _every_sentence() -> Any:  # the reference: no gate says no, every sentence is searched
    return mock.patch.object(wording._Gate, "may", return_value=True)


@SLOW
@given(text=_texts(REQUEST_WORDS))
def test_requests_and_asks_for_find_what_every_sentence_searched_finds(text: str) -> None:
    for candidate in (text, wording.fold(text), "ф " + text):
        got = (
            wording.requests(candidate, wording.CARD_ITEMS),
            wording.asks_for(candidate, wording.PERSONAL_OBJECTS),
        )
        with _every_sentence():
            want = (
                wording.requests(candidate, wording.CARD_ITEMS),
                wording.asks_for(candidate, wording.PERSONAL_OBJECTS),
            )
        assert got == want, candidate


def test_the_gates_hand_over_after_the_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    text = ". ".join(["укажите номер карты и cvv", "никому не сообщайте пин", "пароль"] * 12)
    text += ". введите пароль и паспорт"
    with _every_sentence():
        want = (wording.requests(text, wording.CARD_ITEMS),
                wording.asks_for(text, wording.PERSONAL_OBJECTS))  # fmt: skip
    assert want[0] and want[1]
    for bound in (0, 1, 2, 5):
        monkeypatch.setattr(wording, "CANDIDATES", bound)
        got = (wording.requests(text, wording.CARD_ITEMS),
               wording.asks_for(text, wording.PERSONAL_OBJECTS))  # fmt: skip
        assert got == want


def test_sentences_keep_their_place_in_bytes() -> None:
    text = "Привет. Введите код! \n\nщёлк? a\u3000b. \u2028x"
    spans = wording._Sentences(text).spans
    data = text.encode()
    assert [s for s, _, _ in spans] == wording.sentences(text)
    for sentence, a, b in spans:
        assert data[a:b].decode() == sentence
    assert wording._Sentences("\udc80 пин. код").data is None  # a lone surrogate: no gates


def _spans(found: Iterator[re.Match[str]]) -> list[tuple[int, int]]:
    return [m.span() for m in found if m.lastgroup != wording.SKIP]  # OFFER's skips: no findings


@SLOW
@given(subject=_texts(REQUEST_WORDS), body=_texts(REQUEST_WORDS))
def test_a_body_read_with_its_subjects_pass_finds_what_it_finds_alone(
    subject: str, body: str
) -> None:
    body = wording.fold(body)
    alone = {rx: _spans(rx.finditer(body)) for rx in wording._PREFILTERS}
    wording._SCANS.clear()
    wording.within(wording.fold(subject) + "\n" + body, body)
    for rx, spans in alone.items():
        assert _spans(wording.matches(rx, body)) == spans, (rx.pattern[:40], body)


def test_within_reads_only_a_body_after_a_line_break() -> None:
    wording._SCANS.clear()
    wording.within("subject body", "body")  # no line break before it
    wording.within("x\nother", "body")  # not its end
    assert "body" not in wording._SCANS
    wording.within("x\nbody", "body")
    scan = wording._SCANS["body"]
    assert scan is not None and scan[0] == b"body"
    wording.within("\udc80\nbody2", "body2")  # the subject unreadable: the body alone later
    assert "body2" not in wording._SCANS


EXTORTION_WORDS = _words(extortion.CRYPTO, extortion.GIFT_CARDS, extortion._SEND_CODES,
                         extortion._PAY, extortion._DEADLINE, extortion._THREAT)  # fmt: skip
WALLETS = ["1BoatSLRHtKNngkdXEeobR76b53LETtpyT", "0x" + "ab" * 20,
           "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", "T" + "9" * 33]  # fmt: skip


@SLOW
@given(text=_texts(EXTORTION_WORDS + WALLETS + ["24", "---", "gift card", "google play"]))
def test_extortion_demand_finds_what_pythons_search_finds(text: str) -> None:
    for raw in (text, text.upper()):
        folded = wording.fold(raw)
        got = extortion.demand(raw, folded)
        with mock.patch.object(wording, "search", lambda rx, t: rx.search(t)):
            assert got == extortion.demand(raw, folded), raw


ALL_WORDS = _words(*wording._PREFILTERS)


@functools.cache
def _each_alone() -> list[Any]:
    return [re2.compile(p, wording._options(8 << 20)) for p in wording._RELAXED]


@SLOW
@given(text=_texts([*ALL_WORDS, "dear", "customer", "$1,000", "http", "www"]))
def test_the_set_says_which_families_match_as_each_alone_says(text: str) -> None:
    wording._SCANS.clear()
    scan = wording._scan(wording.fold(text))
    assert scan is not None and scan[1] is not None
    data, hits = scan
    assert hits - {0} == {i for i, rx in enumerate(_each_alone(), 1) if rx.search(data)}, data


def test_warming_the_set_changes_no_answer() -> None:
    texts = [wording.fold(t) for t in ("Dear customer, verify your account now.", "привет")]
    before = [wording._scan(t) for t in texts]
    wording.warm(["dear valued customer kindly confirm your password", "x" * 3000])
    wording._SCANS.clear()
    assert [wording._scan(t) for t in texts] == before


def test_the_set_keeps_the_states_a_workers_letters_reach() -> None:
    """Half the unsealed letters' subject and body (~5 MB, ~2,400 texts: what a worker meets
    in its first hours) read once build the set's states; read again, they cost a fraction
    of that. With the 16 MiB budget the automaton overflowed and was thrown away as it read,
    and the second reading cost what the first did (1.02 s and 1.02 s; 32 MiB: 0.78 and 0.04)."""
    import time

    from pochta.antispam.signs import checks  # noqa: F401 (every family in the set, as in a worker)
    from pochta.mime.letter import parse
    from pochta_factory import corpus

    try:
        letters = list(corpus.unsealed())[::2]
    except corpus.CorpusUnavailable as exc:
        pytest.skip(f"the SpamAssassin corpus cannot be fetched: {exc}")
    texts = []
    for m in letters:
        letter = parse(m.raw)
        texts.append((wording.fold(letter.subject) + "\n" + wording.fold(letter.all_text)).encode())
    wording._SET.clear()  # a new automaton, as a new process's
    found = wording._prefilter_set()

    def read() -> float:
        start = time.process_time()
        for data in texts:
            found.Match(data)
        return time.process_time() - start

    first, again = read(), read()
    assert again < 0.3 * first, (first, again)
