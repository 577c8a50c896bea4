"""The personal step of a verdict: what each recipient's own sender list makes of the
installation's verdict. Pure: no I/O (the entries are read by
:class:`pochta.mailbox.lists.SenderListService`, once for all the recipients of a letter).

The sender a list matches is the address of the letter's header From (what the person sees and
means when they say "always trust this sender"), normalized as the entries are
(:func:`entry_value`): not the envelope's MAIL FROM, which mailing services set to their own
bounce domain. An entry is an address (``bob@shop.example``) or a domain (``shop.example``),
which covers its subdomains (``news.shop.example``) too; the most specific entry wins: the
address, then the longest domain. A domain that is a public suffix (``com``, ``co.uk``) is no
entry.

    block   the letter is spam for this recipient, unless the installation already says
            phishing (that stays: it is the stronger warning).
    allow   the letter is ham for this recipient, unless pochta has a reason not to believe the
            From it matched; then the installation's verdict stands and the verdict says why
            the entry was not applied (``list=allow-refused:<reason>``):

            phishing    the rules say phishing;
            partial     the signs or the sender's authentication were not checked (the time
                        budget cut them): nothing says the From is genuine;
            dmarc       DMARC fails for the From domain (or errs: ``permerror``, several or no
                        From addresses; ``temperror``);
            spf         for an address entry: SPF fails hard and no DKIM signature of the From's
                        domain passes (the domain says this host may not send its mail);
            unaligned   for a domain entry: neither an SPF pass nor a DKIM pass belongs to the
                        From's registrable domain (a domain entry trusts a whole domain, so the
                        letter must prove it comes from there; with the DNS checks off no letter
                        proves it, and a domain entry does not apply);
            <SIGN>      a sign that the From or its display name or Reply-To imitates another
                        party (:data:`SPOOFING`).

A personal verdict never teaches the installation (``Scanner.learn`` reads the installation's
verdict): one person's list must not move everyone's statistics.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from pochta.antispam import verdict as verdict_mod
from pochta.antispam.verdict import Verdict
from pochta.errors import InvalidInput
from pochta.mime import normalize
from pochta.types import ListAction, Listed, ListEntry

MAX_ENTRY = 254
"""Characters of one entry (an address is at most 254, RFC 5321 4.5.3.1.3 with 5322)."""

SPOOFING = verdict_mod.SPOOFING
"""Signs that the sender imitates another party: an allow entry is not applied to a letter
that shows one (:data:`pochta.antispam.verdict.SPOOFING`)."""

_DMARC_REFUSED = verdict_mod.DMARC_REFUSED
_LOCAL_FORBIDDEN = frozenset(' \t\r\n"(),:;<>[\\]')


def entry_value(text: str) -> str:
    """An entry as stored: an address (local part and domain lower-cased, the domain in its
    IDNA ASCII form) or a domain; InvalidInput, saying why, for anything else."""
    raw = text.strip()
    if not raw:
        raise InvalidInput("an entry is an address (bob@shop.example) or a domain (shop.example)")
    if len(raw) > MAX_ENTRY:
        raise InvalidInput(f"an entry has at most {MAX_ENTRY} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise InvalidInput("an entry has no control characters")
    local, at, host = raw.rpartition("@")
    if at:
        if not local or len(local) > 64 or any(c in _LOCAL_FORBIDDEN for c in local):
            raise InvalidInput(f"not an e-mail address: {raw!r}")
        address = normalize.address(raw)
        if address is None:
            raise InvalidInput(f"not an e-mail address: {raw!r}")
        local, _, host = address.rpartition("@")
        _check_domain(host, raw)
        value = f"{local}@{host}".lower()
    else:
        host = normalize.domain(raw) or ""
        _check_domain(host, raw)
        value = host
    if len(value) > MAX_ENTRY:
        raise InvalidInput(f"an entry has at most {MAX_ENTRY} characters")
    return value


def _check_domain(host: str, raw: str) -> None:
    if not host or normalize.ip(host) is not None:
        raise InvalidInput(f"not a domain name: {raw!r}")
    probe = f"x.{host}"  # a public suffix's child is registrable itself: x.com, x.co.uk
    if "." not in host or normalize.registrable(probe) == probe:
        raise InvalidInput(
            f"{raw!r} is a public suffix (as com, co.uk) or a single name: it cannot be listed"
        )


def candidates(sender: str) -> list[str]:
    """The entry values that can match the From address ``sender`` (normalized), most
    specific first: the address, its domain, then each parent domain down to the registrable
    one. Empty for no address."""
    address = normalize.address(sender) if sender else None
    if address is None:
        return []
    local, _, host = address.rpartition("@")
    out = [f"{local}@{host}".lower()]
    top = normalize.registrable(host) or host
    labels = host.split(".")
    for i in range(len(labels)):
        name = ".".join(labels[i:])
        out.append(name)
        if name == top:
            break
    return out


def match(entries: Iterable[ListEntry], sender: str) -> ListEntry | None:
    """The most specific of ``entries`` that matches the From address, or None."""
    by_value = {e.value: e for e in entries}
    return next((by_value[c] for c in candidates(sender) if c in by_value), None)


def _aligned(verdict: Verdict, host: str) -> bool:
    """An SPF pass or a DKIM pass for the From's registrable domain."""
    auth = verdict.auth
    if auth.dmarc.result == "pass":
        return True
    org = normalize.registrable(host)
    if not org:
        return False
    if auth.spf.result == "pass" and normalize.registrable(auth.spf.domain or "") == org:
        return True
    return any(d.result == "pass" and normalize.registrable(d.domain) == org for d in auth.dkim)


def refusal(verdict: Verdict, entry: ListEntry, sender: str) -> str:
    """Why an allow entry must not decide this letter ("" when it may)."""
    if verdict.label == "phishing":
        return "phishing"
    if {"signs", "auth", "timeout"} & set(verdict.partial):
        return "partial"
    if verdict.auth.dmarc.result in _DMARC_REFUSED:
        return "dmarc"
    spoofed = sorted(s.symbol for s in verdict.signs if s.symbol in SPOOFING)
    if spoofed:
        return spoofed[0]
    host = sender.rpartition("@")[2]
    if entry.is_domain:
        if not _aligned(verdict, host):
            return "unaligned"
    elif verdict.auth.spf.result == "fail" and not _aligned(verdict, host):
        return "spf"
    return ""


def personal(verdict: Verdict, entries: Sequence[ListEntry], sender: str) -> Verdict:
    """The verdict for one recipient whose list holds ``entries`` (those that may match:
    others are ignored), given the installation's ``verdict`` and the From address."""
    entry = match(entries, sender)
    if entry is None:
        return verdict
    address = candidates(sender)[0]
    label = verdict.label
    if entry.action == "block":
        applied, reason = verdict.label != "phishing", ""
        if applied:
            label = "spam"
        else:
            reason = "phishing"
    else:
        reason = refusal(verdict, entry, address)
        applied = not reason
        if applied:
            label = "ham"
    return dataclasses.replace(verdict, label=label, listed=Listed(entry, address, applied, reason))


def action_of(verdict: Verdict) -> ListAction | None:
    """The list action that decided this verdict (None: no list did)."""
    listed = verdict.listed
    return listed.entry.action if listed is not None and listed.applied else None
