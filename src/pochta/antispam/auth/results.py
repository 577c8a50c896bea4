"""Sender authentication: SPF, DKIM and DMARC, and the ``Authentication-Results`` header.

- SPF: :mod:`pochta.antispam.auth.spf` (RFC 7208) on the client IP, MAIL FROM and HELO.
- DKIM: every ``DKIM-Signature`` (at most :data:`MAX_SIGNATURES`) checked by dkimpy; the key
  comes from our resolver, not dkimpy's own DNS. Results: ``pass``; ``fail`` (the signature or
  the body hash does not verify); ``permerror`` (a malformed signature, no key, a bad or too
  small key); ``temperror`` (DNS failed for now).
- DMARC (RFC 7489): the policy of the From domain (``_dmarc.<domain>``, else of its
  organizational domain, the registrable domain of the Public Suffix List), and whether a
  passing SPF or DKIM identity is aligned with the From domain (relaxed: the same registrable
  domain; strict: the same name). ``pass`` when one is, ``fail`` when none is, ``temperror``
  when one could not be checked for now, ``none`` when the domain publishes no policy,
  ``permerror`` when the letter has no single From domain.

Every DNS question goes through a :class:`~pochta.antispam.auth.resolver.Resolver`; tests use the
offline ``FixtureResolver``. dkimpy reads the clock for ``t=``/``x=`` (10 hours of slack).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from email.utils import getaddresses
from typing import Any, Literal

import dkim  # type: ignore[import-untyped]

from pochta.antispam.auth import spf
from pochta.antispam.auth.resolver import DnsTempError, Resolver
from pochta.antispam.auth.spf import SpfResult
from pochta.errors import ConfigError
from pochta.mime import normalize
from pochta.mime.letter import Letter, parse

log = logging.getLogger("pochta.antispam.auth.results")

MAX_SIGNATURES = 5
MIN_KEY_BITS = 1024

DkimCode = Literal["pass", "fail", "neutral", "none", "temperror", "permerror"]
DmarcCode = Literal["pass", "fail", "none", "temperror", "permerror"]
Policy = Literal["none", "quarantine", "reject", ""]


@dataclass(frozen=True, slots=True)
class DkimResult:
    result: DkimCode
    domain: str  # d=
    selector: str  # s=
    header_b: str = ""  # the first characters of b=, to tell signatures apart
    reason: str = ""


@dataclass(frozen=True, slots=True)
class DmarcResult:
    result: DmarcCode
    domain: str  # the From domain (header.from)
    policy: Policy = ""  # what the domain asks for failing mail (sp= for a subdomain)
    record_domain: str = ""  # where the record was found
    spf_aligned: bool = False
    dkim_aligned: bool = False
    pct: int = 100
    reason: str = ""


@dataclass(frozen=True, slots=True)
class AuthResults:
    spf: SpfResult
    dkim: tuple[DkimResult, ...]
    dmarc: DmarcResult

    @property
    def dkim_result(self) -> DkimCode:
        """One word for all signatures: ``pass`` if any passed, else the first of fail,
        temperror, permerror, neutral found; ``none`` when the letter is not signed."""
        codes = {d.result for d in self.dkim}
        order: tuple[DkimCode, ...] = ("pass", "fail", "temperror", "permerror", "neutral")
        return next((code for code in order if code in codes), "none")

    def values(self) -> dict[str, str]:
        """The words rules compare with: ``spf``, ``dkim``, ``dmarc``, ``dmarc_policy``."""
        return {
            "spf": self.spf.result,
            "dkim": self.dkim_result,
            "dmarc": self.dmarc.result,
            "dmarc_policy": self.dmarc.policy or "none",
        }

    def header(self, authserv_id: str) -> str:
        """The value of an ``Authentication-Results`` field (RFC 8601) for ``authserv_id``
        (this server's name), unfolded (``pochta.mailbox.trace.field`` folds it)."""
        if not authserv_id or not _TOKEN.fullmatch(authserv_id):
            raise ConfigError(f"authserv-id must be a host name or a token: {authserv_id!r}")
        parts = [authserv_id]
        s = self.spf
        prop = "smtp.mailfrom" if s.scope == "mailfrom" else "smtp.helo"
        ident = s.identity if s.scope == "mailfrom" else s.domain
        parts.append(f"spf={s.result}{_comment(s.reason)} {prop}={_pvalue(ident)}")
        if not self.dkim:
            parts.append("dkim=none (no signatures)")
        for d in self.dkim:
            props = f" header.d={_pvalue(d.domain)} header.s={_pvalue(d.selector)}"
            if d.header_b:
                props += f" header.b={_pvalue(d.header_b)}"
            parts.append(f"dkim={d.result}{_comment(d.reason)}{props}")
        m = self.dmarc
        note = f"p={m.policy}" if m.policy else m.reason
        parts.append(f"dmarc={m.result}{_comment(note)} header.from={_pvalue(m.domain)}")
        return "; ".join(parts)


_TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`{|}~]+")
_PVALUE = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`{|}~]*(?:@[A-Za-z0-9.\-]+)?")


