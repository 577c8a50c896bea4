"""A change of the rules measured on a k-fold run's out-of-fold probabilities (issue 28): which
non-sealed ham letters the rules' phishing verdict files in Spam, and what another rules file
would file, without refitting the model.

Reads the replay and the out-of-fold probabilities that ``installation_kfold.py --tag TAG``
left in its cache (non-sealed letters only: the replay is :func:`installation_kfold.replayed`),
recomputes each letter's rules from its replayed signs and features with the default rules and
with ``--rules FILE``, and files a letter as the k-fold run does (the rules' phishing verdict,
``verdict.known_sender`` included, or P(spam) at the run's threshold). Then scans the 2025
phishing set (tests/data/phishing_2025) with a fresh Scanner, the shipped model and each rules
file: how much phishing is filed and called phishing, and how many legitimate look-alikes are
called phishing. An approximation: the rules' points are also model inputs
(``rules.phishing_score``), which a full k-fold run would refit.

    python benchmarks/installation_kfold.py --tag base
    python benchmarks/installation_rules.py --tag base --rules my_rules.toml [--list]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import emit, machine
from installation_kfold import CACHE, replayed, signs_of

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.unit.antispam_phishing.phishing_2025: the set's manifest

from tests.unit.antispam_phishing import phishing_2025  # noqa: E402

from pochta.antispam.auth.results import NO_AUTH  # noqa: E402
from pochta.antispam.model import booster  # noqa: E402
from pochta.antispam.rules import ruleset as rules  # noqa: E402
from pochta.antispam.verdict import KNOWN_SENDER_BELOW, Scanner, known_sender  # noqa: E402
from pochta_factory import legit, training  # noqa: E402


def out_of_fold(tag: str, chosen: rules.Rules, listed: bool) -> dict[str, Any]:
    data, _, _ = replayed(legit.COUNT)
    with (CACHE / f"oof{tag}.pickle").open("rb") as fh:
        saved = pickle.load(fh)
    oof, part = saved["oof"], saved["part"]
    real = [i for i in range(len(oof)) if part[i] >= 0]
    threshold = training._threshold([oof[i] for i in real], [data.labels[i] for i in real])
    groups: dict[str, dict[str, int]] = {}
    ham_in_spam: list[dict[str, Any]] = []
    for i in real:
        row = data.rows[i]
        signs = signs_of(row)
        hits = rules.evaluate(chosen, dict(row), signs, NO_AUTH)
        phishing = rules.verdict(hits, chosen.actions) == "phishing" and not (
            oof[i] < KNOWN_SENDER_BELOW and known_sender(row, signs, NO_AUTH, ())
        )
        spam = phishing or oof[i] >= threshold
        g = groups.setdefault(data.groups[i], {"letters": 0, "filed_spam": 0, "by_phishing": 0})
        g["letters"] += 1
        g["filed_spam"] += spam
        g["by_phishing"] += phishing
        if listed and spam and data.labels[i] == 0:
            points = [(h.symbol, h.score) for h in hits if h.score and h.group == "phishing"]
            ham_in_spam.append({"index": i, "group": data.groups[i], "p": round(oof[i], 4),
                                "by_phishing": phishing, "phishing_points": points})  # fmt: skip
    out: dict[str, Any] = {"threshold": threshold, "groups": dict(sorted(groups.items()))}
    if listed:
        out["ham_in_spam"] = ham_in_spam
    return out


def phishing_set(chosen: rules.Rules) -> dict[str, int]:
    cases = phishing_2025.cases()
    scanner = Scanner(rules_=chosen, model=booster.load())
    labels = {c.file: scanner.scan(c.raw).label for c in cases}
    bad = [c.file for c in cases if c.kind == "phishing"]
    good = [c.file for c in cases if c.kind == "ham"]
    return {
        "phishing": len(bad),
        "phishing_filed": sum(labels[f] != "ham" for f in bad),
        "phishing_called_phishing": sum(labels[f] == "phishing" for f in bad),
        "look_alikes": len(good),
        "look_alikes_called_phishing": sum(labels[f] == "phishing" for f in good),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tag", default="", help="the k-fold run's --tag")
    p.add_argument("--rules", type=Path, default=None, help="another rules file")
    p.add_argument("--list", action="store_true", help="list the ham letters filed in Spam")
    args = p.parse_args()
    variants = {"default": rules.default()}
    if args.rules is not None:
        variants[str(args.rules)] = rules.load(args.rules)
    emit(
        {
            "benchmark": "installation_rules",
            "machine": machine(Path(tempfile.gettempdir())),
            "tag": args.tag,
            "rules": {
                name: {
                    "out_of_fold": out_of_fold(args.tag, chosen, args.list),
                    "phishing_2025": phishing_set(chosen),
                }
                for name, chosen in variants.items()
            },
        }
    )


if __name__ == "__main__":
    main()
