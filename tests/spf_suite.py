"""The public RFC 7208 test suite (tests/data/spf/rfc7208-tests.yml, from pyspf's repository,
BSD licence in rfc7208-tests.LICENSE) run through a pochta Resolver.

Each scenario's ``zonedata`` is served by :class:`SuiteResolver` with the suite's own
conventions (as its reference driver, pyspf's test/testspf.py, reads them): a ``TIMEOUT``
entry answers "timeout" for a type not listed before it; ``SPF`` records stand in for TXT
when a name has no TXT; ``TXT: NONE`` means no TXT record; names starting with ``error.``
that are not in the zone time out; CNAMEs are followed (as a real resolver does); a name
with an empty or too long label is a DNS error, as dnspython raises it. Only the result is
compared (``result``, or any of a list); explanations are not checked (pochta does not use
them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pochta.antispam.auth.resolver import DnsTempError, RType


class SuiteResolver:
    def __init__(self, zonedata: dict[str, list[Any]]) -> None:
        self.zone = {k.lower().rstrip("."): v for k, v in zonedata.items()}
        self.queries = 0

    def query(self, name: str, rtype: RType) -> list[str]:
        self.queries += 1
        return self._answer(name.lower().rstrip("."), rtype, 0)

    def _answer(self, name: str, rtype: str, depth: int) -> list[str]:
        labels = name.split(".")
        if len(name) > 253 or any(not x or len(x) > 63 for x in labels):
            raise DnsTempError(f"{name}: not a valid DNS name")
        entries = self.zone.get(name)
        if entries is None:
            if name.startswith("error."):
                raise DnsTempError(f"{name}: timeout")
            return []
        has_txt = any(isinstance(e, dict) and "TXT" in e for e in entries)
        values: list[Any] = []
        cnames: list[str] = []
        seen = False
        for entry in entries:
            if entry == "TIMEOUT":
                if not seen:
                    raise DnsTempError(f"{name}: timeout")
                break
            if not isinstance(entry, dict):
                continue
            for kind, value in entry.items():
                if kind == "CNAME":
                    cnames.append(str(value))
                if kind == rtype or (rtype == "TXT" and kind == "SPF" and not has_txt):
                    if value == "NONE":
                        continue
                    seen = True
                    if value == "TIMEOUT":
                        raise DnsTempError(f"{name}: timeout")
                    values.append(value)
        if not values and cnames and depth < 8:
            return self._answer(cnames[0].lower().rstrip("."), rtype, depth + 1)
        if rtype == "MX":
            return [str(v[1]).rstrip(".").lower() for v in sorted(values, key=lambda v: v[0])]
        if rtype == "TXT":
            return ["".join(str(p) for p in (v if isinstance(v, list) else [v])) for v in values]
        if rtype == "PTR":
            return [str(v).rstrip(".").lower() for v in values]
        return [str(v) for v in values]


@dataclass(frozen=True)
class Case:
    name: str  # "<scenario>: <test id>"
    spec: str  # the RFC 7208 section(s)
    host: str
    mailfrom: str
    helo: str
    results: tuple[str, ...]  # any of these is right
    zone: dict[str, list[Any]]


@dataclass(frozen=True)
class Outcome:
    got: str
    ok: bool
    queries: int


def load(path: Path) -> list[Case]:
    cases: list[Case] = []
    with path.open("rb") as f:
        for scenario in yaml.safe_load_all(f):
            for test_id, t in scenario["tests"].items():
                want = t["result"] if isinstance(t["result"], list) else [t["result"]]
                cases.append(
                    Case(
                        f"{scenario['description']}: {test_id}",
                        str(t.get("spec", "")),
                        str(t["host"]),
                        str(t["mailfrom"]),
                        str(t["helo"]),
                        tuple(want),
                        scenario["zonedata"],
                    )
                )
    return cases


Check = Callable[[str, str, str, Any], Any]  # (ip, mail_from, helo, resolver) -> .result


def run_case(case: Case, check: Check) -> Outcome:
    resolver = SuiteResolver(case.zone)
    got = str(check(case.host, case.mailfrom, case.helo, resolver).result)
    return Outcome(got, got in case.results, resolver.queries)
