"""The generated legitimate letters: deterministic, varied, well-formed, and never evaluated."""

from __future__ import annotations

import hashlib
from collections import Counter

from pochta.antispam.model import legit, training
from pochta.antispam.signs.checks import run as signs
from pochta.mime.letter import parse


def test_the_same_seed_gives_the_same_bytes() -> None:
    a = legit.letters(60, seed=7)
    b = legit.letters(60, seed=7)
    assert [g.raw for g in a] == [g.raw for g in b]
    c = legit.letters(60, seed=8)
    assert (
        hashlib.sha256(b"".join(g.raw for g in a)).digest()
        != hashlib.sha256(b"".join(g.raw for g in c)).digest()
    )


def test_the_letters_are_varied_and_well_formed() -> None:
    letters = legit.letters()
    assert len(letters) == legit.COUNT
    assert [g.at for g in letters] == sorted(g.at for g in letters)
    assert all(legit.START <= g.at <= legit.END for g in letters)
    kinds = Counter(g.kind for g in letters)
    assert set(kinds) == {"newsletter", "receipt", "shipping", "account", "event", "bill",
                          "government"}  # fmt: skip
    assert min(kinds.values()) >= 10
    langs = Counter(g.lang for g in letters)
    assert langs["ru"] >= 150 and langs["en"] >= 150
    assert len({g.sender for g in letters}) >= 100  # many senders: no one template
    html = unsubscribe = money_like = 0
    for g in letters[:200]:
        letter = parse(g.raw)
        assert letter.from_domain and letter.subject and letter.text.strip()
        assert {"date", "message-id", "received"} <= {n for n, _ in letter.fields}
        html += letter.html is not None
        unsubscribe += any(n == "list-unsubscribe" for n, _ in letter.fields)
        money_like += any(c in letter.text for c in "$€£₽") or "руб" in letter.text
        assert g.envelope.ip and g.envelope.sender
    assert 100 <= html < 200  # mostly HTML, some plain text
    assert 30 <= unsubscribe < 150
    assert money_like >= 40


def test_legitimate_letters_show_few_phishing_signs() -> None:
    fired: Counter[str] = Counter()
    letters = legit.letters(150, seed=3)
    for g in letters:
        found, _ = signs(parse(g.raw), g.envelope)
        fired.update(s.symbol for s in found)
    strong = {s: n for s, n in fired.items()
              if s not in ("PHISH_RETURN_PATH_MISMATCH", "PHISH_RECEIVED_MISMATCH")}  # fmt: skip
    assert sum(strong.values()) <= 0.05 * len(letters), strong


def test_generated_letters_are_training_letters_only() -> None:
    assert training.GENERATED not in training.EVAL_GROUPS
    samples = training.generated_samples(20)
    assert {s.group for s in samples} == {training.GENERATED}
    assert {s.label for s in samples} == {"ham"}
