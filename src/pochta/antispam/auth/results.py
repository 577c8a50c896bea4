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
  when one could not be checked for now, ``none`` when the domain publishes no usable
  policy, ``permerror`` when the letter has no single From domain. ``pct`` below 100: a
  failing letter outside the sample gets the next lower policy (``DmarcResult.applied``).
  pochta's own code (no library fitted; see the DMARC section below for why).

Every DNS question goes through a :class:`~pochta.antispam.auth.resolver.Resolver`; tests use the
offline ``FixtureResolver``. :func:`authenticate` bounds one letter's questions: at most
:data:`MAX_QUERIES`, and ``lifetime`` seconds in all (:class:`LimitedResolver`). dkimpy reads
the clock for ``t=``/``x=`` (10 hours of slack).

:func:`authenticate` asks as it goes (``pochta scan``, tests). The server splits the same
checks where the letter's bytes and the DNS are (:mod:`pochta.antispam.auth.authenticator`):
a worker makes the :class:`AuthPlan` (:func:`plan`: :func:`plan_dkim`'s steps, the From
domain, the DMARC names; no DNS), the server asks, :func:`finish_dkim` verifies with the keys
where the bytes are, and :func:`check_dmarc` runs on the answers.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import dkim  # type: ignore[import-untyped]

from pochta.antispam.auth import spf
from pochta.antispam.auth.resolver import DnsTempError, LimitedResolver, Resolver
from pochta.antispam.auth.spf import SpfResult
from pochta.errors import ConfigError
from pochta.mime import normalize
from pochta.mime.letter import Letter, parse
from pochta.pickling import by_fields

log = logging.getLogger("pochta.antispam.auth.results")

MAX_SIGNATURES = 5
MIN_KEY_BITS = 1024
# The most questions RFC 7208's limits let one SPF check ask: the record, 10 terms each with
# up to 10 MX/PTR names to resolve, and an exp= per record; then one key per DKIM signature
# and two DMARC policy lookups.
MAX_QUERIES = 1 + spf.MAX_LOOKUPS * (1 + 10) + (1 + spf.MAX_LOOKUPS) + MAX_SIGNATURES + 2
DNS_LIFETIME = 7.0  # seconds all of one letter's questions may take (antispam.dns_lifetime)

DkimCode = Literal["pass", "fail", "neutral", "none", "temperror", "permerror"]
DmarcCode = Literal["pass", "fail", "none", "temperror", "permerror"]
Policy = Literal["none", "quarantine", "reject", ""]


@by_fields  # read back by the server: pochta.pickling
@dataclass(frozen=True, slots=True)
class DkimResult:
    result: DkimCode
    domain: str  # d=
    selector: str  # s=
    header_b: str = ""  # the first characters of b=, to tell signatures apart
    reason: str = ""


@by_fields  # read back by the server: pochta.pickling
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
    applied: Policy = ""  # the policy to enact: ``policy``, one lower outside pct (6.6.4)


@by_fields  # read back by the server: pochta.pickling
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
            "dmarc_policy": self.dmarc.applied or self.dmarc.policy or "none",
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
        if m.policy and m.pct < 100:
            note += f" pct={m.pct} applied={m.applied or m.policy}"
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


@dataclass(frozen=True, slots=True)
class DkimKey:
    """A signature whose result waits for its key (``name``, TXT): the part of its check that
    needs no DNS passed."""

    index: int  # which DKIM-Signature field, from the top
    name: str  # "<s>._domainkey.<d>"
    domain: str
    selector: str
    header_b: str = ""

    def result(self, code: DkimCode, reason: str) -> DkimResult:
        return DkimResult(code, self.domain, self.selector, self.header_b, reason)


DkimStep = DkimResult | DkimKey
"""One signature before its key is known: its result already (a malformed signature), or the
key it waits for."""
Keys = Mapping[str, "list[str] | DnsTempError"]
"""The TXT records found at each key name, or why none could be asked for now."""


def plan_dkim(raw: bytes) -> tuple[DkimStep, ...]:
    """One step per DKIM-Signature field (the first MAX_SIGNATURES), in order: the checks that
    need no key, and the key each remaining signature needs. No DNS, little CPU (the header
    section is split; the body is not read)."""
    try:
        verifier = dkim.DKIM(raw, logger=log, minkey=MIN_KEY_BITS)
    except Exception as exc:  # dkimpy raises a few kinds on a letter it cannot split
        return (DkimResult("permerror", "", "", reason=f"unreadable letter: {exc}"),)
    fields = [v for k, v in verifier.headers if k.lower() == b"dkim-signature"]
    return tuple(_plan_one(verifier, i, fields[i]) for i in range(min(len(fields), MAX_SIGNATURES)))


