"""Sender authentication evaluators side by side: correctness on the public RFC 7208 test suite
(tests/data/spf/rfc7208-tests.yml) and on pochta's RFC 7489 DMARC cases, CPU per check, DNS
questions per check, and the cost of a hostile SPF term.

- SPF, "pochta": what ships, pyspf through pochta's Resolver (pochta.antispam.auth.spf);
- SPF, "pochta_own": pochta's former evaluator, read from git at ``--old`` (the last commit
  that had it), run on the same Resolver;
- DMARC, "pochta": pochta.antispam.auth.results.check_dmarc; "authheaders": its
  dmarc_per_from with a dnsfunc over the same zones (``pip install authheaders``, in
  ``.[bench]``).

Every evaluator gets the same answers (tests/spf_suite.SuiteResolver, FixtureResolver): no
network. CPU is process time over ``--rounds`` passes, per check.

    python benchmarks/spf_suite.py                 # JSON on stdout
    python benchmarks/spf_suite.py --old 049165e   # where the former evaluator is read from
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import emit, machine, note

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.*

import spf as pyspf  # type: ignore[import-untyped]  # noqa: E402
from tests.spf_suite import Case, load, run_case  # noqa: E402
from tests.spf_zones import REAL_CASES, REAL_ZONE  # noqa: E402

from pochta.antispam.auth import spf  # noqa: E402
from pochta.antispam.auth.resolver import FixtureResolver  # noqa: E402
from pochta.antispam.auth.results import check_dmarc  # noqa: E402

SUITE = ROOT / "tests" / "data" / "spf" / "rfc7208-tests.yml"
SPF_SOURCE = "src/pochta/antispam/auth/spf.py"


def old_evaluator(rev: str) -> Callable[..., Any] | None:
    """pochta's former SPF evaluator, its ``check`` loaded from ``rev`` of this repository."""
    try:
        source = subprocess.run(
            ["git", "show", f"{rev}:{SPF_SOURCE}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    if "_Evaluator" not in source:
        return None  # that revision already runs pyspf
    module = types.ModuleType("pochta_spf_own")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:{SPF_SOURCE}", "exec"), module.__dict__)
    check: Callable[..., Any] = module.check
    return check


def suite(check: Callable[..., Any], cases: list[Case], rounds: int) -> dict[str, Any]:
    outcomes = [run_case(c, check) for c in cases]  # also warms caches
    t0 = time.process_time()
    for _ in range(rounds):
        for c in cases:
            run_case(c, check)
    cpu = time.process_time() - t0
    failed = [
        {"case": c.name, "spec": c.spec, "expected": list(c.results), "got": o.got}
        for c, o in zip(cases, outcomes, strict=True)
        if not o.ok
    ]
    return {
        "passed": sum(o.ok for o in outcomes),
        "cases": len(cases),
        "cpu_us_per_check": round(cpu / (rounds * len(cases)) * 1e6, 1),
        "dns_questions": sum(o.queries for o in outcomes),
        "failed": failed,
    }


def real(check: Callable[..., Any], rounds: int) -> dict[str, Any]:
    right, questions = 0, 0
    for ip, mail_from, helo, expected in REAL_CASES:
        resolver = FixtureResolver(REAL_ZONE)
        right += check(ip, mail_from, helo, resolver).result == expected
        questions += len(resolver.queries)
    t0 = time.process_time()
    for _ in range(rounds):
        for ip, mail_from, helo, _expected in REAL_CASES:
            check(ip, mail_from, helo, FixtureResolver(REAL_ZONE))
    cpu = time.process_time() - t0
    return {
        "right": right,
        "cases": len(REAL_CASES),
        "cpu_us_per_check": round(cpu / (rounds * len(REAL_CASES)) * 1e6, 1),
        "dns_questions_per_check": round(questions / len(REAL_CASES), 2),
    }


def hostile_term(n: int) -> dict[str, Any]:
    """CPU of a record with one ``a:.aaaa...!`` term of n characters: pyspf alone (its own
    DNS hook answering the record) and through pochta (which refuses the term first)."""
    record = f"v=spf1 a:.{'a' * n}! -all"

    def lookup(name: str, qtype: str, *args: Any, **kwargs: Any) -> list[Any]:
        return [((name, qtype), (record.encode(),))] if qtype == "TXT" else []

    saved = pyspf.DNSLookup
    pyspf.DNSLookup = lookup
    try:
        t0 = time.process_time()
        alone = pyspf.query(i="192.0.2.1", s="u@example.com", h="h.example.com").check()[0]
        cpu_alone = time.process_time() - t0
    finally:
        pyspf.DNSLookup = saved
    t0 = time.process_time()
    ours = spf.check(
        "192.0.2.1", "u@example.com", "h", FixtureResolver({"example.com": {"TXT": [record]}})
    ).result
    cpu_ours = time.process_time() - t0
    return {
        "term_chars": n,
        "pyspf_alone": {"result": alone, "cpu_ms": round(cpu_alone * 1e3, 1)},
        "pochta": {"result": ours, "cpu_ms": round(cpu_ours * 1e3, 3)},
    }


def dmarc(rounds: int) -> dict[str, Any]:
    from tests.unit.antispam_phishing.test_dmarc_rfc import CASES

    def ours(case: Any) -> tuple[str, str]:
        _sec, _what, zone, from_domain, spf_r, dkim_r, _exp = case
        r = check_dmarc(from_domain, spf_r, dkim_r, FixtureResolver(zone))
        return r.result, r.policy

    out: dict[str, Any] = {"pochta": _dmarc_run(ours, CASES, rounds)}
    try:
        from authheaders import dmarc_per_from  # type: ignore[import-untyped]
        from authres import (  # type: ignore[import-untyped]
            DKIMAuthenticationResult,
            SPFAuthenticationResult,
        )
    except ImportError:
        note("authheaders is not installed (pip install authheaders): skipped")
        return out

    def theirs(case: Any) -> tuple[str, str]:
        _sec, _what, zone, from_domain, spf_r, dkim_r, _exp = case

        def dnsfunc(name: str) -> str | None:
            records = zone.get(name, {}).get("TXT", [])
            return records[0] if records else None  # its interface: one string per name

        s = SPFAuthenticationResult(result=spf_r.result, smtp_mailfrom=spf_r.identity)
        passing = [d for d in dkim_r if d.result == "pass"] or dkim_r
        d = (
            DKIMAuthenticationResult(result=passing[0].result, header_d=passing[0].domain)
            if passing
            else None
        )
        try:
            result, _comment, _from, policy = dmarc_per_from(
                from_domain, spf_result=s, dkim_result=d, dnsfunc=dnsfunc
            )
        except Exception as exc:
            return f"error {type(exc).__name__}", ""
        return str(result), str(policy)

    out["authheaders"] = _dmarc_run(theirs, CASES, rounds)
    return out


def _dmarc_run(
    fn: Callable[[Any], tuple[str, str]], cases: list[Any], rounds: int
) -> dict[str, Any]:
    got = [fn(c) for c in cases]
    t0 = time.process_time()
    for _ in range(rounds):
        for c in cases:
            fn(c)
    cpu = time.process_time() - t0
    failed = [
        {"case": f"{c[0]} {c[1]}", "expected": list(c[6][:2]), "got": list(g)}
        for c, g in zip(cases, got, strict=True)
        if g != c[6][:2]
    ]
    return {
        "passed": len(cases) - len(failed),
        "cases": len(cases),
        "cpu_us_per_check": round(cpu / (rounds * len(cases)) * 1e6, 1),
        "failed": failed,
    }


def main(args: argparse.Namespace) -> None:
    cases = load(SUITE)
    result: dict[str, Any] = {
        "machine": machine(ROOT),
        "rounds": args.rounds,
        "spf_rfc7208_suite": {"pochta": suite(spf.check, cases, args.rounds)},
        "spf_real_looking": {"pochta": real(spf.check, args.rounds)},
    }
    own = old_evaluator(args.old)
    if own is None:
        note(f"no former evaluator at {args.old}: pochta_own skipped")
    else:
        result["spf_rfc7208_suite"]["pochta_own"] = suite(own, cases, args.rounds)
        result["spf_real_looking"]["pochta_own"] = real(own, args.rounds)
    result["spf_hostile_term"] = [hostile_term(n) for n in (1_000, 4_000, 16_000)]
    result["dmarc_rfc7489_cases"] = dmarc(args.rounds)
    emit(result)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20, help="passes over the cases for CPU")
    p.add_argument("--old", default="049165e", help="a revision with pochta's own evaluator")
    main(p.parse_args())
