"""Fuzz targets (hypothesis): a fixed, small number of examples in CI; many more with
``scripts/fuzz`` (``FUZZ_EXAMPLES``). A crash found is kept as a regression test with
``@example`` beside its target."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0")) or None


def fuzz_settings(ci_examples: int) -> settings:
    """``ci_examples`` in CI; FUZZ_EXAMPLES when set (scripts/fuzz)."""
    return settings(
        max_examples=EXAMPLES or ci_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=EXAMPLES is None,  # CI: the same inputs every run
    )
