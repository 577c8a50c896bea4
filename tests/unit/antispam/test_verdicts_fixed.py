"""The verdicts of a fixed set of unsealed corpus letters do not change when the analysis is
made cheaper (issue 29, item 3).

Every 20th unsealed letter of easy-ham-2, hard-ham-1 and spam-2 (never a sealed one: the
corpus's ``unsealed`` leaves them unread) is scanned with the shipped model, no counters: its
label, P(spam), rules' score and a digest of every feature the rules and the model read must
be those recorded in ``tests/data/verdicts_fixed.json``. The file was written by the code
before issue 29's cuts; a change that means to move verdicts (a new model, a new sign) writes
it again, and says so:

    PYTHONPATH=src python tests/unit/antispam/test_verdicts_fixed.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[2] / "data" / "verdicts_fixed.json"
GROUPS = ("easy-ham-2", "hard-ham-1", "spam-2")
EVERY = 20
TOLERANCE = 1e-12


def _digest(features: dict[str, float]) -> str:
    text = "\n".join(f"{k}={v!r}" for k, v in sorted(features.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def verdicts() -> dict[str, dict[str, Any]]:
    from pochta.antispam.model import booster
    from pochta.antispam.verdict import Scanner
    from pochta_factory import corpus
    from pochta_factory.training import envelope_of

    scanner = Scanner(model=booster.load())
    out: dict[str, dict[str, Any]] = {}
    for m in list(corpus.unsealed(GROUPS))[::EVERY]:
        v = scanner.scan(m.raw, envelope_of(m.raw), now=0.0)
        out[f"{m.group}/{m.name}"] = {
            "label": v.label,
            "probability": v.probability,
            "score": v.score,
            "signs": sorted(s.symbol for s in v.signs),
            "shingles": len(v.shingles),
            "features": _digest(v.features),
        }
    return out


def test_the_fixed_letters_verdicts_are_unchanged() -> None:
    from pochta_factory import corpus

    try:
        now = verdicts()
    except corpus.CorpusUnavailable as exc:
        pytest.skip(f"the SpamAssassin corpus cannot be fetched: {exc}")
    saved = json.loads(DATA.read_text())
    assert sorted(now) == sorted(saved)
    differing = []
    for name, was in saved.items():
        got = now[name]
        p0, p1 = was.pop("probability"), got.pop("probability")
        if (p0 is None) != (p1 is None) or (p0 is not None and abs(p0 - p1) > TOLERANCE):
            differing.append(f"{name}: probability {p0} -> {p1}")
        if was != got:
            differing.append(f"{name}: {was} -> {got}")
    assert not differing, "\n".join(differing[:20])


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    DATA.write_text(json.dumps(verdicts(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {DATA}")
