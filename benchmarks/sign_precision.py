"""How precise each phishing sign and each rule of the default rules file is: how often it
fires on legitimate mail, on spam and on phishing.

Sets (every one of them allowed for tuning; the SpamAssassin evaluation groups easy-ham-2,
hard-ham-1 and spam-2 are never read here):

    easy-ham-1        SpamAssassin training ham (2,500 letters)
    spam-1            SpamAssassin training spam (500 letters)
    project-phishing  tests/data/phishing, manifest verdict "phishing"
    project-ham       tests/data/phishing, manifest verdict "ham": legitimate look-alikes
    project-spam      tests/data/phishing, manifest verdict "spam"
    peer-phishing     tests/data/phishing_peer, kind "phishing" (when the set is there)
    peer-control      tests/data/phishing_peer, kind "control"
    p2025-phishing    tests/data/phishing_2025, kind "phishing" (issue 28: today's phishing)
    p2025-ham         tests/data/phishing_2025, kind "ham": today's legitimate look-alikes

Sealed corpus letters (the SHA-256 of the letter's file begins with a byte below 52, issue
28) are never read: they are skipped on their hash, before they are parsed.

Corpus letters are read as the model's training reads them (envelope from their Received
and Return-Path fields, no DNS, no shingle statistics); the project's letters as its tests
read them (the manifest's envelope, DKIM-signed with a test key and authenticated against
the manifest's offline zone, the manifest's shingle features). Per sign and per rule: how
many letters of each set it fires on and the share; ``lift`` = share on spam-1 / share on
easy-ham-1 (below 1: it fires more on ham than on spam); ``precision`` = of the letters it
fires on, the share that are bad (spam or phishing), pooled over all sets. Per set: the
verdict by the rules' points alone (no model), and by the full scanner (a fresh Scanner with
the shipped model, as a new server has; the 2025 set scanned as POST /v1/scan scans a raw
letter, without envelope): the share filed as spam or phishing and the share named by a
phishing sign that carries points. Peer set, as its own test counts
(tests/unit/antispam_phishing/test_peer_set.py): a bad letter is named when the checks find
one of the signs its manifest expects, a control is flagged when any sign of the test's
fraud family fires (link, sender, display-name, extortion, data-request and form signs).

    python benchmarks/sign_precision.py > after.json           # all letters
    python benchmarks/sign_precision.py --quick                # 300 corpus letters
    python benchmarks/sign_precision.py --markdown after.json [--before before.json]
                                                               # the tables, for BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import emit, machine, note

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.unit.antispam_phishing.helpers: DKIM keys, the zone

from pochta.antispam import features  # noqa: E402
from pochta.antispam.auth.results import NO_AUTH, AuthResults, authenticate  # noqa: E402
from pochta.antispam.rules import ruleset  # noqa: E402
from pochta.antispam.signs import checks  # noqa: E402
from pochta.mime.letter import parse  # noqa: E402
from pochta.types import Envelope  # noqa: E402
from pochta_factory import corpus, training  # noqa: E402

TRAINING = ("easy-ham-1", "spam-1")
PEER = ROOT / "tests" / "data" / "phishing_peer"
SETS = (
    "easy-ham-1",
    "spam-1",
    "project-phishing",
    "project-ham",
    "project-spam",
    "peer-phishing",
    "peer-control",
    "p2025-phishing",
    "p2025-ham",
)
BAD = frozenset({"spam-1", "project-phishing", "project-spam", "peer-phishing", "p2025-phishing"})
SEALED_BELOW = 52  # a corpus letter whose file's SHA-256 begins with a byte below this is sealed


@dataclass
class Item:
    set: str
    name: str
    raw: bytes
    envelope: Envelope
    auth: AuthResults = NO_AUTH
    extra: dict[str, float] = field(default_factory=dict)
    expect: frozenset[str] = frozenset()


def sealed(raw: bytes) -> bool:
    return hashlib.sha256(raw).digest()[0] < SEALED_BELOW


def corpus_items(quick: bool) -> Iterator[Item]:
    letters = [m for m in corpus.letters(TRAINING) if not sealed(m.raw)]
    if quick:
        letters = letters[:: max(1, len(letters) // 300)]
    for m in letters:
        yield Item(m.group, m.name, m.raw, training.envelope_of(m.raw))


def project_items() -> Iterator[Item]:
    from tests.unit.antispam_phishing import helpers

    key = helpers.make_key()
    resolver = helpers.zone(key)
    for case in helpers.cases():
        raw = case.raw(key)
        env = case.envelope
        auth = authenticate(
            raw, ip=env["ip"], mail_from=env["mail_from"], helo=env["helo"], resolver=resolver
        )
        yield Item(
            f"project-{case.verdict}",
            case.file,
            raw,
            Envelope(env["ip"], env["mail_from"], ("ivan.petrov@pochta.test",)),
            auth,
            dict(case.features),
        )


def peer_items() -> Iterator[Item]:
    manifest = PEER / "manifest.toml"
    if not manifest.is_file():
        note(f"no peer set at {PEER}: skipped")
        return
    data = tomllib.loads(manifest.read_text("utf-8"))
    for entry in data.get("letter", []):
        env = entry.get("envelope", {})
        envelope = (
            Envelope(env.get("ip"), env.get("mail_from"), ("ivan.petrov@pochta.test",))
            if env
            else Envelope()
        )
        expect = frozenset(
            s if s.startswith("PHISH_") else f"PHISH_{s}" for s in entry.get("expect", [])
        )
        kind = "peer-phishing" if entry["kind"] == "phishing" else "peer-control"
        yield Item(
            kind, entry["file"], (PEER / entry["file"]).read_bytes(), envelope, expect=expect
        )


def p2025_items() -> Iterator[Item]:
    from tests.unit.antispam_phishing import phishing_2025

    for case in phishing_2025.cases():
        yield Item(
            f"p2025-{case.kind}", case.file, case.raw, Envelope(), expect=frozenset(case.expect)
        )


@dataclass
class Result:
    item: Item
    signs: list[str]
    rules: list[str]
    verdict: str
    seconds: float
    label: str = ""  # the full scanner's
    named: bool = False  # the scanner's verdict holds a phishing sign that carries points


def run(item: Item, rules: ruleset.Rules, scanner: Any = None) -> Result:
    t0 = time.perf_counter()
    letter = parse(item.raw)
    signs = checks.check(letter, item.envelope)
    feats = {**features.extract(letter), **item.extra}
    hits = ruleset.evaluate(rules, feats, signs, item.auth)
    verdict = ruleset.verdict(hits, rules.actions)
    seconds = time.perf_counter() - t0
    sign_symbols = {s.symbol for s in signs}
    label, named = "", False
    if scanner is not None and item.set in SCANNED:
        full = scanner.scan(letter, None if item.set.startswith("p2025-") else item.envelope)
        label = full.label
        named = any(rules.sign_scores.get(s.symbol, 0.0) > 0 for s in full.signs)
    return Result(
        item,
        [s.symbol for s in signs],
        [h.symbol for h in hits if h.symbol not in sign_symbols],
        verdict,
        seconds,
        label,
        named,
    )


SCANNED = ("easy-ham-1", "project-phishing", "project-ham", "p2025-phishing", "p2025-ham")
"""The sets the full scanner reads too: the legitimate ones and the phishing."""


def scanner_summary(results: Sequence[Result]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for s in SCANNED:
        rs = [r for r in results if r.item.set == s]
        if not rs:
            continue
        filed = [r for r in rs if r.label in ("spam", "phishing")]
        out[s] = {
            "letters": len(rs),
            "filed_spam_or_phishing": round(len(filed) / len(rs), 4),
            "phishing": round(sum(r.label == "phishing" for r in rs) / len(rs), 4),
            "named_by_a_sign_with_points": round(sum(r.named for r in rs) / len(rs), 4),
            "filed": [r.item.name for r in filed][:30] if not s.endswith("phishing") else [],
            "missed": [r.item.name for r in rs if r.label == "ham"][:30]
            if s.endswith("phishing")
            else [],
        }
    return out


def table(results: Sequence[Result], names: Sequence[str], pick: str) -> dict[str, Any]:
    sizes = Counter(r.item.set for r in results)
    out: dict[str, Any] = {}
    for name in names:
        fires = Counter(r.item.set for r in results if name in getattr(r, pick))
        bad = sum(n for s, n in fires.items() if s in BAD)
        total = sum(fires.values())
        rate = {s: round(fires[s] / sizes[s], 4) if sizes[s] else None for s in SETS}
        ham_rate, spam_rate = rate["easy-ham-1"], rate["spam-1"]
        lift = None
        if ham_rate and spam_rate is not None:
            lift = round(spam_rate / ham_rate, 2)
        elif spam_rate:
            lift = "inf"
        out[name] = {
            "fires": {s: fires[s] for s in SETS if sizes[s]},
            "rate": {s: rate[s] for s in SETS if sizes[s]},
            "lift": lift,
            "precision": round(bad / total, 4) if total else None,
        }
    return out


def peer_summary(results: Sequence[Result]) -> dict[str, Any] | None:
    bad = [r for r in results if r.item.set == "peer-phishing"]
    controls = [r for r in results if r.item.set == "peer-control"]
    if not bad and not controls:
        return None
    from tests.unit.antispam_phishing.test_peer_set import FRAUD_FAMILY

    strong = set(FRAUD_FAMILY)
    misses = [
        {"file": r.item.name, "expect": sorted(r.item.expect), "found": r.signs}
        for r in bad
        if not r.item.expect & set(r.signs)
    ]
    flagged = [{"file": r.item.name, "found": r.signs} for r in controls if strong & set(r.signs)]
    return {
        "bad": len(bad),
        "bad_named": len(bad) - len(misses),
        "controls": len(controls),
        "controls_flagged": len(flagged),
        "misses": misses,
        "flagged_controls": flagged,
    }


def measure(quick: bool) -> dict[str, Any]:
    from pochta.antispam.model import booster
    from pochta.antispam.verdict import Scanner

    rules = ruleset.default()
    scanner = Scanner(model=booster.load(), rules_=rules)
    items = [*corpus_items(quick), *project_items(), *peer_items(), *p2025_items()]
    note(f"{len(items)} letters")
    results = []
    for i, item in enumerate(items):
        results.append(run(item, rules, scanner))
        if (i + 1) % 500 == 0:
            note(f"  {i + 1}")
    sizes = Counter(r.item.set for r in results)
    verdicts = {
        s: dict(Counter(r.verdict for r in results if r.item.set == s)) for s in SETS if sizes[s]
    }
    seconds = sorted(r.seconds for r in results)
    rule_symbols = [r.symbol for r in rules.rules]
    signs = table(results, checks.SYMBOLS, "signs")
    for symbol, row in signs.items():
        row["points"] = rules.sign_scores.get(symbol, 0.0)
    rule_rows = table(results, rule_symbols, "rules")
    for rule in rules.rules:
        rule_rows[rule.symbol].update(score=rule.score, group=rule.group)
    project_sets = [r for r in results if r.item.set.startswith("project-")]
    return {
        "benchmark": "sign_precision",
        "machine": machine(Path(tempfile.gettempdir())),
        "quick": quick,
        "sets": {s: sizes[s] for s in SETS if sizes[s]},
        "actions": {"spam": rules.actions.spam, "phishing": rules.actions.phishing},
        "signs": signs,
        "rules": rule_rows,
        "verdicts_by_rules": verdicts,
        "phishing_by_rules_alone": {
            s: [r.item.name for r in results if r.item.set == s and r.verdict == "phishing"][:50]
            for s in ("easy-ham-1", "project-ham", "peer-control", "p2025-ham")
            if sizes[s]
        },
        "project_wrong_verdicts": [
            {"file": r.item.name, "expected": r.item.set.removeprefix("project-"), "got": r.verdict}
            for r in project_sets
            if r.verdict != r.item.set.removeprefix("project-")
        ],
        "peer": peer_summary(results),
        "scanner": scanner_summary(results),
        "ms_per_letter": {
            "median": round(1000 * seconds[len(seconds) // 2], 2),
            "p99": round(1000 * seconds[int(0.99 * (len(seconds) - 1))], 2),
            "max": round(1000 * seconds[-1], 2),
        },
    }


# -- markdown ---------------------------------------------------------------------------------
_COLUMNS = (
    ("easy-ham-1", "easy-ham-1"),
    ("spam-1", "spam-1"),
    ("project-phishing", "proj. phish"),
    ("project-ham", "proj. ham"),
    ("project-spam", "proj. spam"),
    ("peer-phishing", "peer phish"),
    ("peer-control", "peer ctrl"),
    ("p2025-phishing", "2025 phish"),
    ("p2025-ham", "2025 ham"),
)


def _pct(row: dict[str, Any], s: str) -> str:
    fires, rate = row["fires"].get(s), row["rate"].get(s)
    if rate is None:
        return "–"
    return f"{100 * rate:.1f} % ({fires})"


def _cell(after: dict[str, Any] | None, before: dict[str, Any] | None, s: str) -> str:
    a = _pct(after, s) if after else "–"
    if before is None:
        return a
    b = _pct(before, s)
    return a if a == b else f"{b} → {a}"


def markdown(
    after: dict[str, Any], before: dict[str, Any] | None, rule_group: str | None = None
) -> str:
    cols = [(k, t) for k, t in _COLUMNS if k in after["sets"] or (before and k in before["sets"])]
    sizes = ", ".join(f"{k} {n}" for k, n in after["sets"].items())
    lines = [
        f"Letters: {sizes}. Cells: share of the set the symbol fires on (letters)"
        + ("; before → after where it changed." if before else "."),
        "",
    ]
    for what in ("signs", "rules"):
        head = ["symbol", "points", *(t for _, t in cols), "lift", "precision"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        names = list(dict.fromkeys([*after[what], *((before or {}).get(what, {}))]))
        if what == "rules" and rule_group is not None:
            names = [n for n in names if after[what].get(n, {}).get("group") == rule_group]
        for name in names:
            a = after[what].get(name)
            b = before[what].get(name) if before else None
            key = "points" if what == "signs" else "score"
            pts = [f"{x[key]:g}" for x in (b, a) if x is not None]
            points = pts[-1] if len(set(pts)) == 1 else " → ".join(pts)
            lift = [str(x["lift"]) for x in (b, a) if x is not None]
            prec = [
                "–" if x["precision"] is None else f"{x['precision']:.2f}"
                for x in (b, a)
                if x is not None
            ]
            row = [
                f"`{name}`",
                points,
                *(_cell(a, b, k) for k, _ in cols),
                (lift[-1] if len(set(lift)) == 1 else " → ".join(lift)).replace("None", "–"),
                prec[-1] if len(set(prec)) == 1 else " → ".join(prec),
            ]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    head = ["set", "phishing", "spam", "ham"]
    lines += [
        "Verdicts by the rules' points alone (no model):",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for s, v in after["verdicts_by_rules"].items():
        old = (before or {}).get("verdicts_by_rules", {}).get(s)
        cells = []
        for label in ("phishing", "spam", "ham"):
            n = str(v.get(label, 0))
            if old is not None and str(old.get(label, 0)) != n:
                n = f"{old.get(label, 0)} → {n}"
            cells.append(n)
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    scan = after.get("scanner")
    if scan:
        old_scan = (before or {}).get("scanner") or {}
        head = ["set", "letters", "filed spam or phishing", "phishing", "named by a sign"]
        lines += [
            "",
            "The full scanner (a fresh Scanner with the shipped model; the 2025 set without"
            " envelope, as POST /v1/scan):",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for s, v in scan.items():
            o = old_scan.get(s) or {}
            cells = [str(v["letters"])]
            for k in ("filed_spam_or_phishing", "phishing", "named_by_a_sign_with_points"):
                a = f"{100 * v[k]:.1f} %"
                if k in o and o[k] != v[k]:
                    a = f"{100 * o[k]:.1f} % → {a}"
                cells.append(a)
            lines.append(f"| {s} | " + " | ".join(cells) + " |")
    peer = after.get("peer")
    if peer:
        old = (before or {}).get("peer") or {}
        named = f"{peer['bad_named']} of {peer['bad']}"
        flagged = f"{peer['controls_flagged']} of {peer['controls']}"
        if old:
            named = f"{old['bad_named']} → {named}"
            flagged = f"{old['controls_flagged']} → {flagged}"
        lines += [
            "",
            f"Peer set: bad letters named by an expected sign {named}; controls "
            f"flagged by a fraud-family sign {flagged}.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    args = _args()
    if args.markdown:
        after = json.loads(Path(args.markdown).read_text())
        before = json.loads(Path(args.before).read_text()) if args.before else None
        sys.stdout.write(markdown(after, before, args.rule_group))
        return
    emit(measure(args.quick))


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="300 corpus letters: check it works")
    p.add_argument("--markdown", metavar="RESULT.json", help="print the tables of a saved run")
    p.add_argument("--before", metavar="RESULT.json", help="with --markdown: show before → after")
    p.add_argument("--rule-group", metavar="GROUP", help="with --markdown: only this group's rules")
    return p.parse_args()


if __name__ == "__main__":
    main()
