"""How each model feature separates ham from spam in the training groups, and whether that
carries over to letters the training groups do not resemble (issue 6, item 1).

Three sets, none of them an evaluation group (easy-ham-2, hard-ham-1 and spam-2 are never read
here):

    train      easy-ham-1 (ham) against spam-1 (spam), replayed in date order through fresh
               counters that learn the true labels: each letter's shingle features are what
               was known at its time (exactly the rows ``pochta model train`` fits)
    project    the project's own letters, tests/data/phishing: the manifest's verdict "ham"
               (legitimate look-alikes: a tax notice, a bank's statement, a newsletter, a
               receipt...) against "phishing" and "spam"; no DNS, no shingle history (the
               manifest's shingle statistics for its two spam letters are merged in)
    generated  the legitimate commercial letters pochta writes for training
               (:mod:`pochta_factory.legit`): only their ham side is shown

Per feature and set: the mean and the share of letters where it is not 0 (a missing value
counts as 0), per class, and the AUC of "spam scores higher" (0.5: no separation; 1: every
spam letter above every ham letter; a missing value ranks lowest, as CatBoost's default
``nan_mode=Min`` puts it). Flags:

    ham-degenerate     in training, the ham side is (almost) never non-zero while spam often
                       is: the model can only learn "any of it = spam"
    spam-degenerate    the reverse: "none of it = spam"
    constant           never varies in training: the model cannot use it
    disagrees          the training AUC and the project letters' AUC point opposite ways

    python benchmarks/feature_separation.py               # JSON
    python benchmarks/feature_separation.py --markdown    # a table of the non-shingle features
"""

from __future__ import annotations

import argparse
import math
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import emit, note
from pochta.antispam.model import design
from pochta.antispam.rules import ruleset as rules
from pochta.antispam.verdict import Scanner, model_columns, rule_features
from pochta.mime.letter import parse
from pochta.types import Envelope
from pochta_factory import corpus, legit, training

PROJECT = Path(__file__).resolve().parents[1] / "tests" / "data" / "phishing"
DEGENERATE = 0.01  # "never": non-zero in fewer than 1 % of one class...
OFTEN = 0.05  # ...while at least 5 % of the other class has it


def auc(values: Sequence[float], labels: Sequence[int]) -> float | None:
    """P(a spam letter's value > a ham letter's) + half the ties (Mann-Whitney)."""
    pairs = sorted(
        ((-math.inf if math.isnan(v) else v), y) for v, y in zip(values, labels, strict=True)
    )
    pos = sum(labels)
    neg = len(labels) - pos
    if not pos or not neg:
        return None
    rank_sum = 0.0
    i = 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        mid = (i + j + 1) / 2  # the average 1-based rank of the tie group
        rank_sum += mid * sum(y for _, y in pairs[i:j])
        i = j
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


def side(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "nonzero": None}
    clean = [0.0 if math.isnan(v) else v for v in values]
    return {
        "mean": round(sum(clean) / len(clean), 4),
        "nonzero": round(sum(1 for v in clean if v) / len(clean), 4),
    }


def describe(rows: Sequence[dict[str, float]], labels: Sequence[int], name: str) -> dict[str, Any]:
    values = [float(r.get(name, math.nan)) for r in rows]
    ham = [v for v, y in zip(values, labels, strict=True) if y == 0]
    spam = [v for v, y in zip(values, labels, strict=True) if y == 1]
    a = auc(values, labels) if ham and spam else None
    return {"ham": side(ham), "spam": side(spam), "auc": None if a is None else round(a, 4)}


def project_rows() -> tuple[list[dict[str, float]], list[int], list[str]]:
    """The project's letters as the model sees them (no DNS: as in training)."""
    manifest = tomllib.loads((PROJECT / "manifest.toml").read_text())
    scanner = Scanner()
    rows, labels, names = [], [], []
    for case in manifest["letter"]:
        raw = (PROJECT / case["file"]).read_bytes()
        env = case["envelope"]
        analysis = scanner.analyzer.analyze(
            parse(raw), Envelope(ip=env.get("ip"), sender=env.get("mail_from"))
        )
        f = {**analysis.features, **case.get("features", {})}
        hits = rules.evaluate(scanner.rules, f, list(analysis.signs), analysis.auth)
        f.update(rule_features(hits))
        rows.append(f)
        labels.append(int(case["verdict"] != "ham"))
        names.append(case["file"])
    return rows, labels, names


