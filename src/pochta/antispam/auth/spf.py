"""SPF (RFC 7208): may this IP send mail for this domain?

A small evaluator of ``check_host()`` over a :class:`~pochta.antispam.auth.resolver.Resolver`:
mechanisms ``all include a mx ptr ip4 ip6 exists``, modifiers ``redirect`` (``exp`` is read and
ignored: the explanation is for the sender's bounce, not for us), macros (``%{s l o d i p v h}``
with digits, ``r`` and delimiters), the limits of section 4.6.4 (10 DNS-querying terms, 10 MX
or PTR names each, 2 void lookups). A syntax error anywhere in a record is ``permerror`` before
anything is matched, as the RFC asks. ``%{p}`` expands to ``unknown`` (no extra lookups).

Pure apart from the resolver's answers: the same zone always gives the same result.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from pochta.antispam.auth.resolver import DnsTempError, Resolver

SpfCode = Literal["pass", "fail", "softfail", "neutral", "none", "temperror", "permerror"]

MAX_LOOKUPS = 10
MAX_VOID = 2
MAX_NAMES = 10  # MX exchanges or PTR names looked at per mechanism

_QUALIFIERS: dict[str, SpfCode] = {"+": "pass", "-": "fail", "~": "softfail", "?": "neutral"}
_MECHANISM = re.compile(r"^([+\-~?]?)(all|include|a|mx|ptr|ip4|ip6|exists)(?=$|[:/])(.*)$", re.I)
_MODIFIER = re.compile(r"^([a-z][a-z0-9_.\-]*)=(.*)$", re.I)
_MACRO = re.compile(r"%(?:\{([slodipvhcrt])(\d*)(r?)([.\-+,/_=]*)\}|(.))", re.I)
_CIDRS = re.compile(r"^(.*?)(?:/(\d+))?(?://(\d+))?$")
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$", re.I)


@dataclass(frozen=True, slots=True)
class SpfResult:
    result: SpfCode
    scope: Literal["mailfrom", "helo"]  # which identity was checked
    identity: str  # the address checked: MAIL FROM, or postmaster@HELO
    domain: str  # its domain
    mechanism: str = ""  # the term that decided: "-all", "ip4:192.0.2.0/24", "default"...
    reason: str = ""


class _PermError(Exception):
    pass


class _TempError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class _Term:
    qualifier: SpfCode
    name: str  # the mechanism, lowercase
    arg: str | None  # domain-spec or network, None when absent
    cidr4: int
    cidr6: int
    text: str


@dataclass(frozen=True, slots=True)
class _Record:
    terms: tuple[_Term, ...]
    redirect: str | None


def check(ip: str | None, mail_from: str | None, helo: str | None, resolver: Resolver) -> SpfResult:
    """The SPF result for a client ``ip`` giving ``MAIL FROM:<mail_from>`` after ``HELO helo``.
    An empty MAIL FROM (a bounce) is checked as ``postmaster@<helo>`` (scope ``helo``)."""
    sender, domain, scope = identity(mail_from, helo)
    local = sender.rpartition("@")[0]
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
    ev = _Evaluator(resolver, addr, local, domain, (helo or "").strip().lower())
    try:
        code, term, reason = ev.check_host(domain)
    except _PermError as exc:
        return SpfResult("permerror", scope, sender, domain, reason=str(exc))
    except _TempError as exc:
        return SpfResult("temperror", scope, sender, domain, reason=str(exc))
    return SpfResult(code, scope, sender, domain, term, reason)


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
    labels = domain.split(".")
    return len(domain) <= 253 and len(labels) >= 2 and all(_LABEL.match(x) for x in labels)


def parse(text: str) -> _Record:
    """Parse one ``v=spf1`` record; _PermError on any syntax error."""
    parts = text.split()
    if not parts or parts[0].lower() != "v=spf1":
        raise _PermError("not an SPF record")
    terms: list[_Term] = []
    redirect: str | None = None
    seen_modifiers: set[str] = set()
    for part in parts[1:]:
        m = _MECHANISM.match(part)
        if m is None:
            mod = _MODIFIER.match(part)
            if mod is None:
                raise _PermError(f"unknown term {part!r}")
            name = mod.group(1).lower()
            if name in ("redirect", "exp"):
                if name in seen_modifiers:
                    raise _PermError(f"{name}= given twice")
                seen_modifiers.add(name)
                _check_macros(mod.group(2))
                if name == "redirect":
                    redirect = mod.group(2)
            continue  # unknown modifiers are ignored (RFC 7208 6)
        terms.append(_term(m.group(1) or "+", m.group(2).lower(), m.group(3), part))
    return _Record(tuple(terms), redirect)


def _term(q: str, name: str, rest: str, text: str) -> _Term:
    qualifier = _QUALIFIERS[q]
    if name == "all":
        if rest:
            raise _PermError(f"bad term {text!r}")
        return _Term(qualifier, name, None, 32, 128, text)
    if name in ("ip4", "ip6"):
        if not rest.startswith(":"):
            raise _PermError(f"{name} needs a network: {text!r}")
        net = rest[1:]
        try:
            network = ipaddress.ip_network(net, strict=False)
        except ValueError as exc:
            raise _PermError(f"bad network {text!r}") from exc
        if (name == "ip4") != (network.version == 4):
            raise _PermError(f"bad network {text!r}")
        return _Term(qualifier, name, net, 32, 128, text)
    arg: str | None = None
    cidr4, cidr6 = 32, 128
    if name in ("a", "mx"):
        m = _CIDRS.match(rest)
        assert m is not None  # the pattern matches any string
        spec, c4, c6 = m.group(1), m.group(2), m.group(3)
        if c4 is not None:
            cidr4 = int(c4)
        if c6 is not None:
            cidr6 = int(c6)
        if cidr4 > 32 or cidr6 > 128:
            raise _PermError(f"bad prefix length {text!r}")
        rest = spec
    if rest:
        if not rest.startswith(":") or len(rest) == 1:
            raise _PermError(f"bad term {text!r}")
        arg = rest[1:]
        _check_macros(arg)
    elif name in ("include", "exists"):
        raise _PermError(f"{name} needs a domain: {text!r}")
    return _Term(qualifier, name, arg, cidr4, cidr6, text)


def _check_macros(spec: str) -> None:
    pos = 0
    for m in _MACRO.finditer(spec):
        if "%" in spec[pos : m.start()]:
            raise _PermError(f"bad macro in {spec!r}")
        if m.group(5) is not None and m.group(5) not in "%_-":
            raise _PermError(f"bad macro in {spec!r}")
        pos = m.end()
    if "%" in spec[pos:]:
        raise _PermError(f"bad macro in {spec!r}")


def _reverse_name(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    return addr.reverse_pointer


class _Evaluator:
    def __init__(
        self,
        resolver: Resolver,
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
        local: str,
        sender_domain: str,
        helo: str,
    ) -> None:
        self.resolver = resolver
        self.ip = ip
        self.local = local
        self.sender_domain = sender_domain
        self.helo = helo
        self.lookups = 0
        self.void = 0

    # -- DNS with the limits ---------------------------------------------------------------
    def _count(self) -> None:
        self.lookups += 1
        if self.lookups > MAX_LOOKUPS:
            raise _PermError(f"more than {MAX_LOOKUPS} DNS lookups")

    def _query(self, name: str, rtype: Literal["TXT", "A", "AAAA", "MX", "PTR"]) -> list[str]:
        try:
            answer = self.resolver.query(name, rtype)
        except DnsTempError as exc:
            raise _TempError(str(exc)) from exc
        if not answer:
            self.void += 1
            if self.void > MAX_VOID:
                raise _PermError(f"more than {MAX_VOID} void lookups")
        return answer

    def _addresses(self, name: str) -> list[str]:
        return self._query(name, "A" if self.ip.version == 4 else "AAAA")

    # -- check_host -------------------------------------------------------------------------
    def check_host(self, domain: str) -> tuple[SpfCode, str, str]:
        try:
            txts = self.resolver.query(domain, "TXT")
        except DnsTempError as exc:
            raise _TempError(str(exc)) from exc
        records = [t for t in txts if t.lower() == "v=spf1" or t.lower().startswith("v=spf1 ")]
        if not records:
            return "none", "", f"{domain} publishes no SPF record"
        if len(records) > 1:
            raise _PermError(f"{domain} publishes {len(records)} SPF records")
        record = parse(records[0])
        for term in record.terms:
            if self._matches(term, domain):
                return term.qualifier, term.text, f"{self.ip} matched {term.text} of {domain}"
        if record.redirect is not None:
            self._count()
            target = self._expand(record.redirect, domain)
            if not _valid_domain(target):
                raise _PermError(f"redirect to an invalid domain {target!r}")
            code, term_text, reason = self.check_host(target)
            if code == "none":
                raise _PermError(f"redirect to {target}, which publishes no SPF record")
            return code, term_text or f"redirect={target}", reason
        return "neutral", "default", f"no term of {domain} matched {self.ip}"

    def _target(self, term: _Term, domain: str) -> str:
        return self._expand(term.arg, domain) if term.arg is not None else domain

    def _matches(self, term: _Term, domain: str) -> bool:
        name = term.name
        if name == "all":
            return True
        if name in ("ip4", "ip6"):
            assert term.arg is not None
            network = ipaddress.ip_network(term.arg, strict=False)
            return network.version == self.ip.version and self.ip in network
        self._count()
        target = self._target(term, domain)
        if name == "include":
            code, _, _ = self.check_host(target)
            if code == "pass":
                return True
            if code in ("fail", "softfail", "neutral"):
                return False
            if code == "temperror":
                raise _TempError(f"include:{target} had a temporary error")
            raise _PermError(f"include:{target} gave {code}")
        if name == "exists":
            return bool(self._query(target, "A"))
        if name == "a":
            return self._in_any(self._addresses(target), term)
        if name == "mx":
            exchanges = self._query(target, "MX")
            if len(exchanges) > MAX_NAMES:
                raise _PermError(f"{target} has more than {MAX_NAMES} MX records")
            return any(self._in_any(self._addresses(mx), term) for mx in exchanges)
        if name == "ptr":
            return any(n == target or n.endswith("." + target) for n in self._validated_names())
        raise _PermError(f"unknown mechanism {name}")  # unreachable: parse() refuses it

    def _in_any(self, addresses: list[str], term: _Term) -> bool:
        prefix = term.cidr4 if self.ip.version == 4 else term.cidr6
        for a in addresses:
            try:
                net = ipaddress.ip_network(f"{a}/{prefix}", strict=False)
            except ValueError:
                continue
            if net.version == self.ip.version and self.ip in net:
                return True
        return False

    def _validated_names(self) -> list[str]:
        try:
            names = self.resolver.query(_reverse_name(self.ip), "PTR")
        except DnsTempError:
            return []  # a PTR error is "no match", never temperror (RFC 7208 5.5)
        out = []
        for name in names[:MAX_NAMES]:
            try:
                addresses = self.resolver.query(name, "A" if self.ip.version == 4 else "AAAA")
            except DnsTempError:
                continue
            if str(self.ip) in {str(ipaddress.ip_address(a)) for a in addresses if _is_ip(a)}:
                out.append(name.rstrip(".").lower())
        return out

    # -- macros ----------------------------------------------------------------------------
    def _expand(self, spec: str, domain: str) -> str:
        def one(m: re.Match[str]) -> str:
            if m.group(5) is not None:
                return {"%": "%", "_": " ", "-": "%20"}[m.group(5)]
            letter = m.group(1)
            value = self._macro_value(letter.lower(), domain)
            delimiters = m.group(4) or "."
            parts = re.split("[" + re.escape(delimiters) + "]", value)
            if m.group(3):
                parts.reverse()
            if m.group(2):
                keep = int(m.group(2))
                if keep == 0:
                    raise _PermError(f"bad macro in {spec!r}")
                parts = parts[-keep:]
            out = ".".join(parts)
            return quote(out, safe="") if letter.isupper() else out

        expanded = _MACRO.sub(one, spec).rstrip(".").lower()
        while len(expanded) > 253 and "." in expanded:
            expanded = expanded.split(".", 1)[1]
        return expanded

    def _macro_value(self, letter: str, domain: str) -> str:
        if letter == "s":
            return f"{self.local}@{self.sender_domain}"
        if letter == "l":
            return self.local
        if letter == "o":
            return self.sender_domain
        if letter == "d":
            return domain
        if letter == "i":
            if self.ip.version == 4:
                return str(self.ip)
            return ".".join(self.ip.exploded.replace(":", ""))
        if letter == "p":
            return "unknown"
        if letter == "v":
            return "in-addr" if self.ip.version == 4 else "ip6"
        if letter == "h":
            return self.helo or "unknown"
        raise _PermError(f"macro %{{{letter}}} is only for explanations")


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
