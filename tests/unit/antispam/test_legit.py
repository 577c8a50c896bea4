"""The generated legitimate letters: deterministic, varied, well-formed, and never evaluated."""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
from collections import Counter
from pathlib import Path

from pochta.antispam.signs.checks import find
from pochta.mime.letter import parse
from pochta_factory import legit, training


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
    assert set(kinds) == set(legit.orgs.KINDS)
    assert min(kinds.values()) >= 30
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
    assert 80 <= html < 180  # mostly HTML, some plain text
    assert 30 <= unsubscribe < 150
    assert money_like >= 40


def test_legitimate_letters_show_few_phishing_signs() -> None:
    fired: Counter[str] = Counter()
    letters = legit.letters(150, seed=3)
    for g in letters:
        found = find(parse(g.raw), g.envelope).signs
        fired.update(s.symbol for s in found)
    strong = {s: n for s, n in fired.items()
              if s not in ("PHISH_RETURN_PATH_MISMATCH", "PHISH_RECEIVED_MISMATCH")}  # fmt: skip
    assert sum(strong.values()) <= 0.05 * len(letters), strong


def test_generated_letters_are_training_letters_only() -> None:
    assert training.GENERATED not in training.EVAL_GROUPS
    samples = training.generated_samples(20)
    assert {s.group for s in samples} == {training.GENERATED}
    assert {s.label for s in samples} == {"ham"}


def test_no_two_letters_say_the_same_and_both_eras_write() -> None:
    letters = legit.letters()
    texts = Counter(parse(g.raw).text for g in letters)
    assert max(texts.values()) == 1  # no template repeated verbatim
    senders = legit.senders(__import__("random").Random(legit.SEED))
    eras = Counter(o.era for o in senders)
    assert eras["2002"] >= 40 and eras["today"] >= 40
    old = [g for g in letters if b"<FONT " in g.raw]
    assert len(old) >= 100  # HTML of around 2002
    promos = [parse(g.raw) for g in letters if g.kind == "promo"][:40]
    assert sum(len(p.web_links) >= 6 for p in promos) >= 20  # link-heavy
    assert sum(p.html is not None and p.html.images >= 3 for p in promos) >= 15


def test_personal_letters_are_short_deterministic_and_never_a_held_out_line() -> None:
    from pochta_factory.legit import personal

    a = legit.personal_letters(120)
    assert [g.raw for g in a] == [g.raw for g in legit.personal_letters(120)]
    assert [g.raw for g in a] != [g.raw for g in legit.personal_letters(120, seed=1)]
    assert {g.kind for g in a} == {"personal"} and [g.at for g in a] == sorted(g.at for g in a)
    assert Counter(g.lang for g in a)["ru"] >= 25 and Counter(g.lang for g in a)["en"] >= 25
    replies = ids_on_sender = 0
    for g in a:
        letter = parse(g.raw)
        assert letter.html is None or letter.text.strip()
        assert not letter.web_links and len(letter.text.split()) <= 60
        assert g.envelope.ip and g.envelope.sender == letter.from_address
        replies += letter.subject.startswith("Re: ")
        mid = dict(letter.fields).get("message-id", "")
        ids_on_sender += mid.endswith(f"@{letter.from_domain}>")
    assert 20 <= replies <= 70 and 30 <= ids_on_sender <= 100
    # the held-out lines of benchmarks/short_letters.py are never written
    bench = Path(__file__).resolve().parents[3] / "benchmarks" / "short_letters.py"
    tree = ast.parse(bench.read_text())
    held_out = next(
        ast.literal_eval(node.value) for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "LINES"
    )  # fmt: skip
    assert len(held_out) == 15
    written = {x for lang in personal.LINES.values() for x in lang}
    assert not written & set(held_out)
    assert not any(line in g.raw.decode("utf-8", "replace") for g in a for line in held_out)
    # nor a near-duplicate: the same sentence with another name, day or time, or reordered
    for line in held_out:
        said = set(re.findall(r"\w+", line.lower()))
        for x in {*written, *(m for lang in personal.MORE.values() for m in lang)}:
            same = set(re.findall(r"\w+", x.lower()))
            assert difflib.SequenceMatcher(None, line.lower(), x.lower()).ratio() < 0.8, (line, x)
            assert len(said & same) / len(said | same) < 0.6, (line, x)


def test_the_training_samples_carry_the_personal_letters() -> None:
    samples = training.generated_samples(legit.COUNT // 30)
    kinds = Counter(s.name.split("/", 1)[0] for s in samples)
    assert kinds["personal"] == legit.PERSONAL // 30
    assert [s.at for s in samples] == sorted(s.at for s in samples)
