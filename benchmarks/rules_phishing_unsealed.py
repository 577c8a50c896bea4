"""The rules' phishing verdict alone on every non-sealed SpamAssassin letter (issue 28): no
model, no shingle counters, no DNS. Counts per group and names the legitimate letters the
rules call phishing, with the phishing points they got. A quick stand-in (about 2 minutes
on an idle machine) for a k-fold run when only signs or rules changed: run it on main and on
a branch and compare; it does not refit the model (the rules' points are model inputs too) and
misses ``verdict.known_sender`` (a known sender's letter the model is sure of is ham).

A sealed letter is hashed and dropped unread (:func:`pochta_factory.corpus.unsealed`).

    python benchmarks/rules_phishing_unsealed.py [--rules FILE]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import emit, machine
from pochta.antispam.rules import ruleset as rules
from pochta.antispam.verdict import Scanner
from pochta.mime.letter import parse
from pochta_factory import corpus


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rules", type=Path, default=None, help="a rules file (default: pochta's)")
    args = p.parse_args()
    ruleset = rules.load(args.rules) if args.rules else rules.default()
    analyzer = Scanner(rules_=ruleset).analyzer
    started = time.perf_counter()
    letters: Counter[str] = Counter()
    phishing: Counter[str] = Counter()
    ham_named: list[dict[str, Any]] = []
    for m in corpus.unsealed():
        a = analyzer.analyze(parse(m.raw))
        hits = rules.evaluate(ruleset, dict(a.features), list(a.signs), a.auth)
        letters[m.group] += 1
        if rules.verdict(hits, ruleset.actions) != "phishing":
            continue
        phishing[m.group] += 1
        if m.label == "ham":
            points = {h.symbol: h.score for h in hits if h.group == "phishing" and h.score}
            ham_named.append({"letter": f"{m.group}/{m.name[:5]}", "points": points})
    emit(
        {
            "benchmark": "rules_phishing_unsealed",
            "machine": machine(Path(tempfile.gettempdir())),
            "rules": str(args.rules) if args.rules else "default",
            "groups": {
                g: {"letters": n, "phishing": phishing[g]} for g, n in sorted(letters.items())
            },
            "ham_called_phishing": ham_named,
            "seconds": round(time.perf_counter() - started, 1),
        }
    )


if __name__ == "__main__":
    main()
