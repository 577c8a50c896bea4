"""How the model does on data it may be developed on: the training groups and the letters
pochta generates, never the evaluation groups (easy-ham-2, hard-ham-1, spam-2).

The same replay as ``pochta model train`` (easy-ham-1 + spam-1 in date order, the generated
legitimate letters interleaved, the counters learning true labels), then:

- out of fold: five models, each fitted without one fifth of the dates; the threshold is the
  lowest with at most 0.2 % of the corpus ham above it; spam-1 recall and easy-ham-1 false
  positives at it, and the share of each generated family above it;
- leave one family out: for each family of generated letters (newsletter, receipt, promo...),
  the content model fitted without that family, asked about its letters (their senders'
  counters unknown); the share above the threshold is how a kind of legitimate mail the model
  never saw would be filed. ``without_generated``: the same share for a model fitted on the
  corpus letters alone.

    python benchmarks/model_validation.py                  # legit.COUNT generated letters
    python benchmarks/model_validation.py --generated 0    # the corpus alone (no LOFO)
"""

from __future__ import annotations

import argparse
import time

from _common import emit, machine, note
from pochta.antispam.model import design
from pochta.antispam.verdict import model_columns
from pochta_factory import legit, training


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generated", type=int, default=legit.COUNT)
    ap.add_argument("--iterations", type=int, default=400)
    ap.add_argument("--seed", type=int, default=training.SEED)
    ap.add_argument("--no-lofo", action="store_true", help="out of fold only")
    args = ap.parse_args()
    from pathlib import Path

    started = time.perf_counter()
    note(f"replaying easy-ham-1 + spam-1 + {args.generated} generated letters")
    samples = training.training_samples(generated=args.generated)
    data = training.replay(samples, training.fresh_scanner(), learn_truth=True)
    columns = design.model_columns(model_columns())
    note(f"replayed {len(samples)} letters in {data.seconds:.0f} s; validating")
    threshold, figures = training.validate(
        data, columns, iterations=args.iterations, seed=args.seed, lofo=not args.no_lofo
    )
    emit(
        {
            "benchmark": "model_validation",
            "machine": machine(Path.cwd()),
            "trained_on": list(training.TRAIN_GROUPS),
            "generated": {
                "letters": args.generated,
                "seed": legit.SEED,
                "families": legit.families_of(
                    s.name for s in samples if s.group == training.GENERATED
                ),
            },
            "columns": len(columns),
            "iterations": args.iterations,
            "threshold": round(threshold, 4),
            **figures,
            "seconds": round(time.perf_counter() - started, 1),
        }
    )


if __name__ == "__main__":
    main()
