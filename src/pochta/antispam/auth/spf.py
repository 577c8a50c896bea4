"""SPF (RFC 7208): may this IP send mail for this domain? Evaluated by pyspf, on our Resolver.

Why pyspf and not pochta's own evaluator (which this module held before; measured by
``benchmarks/spf_suite.py`` on the RFC 7208 test suite, tests/data/spf/rfc7208-tests.yml):

- correctness: pyspf passes 203 of the suite's 203 cases through pochta's Resolver; pochta's
  own evaluator passed 175 (it missed syntax errors that must be ``permerror``: bad domains in
  ``a``/``mx``, ``/0`` prefixes written ``/032``, ``exists`` with a CIDR, exp= and redirect=
  errors, unknown modifiers with bad syntax, non-ASCII and control characters; it answered
  ``temperror`` where an invalid name must be ``permerror``/``fail``);
- limits: both count the 10 DNS-querying terms, the 2 void lookups and the 10 MX/PTR names
  per term (RFC 7208 4.6.4) and stop with ``permerror``; the questions and the time of one
  letter are bounded again, outside any evaluator, by
  :class:`~pochta.antispam.auth.resolver.LimitedResolver`;
- CPU: pyspf costs more, 51 µs a check on the suite against 24 µs (119 against 100 µs on
  real-looking records, tests/spf_zones.py), small next to one DNS round trip. Where its CPU
  grows with what a sender publishes, it is fenced here, before pyspf reads the record: an
  SPF record longer than :data:`MAX_RECORD` characters, with more than :data:`MAX_TERMS`
  terms, or with a term longer than :data:`MAX_TERM` characters (pyspf's domain-spec regex
  is quadratic: 2 s on one 16,000-character term) is ``permerror``. A chain of 10 includes
  of 53 KB records each cost 1.4 s of CPU a letter on the server's async path (every round of
  the replay evaluates every record gathered, 15 µs per ``ip4:`` term); at the bounds the
  worst chain costs tens of milliseconds (tests/unit/antispam_phishing/test_spf_cost.py), and
  :class:`Query` keeps what it parsed and matched from one round to the next (``memo``);
- explanations: pyspf fetches an ``exp=`` text on every check and expands its macros;
  pochta never uses the text, so :class:`Query` asks the question (the same questions as
  pyspf) and does not expand it (a 64 KB explanation of macros cost 25 ms each round);
- no network of its own: pyspf asks DNS through one module-level function,
  ``spf.DNSLookup`` (the hook its own test driver uses); this module installs there, once, a
  dispatcher that answers from the Resolver of the check in progress (a ContextVar, so
  threads and concurrent checks never mix, and code that calls pyspf outside :func:`check`
  still gets pyspf's own lookup). Tests run it on the offline FixtureResolver.

pyspf's explanation (``exp=``) text is not used: the reason reported is the matching term.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import spf as pyspf  # type: ignore[import-untyped]

from pochta.antispam.auth import replay
from pochta.antispam.auth.resolver import (
    RTYPES,
    DnsTempError,
    NeedAnswer,
    Question,
    Resolver,
    RType,
    question,
)
from pochta.pickling import by_fields

log = logging.getLogger("pochta.antispam.auth.spf")

SpfCode = Literal["pass", "fail", "softfail", "neutral", "none", "temperror", "permerror"]
SPF_CODES: tuple[SpfCode, ...] = (
    "pass",
    "fail",
    "softfail",
    "neutral",
    "none",
    "temperror",
    "permerror",
)

MAX_LOOKUPS = pyspf.MAX_LOOKUP  # 10 DNS-querying terms (RFC 7208 4.6.4)
MAX_VOID = pyspf.MAX_VOID_LOOKUPS  # 2 lookups that answer nothing
MAX_TERM = 512  # characters of one term of an SPF record (a domain is at most 253)
MAX_RECORD = 2048
"""Characters of one SPF record. RFC 7208 3.4 asks a domain's TXT records to stay under 450
octets in all (one UDP answer); flattening tools split records at 450-512 characters; an
answer over 1,232 bytes (DNS Flag Day 2020's EDNS size) already needs TCP. 2 KB is four times
the RFC's figure, and a record at it costs pyspf about 1 ms to evaluate."""
MAX_TERMS = 128
"""Terms of one SPF record (``v=spf1`` not counted): what 2 KB of ``ip4:`` networks hold (a
real record has a few dozen at most: Google's and Microsoft's netblock records about ten).
Short terms cost as much as long ones (``ip6:::1`` is 7 characters; a 2 KB record of them,
250 terms, cost pyspf 2.7 ms against an IPv6 client)."""
MAX_NAMES = pyspf.MAX_MX  # names of one MX or PTR answer whose addresses are checked (10)

_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$", re.I)
_SPF_RECORD = re.compile(r"v=spf1(?: |$)", re.I)


@by_fields  # read back by the server: pochta.pickling
@dataclass(frozen=True, slots=True)
class SpfResult:
    result: SpfCode
    scope: Literal["mailfrom", "helo"]  # which identity was checked
    identity: str  # the address checked: MAIL FROM, or postmaster@HELO
    domain: str  # its domain
    mechanism: str = ""  # the term that decided: "-all", "ip4:192.0.2.0/24", "default"...
    reason: str = ""


# -- pyspf's DNS, answered by our Resolver ---------------------------------------------------
_current: contextvars.ContextVar[Resolver | None] = contextvars.ContextVar(
    "pochta_spf_resolver", default=None
)
_pyspf_lookup: Callable[..., Any] = pyspf.DNSLookup


def _lookup(name: str, qtype: str, *args: Any, **kwargs: Any) -> list[tuple[tuple[str, str], Any]]:
    """pyspf's ``DNSLookup(name, qtype, strict, timeout)``: a list of ((name, type), value)
    with TXT as a tuple of byte strings, MX as (preference, exchange), A/AAAA/PTR as text."""
    resolver = _current.get()
    if resolver is None:
        return cast(list[tuple[tuple[str, str], Any]], _pyspf_lookup(name, qtype, *args, **kwargs))
    if qtype not in RTYPES:
        return []  # type SPF (99) is obsolete (RFC 7208 3.1); CNAMEs are followed by DNS
    try:
        values = resolver.query(name, qtype)
    except DnsTempError as exc:
        raise pyspf.TempError(f"DNS {exc}") from exc
    key = (name, qtype)
    if qtype == "TXT":
        for v in values:
            if _SPF_RECORD.match(v):
                _bounded(name, v)
        return [(key, (v.encode("utf-8", "replace"),)) for v in values]
    if qtype == "MX":
        return [(key, (i, v)) for i, v in enumerate(values)]
    return [(key, v) for v in values]


pyspf.DNSLookup = _lookup


def _bounded(name: str, record: str) -> None:
    """PermError for an SPF record over the bounds (before pyspf parses it)."""
    if len(record) > MAX_RECORD:
        raise pyspf.PermError(f"{name}: an SPF record longer than {MAX_RECORD} characters")
    terms = record.split()
    if len(terms) - 1 > MAX_TERMS:
        raise pyspf.PermError(f"{name}: an SPF record of more than {MAX_TERMS} terms")
    if any(len(t) > MAX_TERM for t in terms):
        raise pyspf.PermError(f"{name}: an SPF term longer than {MAX_TERM} characters")


Memo = dict[tuple[Any, ...], Any]
"""What a check parsed and matched, kept for the next run of the same check (same client,
MAIL FROM and HELO): :class:`Query`'s ``memo``."""


class Query(pyspf.query):  # type: ignore[misc]  # pyspf ships no type hints
    """pyspf's query with two changes that do not change a result.

    - ``exp=``: the explanation is asked (pyspf asks it on every check, and the questions
      stay the same) but not expanded: pochta never uses the text, and a sender's 64 KB of
      macros cost 25 ms each run;
    - ``memo``: one letter's check runs again after each answer (:mod:`~pochta.antispam.
      auth.replay`), every run reading every record gathered so far. Given the same client
      address, ``validate_mechanism`` of a term without macros, in the same domain, and
      ``cidrmatch`` of the same addresses always give the same answer, so runs share them
      through ``memo`` (a chain of 10 records at the bounds: 126 ms a letter without, 42 ms
      with). A term with a macro is validated each time (``%{p}`` asks DNS).
    """

    def __init__(self, *args: Any, memo: Memo | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.memo = memo

    def get_explanation(self, spec: str) -> None:
        if spec:
            with contextlib.suppress(pyspf.PermError):
                self.dns_txt(spec, ignore_void=True)

    def validate_mechanism(self, mech: str) -> Any:
        if self.memo is None or "%" in mech:
            return super().validate_mechanism(mech)
        key = ("term", mech, self.d)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = super().validate_mechanism(mech)
        return found

    def cidrmatch(self, ipaddrs: list[Any], n: int) -> bool:
        if self.memo is None:
            return bool(super().cidrmatch(ipaddrs, n))
        key = ("cidr", tuple(ipaddrs), n)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = bool(super().cidrmatch(ipaddrs, n))
        return bool(found)


# -- the check -------------------------------------------------------------------------------
def check(
    ip: str | None,
    mail_from: str | None,
    helo: str | None,
    resolver: Resolver,
    *,
    memo: Memo | None = None,
) -> SpfResult:
    """The SPF result for a client ``ip`` giving ``MAIL FROM:<mail_from>`` after ``HELO helo``.
    An empty MAIL FROM (a bounce) is checked as ``postmaster@<helo>`` (scope ``helo``).
    ``memo``: shared by the runs of one replayed check (:class:`Query`)."""
    sender, domain, scope = identity(mail_from, helo)
    if ip is None:
        return SpfResult("none", scope, sender, domain, reason="no client IP")
    try:
        addr = ipaddress.ip_address(ip.strip().strip("[]").removeprefix("IPv6:"))
    except ValueError:
        return SpfResult("none", scope, sender, domain, reason=f"not an IP address: {ip}")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if not _valid_domain(domain):
        return SpfResult("none", scope, sender, domain, reason="no valid domain to check")
    token = _current.set(resolver)
    try:
        query = Query(i=str(addr), s=sender, h=(helo or "").strip(), strict=True, memo=memo)
        code, _smtp, text = query.check()
        mechanism = str(query.mechanism or "")
    except NeedAnswer:  # a replayed check: the question is asked and the check run again
        raise
    except Exception as exc:  # a fault in pyspf must not cost the letter its verdict
        log.warning("pyspf failed on %s from %s: %r", sender, addr, exc)
        return SpfResult("temperror", scope, sender, domain, reason=f"SPF check failed: {exc}")
    finally:
        _current.reset(token)
    result = _code(code)
    if result in ("pass", "fail", "softfail", "neutral"):
        if not mechanism or mechanism == "default":  # nothing matched (4.6.2)
            mechanism = "default"
            reason = f"no term of {domain} matched {addr}"
        else:
            reason = f"{addr} matched {mechanism} of {domain}"
    elif result == "none":
        reason = f"{domain} publishes no SPF record"
    else:
        reason = str(text).removeprefix("SPF Permanent Error: ")
        reason = reason.removeprefix("SPF Temporary Error: ")
    return SpfResult(result, scope, sender, domain, mechanism, reason)


async def check_async(
    ip: str | None,
    mail_from: str | None,
    helo: str | None,
    ask: replay.Ask,
    *,
    run: replay.Runner | None = None,
) -> SpfResult:
    """:func:`check` with its questions asked by ``ask`` (awaited, never blocking a thread):
    pyspf runs on the answers gathered so far (:mod:`~pochta.antispam.auth.replay`). After an
    MX or PTR answer, the addresses of its first 10 names (A for an IPv4 client, AAAA for
    IPv6) are asked at once with it: pyspf asks each of them next (RFC 7208 4.6.4)."""
    family: RType = "A"
    with contextlib.suppress(ValueError):
        addr = ipaddress.ip_address((ip or "").strip().strip("[]").removeprefix("IPv6:"))
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is None:
            family = "AAAA"

    def follow(q: Question, answer: list[str]) -> list[Question]:
        if q[1] not in ("MX", "PTR"):
            return []
        return [question(name, family) for name in answer[:MAX_NAMES] if name]

    memo: Memo = {}
    return await replay.replayed(
        lambda resolver: check(ip, mail_from, helo, resolver, memo=memo),
        ask,
        follow=follow,
        run=run,
    )


def unfinished(mail_from: str | None, helo: str | None, why: str) -> SpfResult:
    """``temperror`` for a check that could not finish (``why``), naming its identity."""
    sender, domain, scope = identity(mail_from, helo)
    return SpfResult("temperror", scope, sender, domain, reason=why)


def _code(code: str) -> SpfCode:
    code = {"unknown": "permerror", "error": "temperror", "ambiguous": "permerror"}.get(code, code)
    return code if code in SPF_CODES else "permerror"


def identity(
    mail_from: str | None, helo: str | None
) -> tuple[str, str, Literal["mailfrom", "helo"]]:
    """The identity SPF checks: (address, its domain, scope). MAIL FROM's address; for an
    empty one (a bounce), ``postmaster@<helo>`` (scope ``helo``)."""
    sender = (mail_from or "").strip().strip("<>").strip()
    scope: Literal["mailfrom", "helo"] = "mailfrom"
    if not sender:
        scope = "helo"
        sender = f"postmaster@{(helo or '').strip()}"
    local, at, domain = sender.rpartition("@")
    if not at:
        local, domain = "postmaster", sender
    local = local or "postmaster"
    domain = domain.rstrip(".").lower()
    return f"{local}@{domain}", domain, scope


def _valid_domain(domain: str) -> bool:
    """RFC 7208 4.3: a domain that is not a multi-label FQDN of valid labels is ``none``."""
    labels = domain.split(".")
    return len(domain) <= 253 and len(labels) >= 2 and all(_LABEL.match(x) for x in labels)
