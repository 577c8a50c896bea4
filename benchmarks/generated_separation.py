"""Classifier-free: how each model column is distributed over the training groups
(easy-ham-1, spam-1) and the letters pochta generates (all, and per family), so that a
feature whose ham side is degenerate in training, or on which the generated letters sit
apart from every real letter (an artefact the model could learn as "generated = ham"), can
be seen without training anything. Never reads the evaluation groups.

For each column: the share of letters where it is non-zero and its mean, per group; and
``apart``: the generated letters' non-zero share is outside [min, max] of the two corpus
groups' by more than 0.25 (the generated letters look like neither real ham nor real spam).

    python benchmarks/generated_separation.py [--generated 1800]
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path

from _common import emit, machine, note
from pochta.antispam.model import design
from pochta.antispam.verdict import model_columns
from pochta_factory import legit, training


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generated", type=int, default=legit.COUNT)
    ap.add_argument("--families", action="store_true", help="per generated family too")
    args = ap.parse_args()
    samples = training.training_samples(generated=args.generated)
    note(f"replaying {len(samples)} letters")
    data = training.replay(samples, training.fresh_scanner(), learn_truth=True)
    columns = design.model_columns(model_columns())
    buckets: dict[str, list[int]] = defaultdict(list)
    for i, (g, n) in enumerate(zip(data.groups, data.names, strict=True)):
        buckets[g].append(i)
        if args.families and g == training.GENERATED:
            buckets[f"generated/{training.family(g, n)}"].append(i)

    def stats(col: str, idx: list[int]) -> dict[str, float]:
        vals = [data.rows[i].get(col, math.nan) for i in idx]
        vals = [0.0 if math.isnan(v) else v for v in vals]
        return {"nonzero": round(sum(v != 0 for v in vals) / len(vals), 3),
                "mean": round(sum(vals) / len(vals), 3)}  # fmt: skip

    table = {}
    apart = []
    for col in columns:
        if design.LEAN.match(col):
            continue
        row = {name: stats(col, idx) for name, idx in sorted(buckets.items())}
        ham, spam = row["easy-ham-1"]["nonzero"], row["spam-1"]["nonzero"]
        gen = row.get(training.GENERATED, {}).get("nonzero")
        if gen is not None and (gen > max(ham, spam) + 0.25 or gen < min(ham, spam) - 0.25):
            apart.append(col)
        table[col] = {"decision": design.decision(col), **row}
    emit({"benchmark": "feature_separation", "machine": machine(Path.cwd()),
          "letters": {k: len(v) for k, v in sorted(buckets.items())},
          "generated_apart": apart, "columns": table})  # fmt: skip


if __name__ == "__main__":
    main()