def _plan_one(verifier: Any, idx: int, header: bytes) -> DkimStep:
    tags = _tags(header)
    domain, selector = tags.get("d", "").lower(), tags.get("s", "")
    step = DkimKey(idx, f"{selector}._domainkey.{domain}", domain, selector, tags.get("b", "")[:12])
    try:
        prep = verifier.verify_headerprep(idx)  # a dkim.DKIM (dkimpy ships no type hints)
    except dkim.DKIMException as exc:
        return step.result("permerror", f"bad signature: {_short(exc)}")
    if not prep:
        return step.result("permerror", "bad signature")
    return step


def key_outcome(step: DkimKey, found: list[str] | DnsTempError | None) -> DkimResult | None:
    """The result a key lookup decides by itself (temperror, no key); None when the signature
    has to be verified with the key found."""
    if found is None:
        return step.result("temperror", "key lookup failed: not asked")
    if isinstance(found, DnsTempError):
        return step.result("temperror", f"key lookup failed: {found}")
    if not found:
        return step.result("permerror", f"no key at {step.name}")
    return None


def to_verify(steps: Sequence[DkimStep], keys: Keys) -> bool:
    """Whether any signature has a key to be verified with (CPU: the body hash, RSA)."""
    return any(isinstance(s, DkimKey) and key_outcome(s, keys.get(s.name)) is None for s in steps)


def finish_dkim(raw: bytes, steps: Sequence[DkimStep], keys: Keys) -> tuple[DkimResult, ...]:
    """The results of :func:`plan_dkim`'s steps given their keys: each signature with a key is
    verified against ``raw`` (the same bytes the plan read)."""
    verifier: Any = None
    out: list[DkimResult] = []
    for step in steps:
        if isinstance(step, DkimResult):
            out.append(step)
            continue
        found = keys.get(step.name)
        decided = key_outcome(step, found)
        if decided is not None:
            out.append(decided)
            continue
        assert isinstance(found, list)
        if verifier is None:
            verifier = dkim.DKIM(raw, logger=log, minkey=MIN_KEY_BITS)
        out.append(_verify_one(verifier, step, found[0].encode("utf-8", "replace")))
    return tuple(out)


def unverified(steps: Sequence[DkimStep], keys: Keys, why: str) -> tuple[DkimResult, ...]:
    """The results when the signatures that have a key could not be verified: ``temperror``
    (the others are what their key lookup decided)."""
    out: list[DkimResult] = []
    for step in steps:
        if isinstance(step, DkimResult):
            out.append(step)
            continue
        decided = key_outcome(step, keys.get(step.name))
        out.append(decided or step.result("temperror", f"not verified: {_short(Exception(why))}"))
    return tuple(out)


def verify_dkim(raw: bytes, resolver: Resolver) -> tuple[DkimResult, ...]:
    """One result per DKIM-Signature field (the first MAX_SIGNATURES), in order."""
    steps = plan_dkim(raw)
    keys: dict[str, list[str] | DnsTempError] = {}
    for step in steps:
        if isinstance(step, DkimKey) and step.name not in keys:
            try:
                keys[step.name] = resolver.query(step.name, "TXT")
            except DnsTempError as exc:
                keys[step.name] = exc
    return finish_dkim(raw, steps, keys)


def _verify_one(verifier: Any, step: DkimKey, key: bytes) -> DkimResult:
    v = verifier  # a dkim.DKIM (dkimpy ships no type hints)
    try:
        prep = v.verify_headerprep(step.index)
    except dkim.DKIMException as exc:  # the plan passed it: the same bytes pass again
        return step.result("permerror", f"bad signature: {_short(exc)}")
    if not prep:
        return step.result("permerror", "bad signature")
    sig, include_headers, fields = prep
    try:
        dkim.evaluate_pk(step.name.encode(), key)
    except (dkim.DKIMException, NameError, ValueError) as exc:
        return step.result("permerror", f"bad key: {_short(exc)}")
    try:
        ok = v.verify_sig(sig, include_headers, fields[step.index], lambda *_a, **_k: key)
    except dkim.ValidationError as exc:
        reason = "body hash mismatch" if "body hash" in str(exc) else _short(exc)
        return step.result("fail", reason)
    except dkim.KeyFormatError as exc:
        return step.result("permerror", f"bad key: {_short(exc)}")
    except dkim.DKIMException as exc:
        return step.result("permerror", _short(exc))
    return step.result("pass", "") if ok else step.result("fail", "signature did not verify")


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 120 else text[:117] + "..."


