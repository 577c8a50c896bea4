"""CPU of the look-alike checks per letter, and of their parts per host name (issue 19).

Over the training groups of the corpus (easy-ham-1, spam-1) and the project's phishing
letters, each parsed once first:

    lookalike_checks   the checks that read names (sender_lookalike, sender_foreign_tld,
                       sender_idn, display_name_brand, link_lookalike, link_off_brand), with
                       the protected list's per-host cache empty at the start of the run
    all_signs          every phishing sign of signs/checks.py (the "signs" stage of
                       scan_cpu.py), same cold start

and per distinct host name of those letters (From domains and link hosts): ``skeleton`` of
its first label, ``Protected.imitation`` (uncached: a fresh list for each pass) and the
IDN-spoof check. Time is ``time.process_time``; each figure is the best of three passes.

Runs against whichever pochta is importable, so the same script measures the code before a
change (``PYTHONPATH=/path/to/old/src python benchmarks/lookalike_cpu.py``) and after.

    python benchmarks/lookalike_cpu.py
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.antispam.signs import checks, lookalike, protected
from pochta.mime import normalize
from pochta.mime.letter import Letter, parse
from pochta_factory import corpus
from pochta_factory.training import TRAIN_GROUPS, envelope_of

ROOT = Path(__file__).resolve().parents[1]
NAME_CHECKS = (
    checks.sender_lookalike,
    checks.sender_foreign_tld,
    checks.sender_idn,
    checks.display_name_brand,
    checks.link_lookalike,
    checks.link_off_brand,
)


def fresh() -> protected.Protected:
    p = protected.default()
    return protected.Protected(p.orgs, p.abused_tlds)


def idn_check() -> Callable[[str], bool]:
    """The IDN-spoof check of whichever version is importable."""
    new = getattr(lookalike, "idn_spoof", None)
    if new is not None:
        return new  # type: ignore[no-any-return]
    old: Callable[[str], bool] = checks._idn_spoof  # type: ignore[attr-defined]
    return old


def best(fn: Callable[[], None], passes: int = 3) -> float:
    times = []
    for _ in range(passes):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def main() -> None:
    result: dict[str, Any] = {"benchmark": "lookalike_cpu", "machine": machine(ROOT)}
    raws = [x.raw for x in corpus.unsealed(TRAIN_GROUPS)]
    raws += [p.read_bytes() for p in sorted((ROOT / "tests/data/phishing").glob("*.eml"))]
    note(f"parsing {len(raws)} letters")
    letters: list[tuple[Letter, Any]] = [(parse(raw), envelope_of(raw)) for raw in raws]
    hosts: list[str] = []
    for letter, _ in letters:
        hosts += [h for h in (letter.from_domain, *(x.host for x in letter.web_links)) if h]
    hosts = list(dict.fromkeys(h for h in hosts if len(h) <= 253))
    labels = [h.split(".")[0] for h in hosts]
    n, nh = len(letters), len(hosts)
    note(f"{n} letters, {nh} distinct hosts")

    def run_checks(which: tuple[checks.Check, ...]) -> Callable[[], None]:
        def go() -> None:
            p = fresh()
            for letter, env in letters:
                checks.check(letter, env, protected=p, checks=which)

        return go

    def imitation() -> None:
        p = fresh()
        for h in hosts:
            p.imitation(h)

    spoof = idn_check()

    def idn() -> None:
        for h in hosts:
            spoof(normalize.domain(h) or h)

    def skeletons() -> None:
        for label in labels:
            lookalike.skeleton(lookalike.unicode_label(label) or label)

    result["letters"] = n
    result["hosts"] = nh
    result["cpu_us_per_letter"] = {
        "lookalike_checks": round(1e6 * best(run_checks(NAME_CHECKS)) / n, 1),
        "all_signs": round(1e6 * best(run_checks(checks.CHECKS)) / n, 1),
    }
    result["cpu_us_per_host"] = {
        "skeleton": round(1e6 * best(skeletons) / nh, 2),
        "imitation_uncached": round(1e6 * best(imitation) / nh, 2),
        "idn_spoof": round(1e6 * best(idn) / nh, 2),
    }
    emit(result)


if __name__ == "__main__":
    main()
