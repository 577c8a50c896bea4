"""CPU per letter for each stage of the delivery path, in one process (issue 15).

Every corpus letter (or a sample) goes through the path a delivery takes, stage by stage, each
timed with ``time.process_time``:

    parse       mime.letter.parse: MIME tree, headers, bodies, the split's plan
    signs       the phishing signs (signs/checks.py)
    features    content features (features.py)
    shingles    shingles/extract.py
    counters    the shingles' counters queried (embedded store, warm: the training groups
                counted first, as a deployed pochta would have them)
    rules       the rules file evaluated
    model       CatBoost's probability
    split       the skeleton cut (the parse planned the parts)

Parses are counted: the number of calls to ``mime.letter.parse``, the standard library's
``email`` parsers and HTML parsers per letter (1, 0 and 0 is the goal: one parse).

    python benchmarks/scan_cpu.py              # every letter of the corpus
    python benchmarks/scan_cpu.py --quick      # 300 letters
"""

from __future__ import annotations

import argparse
import email.parser
import html.parser
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.antispam import features as feats_mod
from pochta.antispam.auth.results import NO_AUTH
from pochta.antispam.model import booster
from pochta.antispam.rules import ruleset as rules
from pochta.antispam.shingles.extract import extract
from pochta.antispam.signs import checks
from pochta.antispam.verdict import Analysis
from pochta.mime import letter as letter_mod
from pochta.mime.split import cut
from pochta_factory import corpus
from pochta_factory.training import (
    corpus_samples,
    envelope_of,
    fresh_scanner,
    replay,
)

STAGES = ("parse", "signs", "features", "shingles", "counters", "rules", "model", "split")
calls: Counter[str] = Counter()


def count_calls() -> None:
    """Wrap the parsers so that each call is counted (measurement only)."""
    original_parse = letter_mod.parse

    def parse(*args: Any, **kwargs: Any) -> Any:
        calls["mime.letter.parse"] += 1
        return original_parse(*args, **kwargs)

    letter_mod.parse = parse  # type: ignore[assignment]
    for cls, name in (
        (email.parser.BytesParser, "parsebytes"),
        (email.parser.Parser, "parsestr"),
        (html.parser.HTMLParser, "feed"),
    ):
        method = getattr(cls, name)

        def counted(
            self: Any, *a: Any, _m: Any = method, _n: str = f"{cls.__name__}.{name}", **k: Any
        ) -> Any:
            calls[_n] += 1
            return _m(self, *a, **k)

        setattr(cls, name, counted)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="300 letters")
    args = ap.parse_args()
    result: dict[str, Any] = {"benchmark": "scan_cpu", "machine": machine(Path.cwd())}
    note("warming the counters with the training groups (true labels)")
    scanner = fresh_scanner(booster.load())
    replay(corpus_samples(corpus.unsealed(("easy-ham-1", "spam-1"))), scanner, learn_truth=True)
    letters = [x.raw for x in corpus.unsealed()]  # a sealed letter is never read
    if args.quick:
        letters = letters[:: max(1, len(letters) // 300)][:300]
    count_calls()
    per: dict[str, list[float]] = {s: [] for s in STAGES}
    totals: list[float] = []
    note(f"scoring {len(letters)} letters stage by stage")
    before = Counter(calls)
    for raw in letters:
        env = envelope_of(raw)
        t = [time.process_time()]
        letter = letter_mod.parse(raw)
        t.append(time.process_time())
        signs = checks.check(letter, env)
        t.append(time.process_time())
        f = {
            **feats_mod.extract(letter),
            **feats_mod.from_signs(signs),
            **feats_mod.from_auth(None),
        }
        t.append(time.process_time())
        shingles = extract(letter, env)
        t.append(time.process_time())
        stats = scanner.statistics(Analysis(tuple(signs), NO_AUTH, f, tuple(shingles)))
        t.append(time.process_time())
        hits = rules.evaluate(scanner.rules, stats, signs, None)
        t.append(time.process_time())
        if scanner.model is not None:
            scanner.model.probability(
                {
                    **stats,
                    "rules.score": rules.score(hits),
                    "rules.phishing_score": rules.phishing_score(hits),
                }
            )
        t.append(time.process_time())
        cut(raw, letter.planned)
        t.append(time.process_time())
        for i, stage in enumerate(STAGES):
            per[stage].append(t[i + 1] - t[i])
        totals.append(t[-1] - t[0])
    n = len(letters)
    parses = {k: round((v - before.get(k, 0)) / n, 3) for k, v in calls.items()}
    result["letters"] = n
    result["cpu_ms_per_letter"] = {s: round(1000 * sum(v) / n, 3) for s, v in per.items()} | {
        "total": round(1000 * sum(totals) / n, 3)
    }
    result["cpu_ms_median"] = round(1000 * statistics.median(totals), 3)
    result["cpu_ms_max"] = round(1000 * max(totals), 1)
    result["parses_per_letter"] = parses
    emit(result)


if __name__ == "__main__":
    main()