# -- DMARC ----------------------------------------------------------------------------------
# pochta's own, with RFC 7489 cases (tests/unit/antispam_phishing/test_dmarc_rfc.py): of the
# libraries looked at, checkdmarc audits a domain's records (DMARCbis, where pct is gone; DNS
# only through its own dnspython resolver; no alignment of a letter's results), and
# authheaders' dmarc_per_from reads one TXT string per name (so two records cannot be told
# from one), applies sp= to the organizational domain's own mail, ignores pct and parses
# its bundled public suffix list file on every call (30-95 ms of CPU a letter).
_POLICIES: tuple[Policy, ...] = ("none", "quarantine", "reject")
_LOWER: dict[Policy, Policy] = {"reject": "quarantine", "quarantine": "none", "none": "none"}
_VERSION = re.compile(r"[vV][ \t]*=[ \t]*DMARC1[ \t]*(?:;|$)")  # RFC 7489 6.4: first, exact
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\s,!]+(?:![0-9]+[kmgtKMGT]?)?")


@dataclass(frozen=True, slots=True)
class _Record:
    p: Policy
    sp: Policy
    adkim: str
    aspf: str
    pct: int


def is_dmarc_record(text: str) -> bool:
    """A record that starts with ``v=DMARC1`` (RFC 7489 6.6.3 step 2: others are discarded)."""
    return _VERSION.match(text.lstrip(" \t")) is not None


def parse_dmarc(text: str) -> _Record | None:
    """The policy of one ``v=DMARC1`` record; None when no DMARC processing applies: ``p=``
    missing or invalid, or ``sp=`` invalid, and no valid ``rua=`` URI (RFC 7489 6.6.3 step
    6; with one, the record counts as ``p=none``). Other bad values take their defaults
    (6.3: ``pct`` 100, ``adkim``/``aspf`` relaxed); unknown tags are ignored."""
    if not is_dmarc_record(text):
        return None
    tags: dict[str, str] = {}
    for part in text.split(";")[1:]:
        k, eq, v = part.partition("=")
        if eq:
            tags.setdefault(k.strip().lower(), v.strip())
    p, sp = tags.get("p", "").lower(), tags.get("sp", "").lower()
    if p not in _POLICIES or (sp and sp not in _POLICIES):
        rua = [u.strip() for u in tags.get("rua", "").split(",")]
        if not any(_URI.fullmatch(u) for u in rua):
            return None
        p = sp = "none"
    pct_text = tags.get("pct", "100")
    pct = int(pct_text) if pct_text.isdigit() and int(pct_text) <= 100 else 100
    return _Record(
        p,  # type: ignore[arg-type]
        (sp or p),  # type: ignore[arg-type]
        "s" if tags.get("adkim", "").lower() == "s" else "r",
        "s" if tags.get("aspf", "").lower() == "s" else "r",
        pct,
    )


def _aligned(a: str, b: str, mode: str) -> bool:
    """RFC 7489 3.1: strict, the same name; relaxed, the same organizational domain."""
    a, b = a.lower().rstrip("."), b.lower().rstrip(".")
    if mode == "s":
        return a == b
    return bool(a) and normalize.registrable(a) == normalize.registrable(b)


_SAMPLE_SECRET = secrets.token_bytes(32)
"""Keys the DMARC sample (one per process): a sender who could compute which letters fall
outside it would tweak a header until its forgery is quarantined instead of rejected."""