def _pvalue(value: str) -> str:
    if value and _PVALUE.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _comment(text: str) -> str:
    if not text:
        return ""
    clean = re.sub(r"[\r\n\t]+", " ", text)[:200]
    clean = clean.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return f" ({clean})"


# -- DKIM -----------------------------------------------------------------------------------
def _tags(value: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in value.decode("utf-8", "replace").split(";"):
        k, eq, v = part.partition("=")
        if eq:
            out.setdefault(k.strip().lower(), re.sub(r"\s+", "", v))
    return out


def verify_dkim(raw: bytes, resolver: Resolver) -> tuple[DkimResult, ...]:
    """One result per DKIM-Signature field (the first MAX_SIGNATURES), in order."""
    try:
        verifier = dkim.DKIM(raw, logger=log, minkey=MIN_KEY_BITS)
    except Exception as exc:  # dkimpy raises a few kinds on a letter it cannot split
        return (DkimResult("permerror", "", "", reason=f"unreadable letter: {exc}"),)
    fields = [v for k, v in verifier.headers if k.lower() == b"dkim-signature"]
    return tuple(
        _verify_one(verifier, i, fields[i], resolver)
        for i in range(min(len(fields), MAX_SIGNATURES))
    )


def _verify_one(verifier: Any, idx: int, field: bytes, resolver: Resolver) -> DkimResult:
    tags = _tags(field)
    domain, selector = tags.get("d", "").lower(), tags.get("s", "")
    header_b = tags.get("b", "")[:12]

    def result(code: DkimCode, reason: str) -> DkimResult:
        return DkimResult(code, domain, selector, header_b, reason)

    v = verifier  # a dkim.DKIM (dkimpy ships no type hints)
    try:
        prep = v.verify_headerprep(idx)
    except dkim.DKIMException as exc:
        return result("permerror", f"bad signature: {_short(exc)}")
    if not prep:
        return result("permerror", "bad signature")
    sig, include_headers, fields = prep
    name = f"{selector}._domainkey.{domain}"
    try:
        records = resolver.query(name, "TXT")
    except DnsTempError as exc:
        return result("temperror", f"key lookup failed: {exc}")
    if not records:
        return result("permerror", f"no key at {name}")
    key = records[0].encode("utf-8", "replace")
    try:
        dkim.evaluate_pk(name.encode(), key)
    except (dkim.DKIMException, NameError, ValueError) as exc:
        return result("permerror", f"bad key: {_short(exc)}")
    try:
        ok = v.verify_sig(sig, include_headers, fields[idx], lambda *_a, **_k: key)
    except dkim.ValidationError as exc:
        reason = "body hash mismatch" if "body hash" in str(exc) else _short(exc)
        return result("fail", reason)
    except dkim.KeyFormatError as exc:
        return result("permerror", f"bad key: {_short(exc)}")
    except dkim.DKIMException as exc:
        return result("permerror", _short(exc))
    return result("pass", "") if ok else result("fail", "signature did not verify")


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 120 else text[:117] + "..."


# -- DMARC ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Record:
    p: Policy
    sp: Policy
    adkim: str
    aspf: str
    pct: int


def _parse_dmarc(text: str) -> _Record | None:
    tags: dict[str, str] = {}
    parts = [p.strip() for p in text.split(";")]
    if not parts or re.sub(r"\s+", "", parts[0]).lower() != "v=dmarc1":
        return None
    for part in parts[1:]:
        k, eq, v = part.partition("=")
        if eq:
            tags.setdefault(k.strip().lower(), v.strip().lower())
    policies: tuple[Policy, ...] = ("none", "quarantine", "reject")
    p = tags.get("p", "")
    if p not in policies:
        if "rua" not in tags:
            return None  # no usable policy (RFC 7489 6.6.3)
        p = "none"
    sp = tags.get("sp", p)
    if sp not in policies:
        sp = p
    try:
        pct = min(100, max(0, int(tags.get("pct", "100"))))
    except ValueError:
        pct = 100
    return _Record(
        p,  # type: ignore[arg-type]
        sp,  # type: ignore[arg-type]
        "s" if tags.get("adkim") == "s" else "r",
        "s" if tags.get("aspf") == "s" else "r",
        pct,
    )


def _lookup_dmarc(name: str, resolver: Resolver) -> _Record | None:
    records = [r for r in resolver.query(f"_dmarc.{name}", "TXT") if _parse_dmarc(r) is not None]
    return _parse_dmarc(records[0]) if len(records) == 1 else None


def _aligned(a: str, b: str, mode: str) -> bool:
    a, b = a.lower().rstrip("."), b.lower().rstrip(".")
    if mode == "s":
        return a == b
    return bool(a) and normalize.registrable(a) == normalize.registrable(b)


def check_dmarc(
    from_domain: str | None,
    spf_result: SpfResult,
    dkim_results: Sequence[DkimResult],
    resolver: Resolver,
) -> DmarcResult:
    """DMARC for the From domain, given the SPF and DKIM results of the same letter."""
    if not from_domain:
        return DmarcResult("permerror", "", reason="no single From domain")
    domain = normalize.domain(from_domain) or from_domain.lower()
    org = normalize.registrable(domain) or domain
    try:
        record = _lookup_dmarc(domain, resolver)
        found_at = domain
        if record is None and org != domain:
            record = _lookup_dmarc(org, resolver)
            found_at = org
    except DnsTempError as exc:
        return DmarcResult("temperror", domain, reason=f"policy lookup failed: {exc}")
    if record is None:
        return DmarcResult("none", domain, reason="no DMARC policy")
    policy = record.sp if found_at != domain else record.p
    spf_ok = spf_result.result == "pass" and _aligned(spf_result.domain, domain, record.aspf)
    dkim_ok = any(
        d.result == "pass" and _aligned(d.domain, domain, record.adkim) for d in dkim_results
    )
    code: DmarcCode = "pass" if spf_ok or dkim_ok else "fail"
    reason = ""
    if code == "fail":
        temp = spf_result.result == "temperror" or any(
            d.result == "temperror" for d in dkim_results
        )
        code = "temperror" if temp else "fail"
        reason = "no aligned SPF or DKIM pass"
    return DmarcResult(code, domain, policy, found_at, spf_ok, dkim_ok, record.pct, reason)


def from_domain(letter: Letter) -> str | None:
    """The domain of the letter's one From address; None for no From, several From fields
    or several addresses in it."""
    values = [v[:4096] for v in letter.headers("from")]
    if len(values) != 1:
        return None
    try:
        addresses = [a for _, a in getaddresses(values) if a]
    except Exception:
        return None
    if len(addresses) != 1:
        return None
    return normalize.address_domain(addresses[0])


def authenticate(
    raw: bytes,
    *,
    ip: str | None,
    mail_from: str | None,
    helo: str | None,
    resolver: Resolver,
    letter: Letter | None = None,
) -> AuthResults:
    """SPF, DKIM and DMARC of one letter as received from ``ip`` (None: not known, SPF
    ``none``) with ``MAIL FROM:<mail_from>`` after ``HELO helo``."""
    spf_result = spf.check(ip, mail_from, helo, resolver)
    dkim_results = verify_dkim(raw, resolver)
    parsed = letter if letter is not None else parse(raw)
    dmarc = check_dmarc(from_domain(parsed), spf_result, dkim_results, resolver)
    return AuthResults(spf_result, dkim_results, dmarc)


NO_AUTH = AuthResults(
    SpfResult("none", "mailfrom", "", "", reason="not checked"),
    (),
    DmarcResult("none", "", reason="not checked"),
)
"""What rules see when authentication was not run and nothing is known of the letter."""


def unchecked(mail_from: str | None, helo: str | None, letter: Letter | None) -> AuthResults:
    """The results when SPF/DKIM/DMARC were not run (DNS checks off, no client IP, no time
    left): every result ``none (not checked)``, but the identities the header names are the
    letter's own (MAIL FROM, or postmaster@HELO for a bounce; the From domain), as
    :func:`authenticate` would name them."""
    if mail_from or helo:
        sender, domain, scope = spf.identity(mail_from, helo)
    else:
        sender, domain, scope = "", "", "mailfrom"
    return AuthResults(
        SpfResult("none", scope, sender, domain, reason="not checked"),
        (),
        DmarcResult(
            "none",
            (from_domain(letter) or "") if letter is not None else "",
            reason="not checked",
        ),
    )