def generated_rows() -> list[dict[str, float]]:
    scanner = Scanner()
    rows = []
    for item in legit.letters():
        analysis = scanner.analyzer.analyze(parse(item.raw), item.envelope)
        f = dict(analysis.features)
        hits = rules.evaluate(scanner.rules, f, list(analysis.signs), analysis.auth)
        f.update(rule_features(hits))
        rows.append(f)
    return rows


def flags(train: dict[str, Any], project: dict[str, Any]) -> list[str]:
    out = []
    h, s = train["ham"]["nonzero"], train["spam"]["nonzero"]
    if train["auc"] is not None and h is not None and s is not None:
        if h < DEGENERATE and s >= OFTEN:
            out.append("ham-degenerate")
        if s < DEGENERATE and h >= OFTEN:
            out.append("spam-degenerate")
        if train["ham"]["mean"] == train["spam"]["mean"] and (h in (0, 1)) and s == h:
            out.append("constant")
    ta, pa = train["auc"], project["auc"]
    if (
        ta is not None
        and pa is not None
        and ((ta >= 0.6 and pa <= 0.45) or (ta <= 0.4 and pa >= 0.55))
    ):
        out.append("disagrees")
    return out


def measure() -> dict[str, Any]:
    note("replaying easy-ham-1 + spam-1 (true labels)")
    ordered = training.corpus_samples(corpus.unsealed(training.TRAIN_GROUPS))
    data = training.replay(ordered, training.fresh_scanner(), learn_truth=True)
    note("the project's letters")
    p_rows, p_labels, _ = project_rows()
    note("the generated legitimate letters")
    g_rows = generated_rows()
    g_labels = [0] * len(g_rows)
    features = []
    used = set(design.model_columns(model_columns()))
    for name in model_columns():
        train = describe(data.rows, data.labels, name)
        project = describe(p_rows, p_labels, name)
        gen = describe(g_rows, g_labels, name)["ham"]
        features.append(
            {
                "feature": name,
                "train": train,
                "project": project,
                "generated_ham": gen,
                "flags": flags(train, project),
                "in_model": name in used,
                "decision": design.decision(name),
            }
        )
    return {
        "benchmark": "feature_separation",
        "sets": {
            "train": {"ham": data.labels.count(0), "spam": data.labels.count(1)},
            "project": {"ham": p_labels.count(0), "phishing_or_spam": p_labels.count(1)},
            "generated": {"ham": len(g_rows)},
        },
        "features": features,
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def markdown(result: dict[str, Any], shingles: bool) -> str:
    sets = result["sets"]
    lines = [
        f"train: {sets['train']['ham']} ham (easy-ham-1), {sets['train']['spam']} spam (spam-1);"
        f" project: {sets['project']['ham']} ham, {sets['project']['phishing_or_spam']}"
        f" phishing/spam; generated: {sets['generated']['ham']} ham.",
        "Non-zero % per class; AUC: spam above ham (0.5 = no separation).",
        "",
        "| feature | train ham % | train spam % | train AUC | project ham % "
        "| project phish % | project AUC | generated ham % | flags | model |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in result["features"]:
        if f["feature"].startswith("shingle.") and not shingles:
            continue
        t, p = f["train"], f["project"]
        if "constant" in f["flags"] and not f["project"]["spam"]["nonzero"]:
            continue
        lines.append(
            f"| {f['feature']} | {_pct(t['ham']['nonzero'])} | {_pct(t['spam']['nonzero'])} "
            f"| {_num(t['auc'])} | {_pct(p['ham']['nonzero'])} | {_pct(p['spam']['nonzero'])} "
            f"| {_num(p['auc'])} | {_pct(f['generated_ham']['nonzero'])} "
            f"| {', '.join(f['flags'])} | {f['decision']} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--markdown", action="store_true", help="a table instead of JSON")
    p.add_argument("--shingles", action="store_true", help="the table lists shingle features")
    args = p.parse_args()
    result = measure()
    if args.markdown:
        print(markdown(result, args.shingles))
    else:
        emit(result)


if __name__ == "__main__":
    main()