def sampled(pct: int, key: bytes) -> bool:
    """Whether a letter is in the ``pct`` percent a policy is applied to (RFC 7489 6.6.4):
    decided by an HMAC of ``key`` (the letter) under a secret of this process, so the same
    letter gets the same answer here, nobody outside can tell which letters are sampled, and
    the letters sampled are ``pct`` percent of all."""
    if pct >= 100:
        return True
    if pct <= 0:
        return False
    digest = hmac.new(_SAMPLE_SECRET, key, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") % 100 < pct


def check_dmarc(
    from_domain: str | None,
    spf_result: SpfResult,
    dkim_results: Sequence[DkimResult],
    resolver: Resolver,
    sample_key: bytes = b"",
) -> DmarcResult:
    """DMARC for the From domain, given the SPF and DKIM results of the same letter.
    ``sample_key`` (the letter's bytes) decides whether a failing letter is in a ``pct`` below
    100: if not, the policy applied (``applied``) is the next lower one (reject: quarantine;
    quarantine: none), as RFC 7489 6.6.4 asks."""
    if not from_domain:
        return DmarcResult("permerror", "", reason="no single From domain")
    domain, org = policy_domains(from_domain)
    try:
        found_at = domain
        records = [r for r in resolver.query(f"_dmarc.{domain}", "TXT") if is_dmarc_record(r)]
        if not records and org != domain:
            found_at = org
            records = [r for r in resolver.query(f"_dmarc.{org}", "TXT") if is_dmarc_record(r)]
    except DnsTempError as exc:
        return DmarcResult("temperror", domain, reason=f"policy lookup failed: {exc}")
    if len(records) != 1:
        why = "no DMARC policy" if not records else f"{len(records)} DMARC records at {found_at}"
        return DmarcResult("none", domain, reason=why)
    record = parse_dmarc(records[0])
    if record is None:
        return DmarcResult("none", domain, reason=f"no valid p= at _dmarc.{found_at}")
    policy = record.sp if found_at != domain else record.p
    spf_ok = spf_result.result == "pass" and _aligned(spf_result.domain, domain, record.aspf)
    dkim_ok = any(
        d.result == "pass" and _aligned(d.domain, domain, record.adkim) for d in dkim_results
    )
    code: DmarcCode = "pass" if spf_ok or dkim_ok else "fail"
    reason = ""
    applied = policy
    if code == "fail":
        temp = spf_result.result == "temperror" or any(
            d.result == "temperror" for d in dkim_results
        )
        code = "temperror" if temp else "fail"
        reason = "no aligned SPF or DKIM pass"
        if not sampled(record.pct, sample_key):
            applied = _LOWER[policy]
    return DmarcResult(code, domain, policy, found_at, spf_ok, dkim_ok, record.pct, reason, applied)


def policy_domains(from_domain: str) -> tuple[str, str]:
    """Where DMARC looks for a From domain's policy: the domain, then its organizational
    domain (the same name when it is one)."""
    domain = normalize.domain(from_domain) or from_domain.lower()
    return domain, normalize.registrable(domain) or domain


def from_domain(letter: Letter) -> str | None:
    """The domain of the letter's one From address; None for no From, several From fields
    or several addresses in it. The field as the letter's parse read it (``from_pairs``:
    its first 4 KiB, read once for every reader)."""
    if len(letter.headers("from")) != 1:
        return None
    addresses = [a for _, a in letter.from_pairs if a]
    return normalize.address_domain(addresses[0]) if len(addresses) == 1 else None


def letter_key(raw: bytes) -> bytes:
    """What decides whether a letter is in a DMARC ``pct`` sample (:func:`sampled`): a digest
    of its bytes, taken where the bytes are (a worker), so the server decides without them."""
    return hashlib.blake2b(raw, digest_size=32).digest()


@dataclass(frozen=True, slots=True)
class AuthPlan:
    """What authenticating a letter needs beside the envelope, as a worker that read the
    letter finds it (picklable; no DNS asked): each DKIM signature's step (:func:`plan_dkim`),
    the From domain, the DMARC policy names, and the letter's sample key. The server asks the
    questions (:mod:`pochta.antispam.auth.authenticator`); SPF needs only the envelope."""

    dkim: tuple[DkimStep, ...]
    from_domain: str | None
    dmarc: tuple[str, ...]  # _dmarc.<domain>, and _dmarc.<organizational domain> if another
    sample_key: bytes = field(repr=False, default=b"")

    @property
    def keys(self) -> tuple[str, ...]:
        """The DKIM key names to ask (TXT), each once."""
        return tuple(dict.fromkeys(s.name for s in self.dkim if isinstance(s, DkimKey)))


def plan(raw: bytes, letter: Letter | None = None) -> AuthPlan:
    """The plan of :func:`authenticate` for ``raw`` (``letter``: it parsed, if at hand)."""
    domain = from_domain(letter if letter is not None else parse(raw))
    names: tuple[str, ...] = ()
    if domain:
        at, org = policy_domains(domain)
        names = tuple(dict.fromkeys((f"_dmarc.{at}", f"_dmarc.{org}")))
    return AuthPlan(plan_dkim(raw), domain, names, letter_key(raw))


def authenticate(
    raw: bytes,
    *,
    ip: str | None,
    mail_from: str | None,
    helo: str | None,
    resolver: Resolver,
    letter: Letter | None = None,
    lifetime: float = DNS_LIFETIME,
) -> AuthResults:
    """SPF, DKIM and DMARC of one letter as received from ``ip`` (None: not known, SPF
    ``none``) with ``MAIL FROM:<mail_from>`` after ``HELO helo``. At most MAX_QUERIES DNS
    questions and ``lifetime`` seconds; a check that needed more is ``temperror``."""
    limited = LimitedResolver(resolver, max_queries=MAX_QUERIES, lifetime=lifetime)
    spf_result = spf.check(ip, mail_from, helo, limited)
    dkim_results = verify_dkim(raw, limited)
    parsed = letter if letter is not None else parse(raw)
    dmarc = check_dmarc(from_domain(parsed), spf_result, dkim_results, limited, letter_key(raw))
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
