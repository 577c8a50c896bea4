"""Telling look-alike names apart: Unicode's confusables, scripts, edit distance. Pure.

The confusables are Unicode's (UTS #39, ``confusables.txt``: thousands of characters, every
script) as ICU's reference implementation computes them: ``icu.SpoofChecker`` from PyICU, as
the ``pyicu-wheels`` wheel ships it with its own ICU (ICU 77.1, Unicode 16.0).

- :func:`unicode_skeleton`: the UTS #39 skeleton, ICU's, nothing added (``gօօgle`` with
  Armenian ``օ`` -> ``google``; ``m`` -> ``rn``; ``0`` -> ``O``).
- :func:`skeleton`: what pochta compares: NFKC, the UTS #39 skeleton, lowercase, the skeleton
  of that again (a capital's prototype may be a capital: ``0`` -> ``O`` -> ``o``), marks
  dropped (a reader overlooks an accent: ``gооglé``), then a few folds looser than Unicode's,
  which keeps apart what a careful reader of a large font tells apart and a reader of a link
  in a mail client does not: ``i`` and ``l`` are one letter (``1``, ``I``, ``|``, ``ı`` and
  Cyrillic ``ӏ`` meet there), ``rn`` is ``m``, ``vv`` is ``w``, and the Cyrillic, Greek and
  Latin letters of :data:`_LOOSER` pass for the Latin letter they resemble (Cyrillic ``м``,
  ``т``, ``к``, ``п``, ``ь`` for m, t, k, n, b: UTS #39 maps them to small capitals and other
  shapes no Latin name holds). Two names with one skeleton look the same.
- :func:`mixed_script`: a name whose letters mix scripts beyond UTS #39's "highly
  restrictive" level (Latin with Cyrillic, Greek, Armenian ...; Latin with Han and Japanese
  kana is fine), as ICU's restriction-level check says.
- :func:`whole_script_confusable`: a name in one script that reads as plain Latin letters it
  is not (Cyrillic ``сосо``, ``аре``; Latin ``ɑpple`` with a Latin alpha).
- :func:`idn_spoof`: a host with a punycode label that is not valid IDNA, mixes scripts, or
  is whole-script confusable with Latin outside a top-level domain of its own script
  (``сахар.рф`` is Russian; ``сосо.com`` is a disguise).
- :func:`distance`: Damerau-Levenshtein (optimal string alignment) with an early exit.
- :func:`unicode_label`: a punycode label (``xn--...``) back to Unicode through the ``idna``
  package (IDNA 2008), or None when it is not valid.

Libraries weighed for the confusables (measured over 8 labels, Python 3.11, one core):
PyICU's ``SpoofChecker`` 0.5 µs a label, 6 ms to load, +10 MB; the ``confusables`` package
ships ``confusables.txt`` (Unicode 13.0, 2020; unmaintained since 2021; its ``normalize`` is
exponential: 2.4 s for a 32-letter label); ``confusable_homoglyphs`` (MIT, 2024, Unicode 15.1)
keeps only an undirected graph parsed from the file's comments, so no skeleton can be
computed from it, and takes 14 µs a label; ``homoglyphs`` (2020) re-reads its JSON on every
look-up (71 µs a label). ICU is the reference implementation of UTS #39 and the only one with
its restriction levels. PyICU itself compiles against the system's ICU (libicu-dev, pkg-config,
a C++ compiler); ``pyicu-wheels`` is the same module built with ICU inside the wheel (51 MB),
so installing pochta compiles nothing.
"""

from __future__ import annotations

import unicodedata

import icu
import idna
from rapidfuzz.distance import OSA

MAX_LABEL = 63  # a longer label is no DNS label (RFC 1035)

# A checker, configured once and then only read (ICU's checks and skeletons are thread-safe).
_SPOOF = icu.SpoofChecker()
_SPOOF.setChecks(icu.USpoofChecks.RESTRICTION_LEVEL)
_SPOOF.setRestrictionLevel(icu.URestrictionLevel.HIGHLY_RESTRICTIVE)

# Prototypes of UTS #39 (after lowercase) that pass for a Latin letter in a domain name, and
# combining marks, dropped. Applied to a skeleton, so the keys are UTS #39's prototypes.
_LOOSER = str.maketrans(
    {
        "ƅ": "b",  # Cyrillic ь
        "ß": "b",  # Greek β (UTS #39: β -> ß), ß itself
        "ĸ": "k",  # Cyrillic к, Greek κ, Latin ĸ
        "ʍ": "m",  # Cyrillic м
        "π": "n",  # Cyrillic п, Greek π
        "ᴛ": "t",  # Cyrillic т, Greek τ
        "ꞓ": "e",  # Greek ε
        "χ": "x",  # Greek χ
        "ω": "w",  # Greek ω
        "μ": "u",  # Greek μ
        "þ": "p",  # Latin þ
        "∂": "d",  # Latin ð (UTS #39: ð -> ∂ with a stroke)
        "i": "l",  # i, ı, Cyrillic ӏ, 1, I, |
        "!": "l",
    }
    | {ord(mark): None for mark in icu.UnicodeSet("[:Mn:]")}
)

_COMMON = frozenset({"Zyyy", "Zinh", "Zzzz"})  # no script of its own: digits, marks


def unicode_skeleton(name: str) -> str:
    """The UTS #39 skeleton of ``name`` (ICU's ``uspoof_getSkeleton``)."""
    return str(_SPOOF.getSkeleton(0, name))


def skeleton(name: str) -> str:
    """What a reader sees in ``name``: equal skeletons look the same (see the module doc)."""
    s = unicode_skeleton(unicodedata.normalize("NFKC", name)).lower()
    s = unicode_skeleton(s).lower().translate(_LOOSER)
    return s.replace("rn", "m").replace("vv", "w")


def script_codes(name: str) -> set[str]:
    """The ISO 15924 codes of the scripts of ``name``'s characters (``Latn``, ``Cyrl``,
    ``Armn``); characters common to all scripts (digits, hyphens, marks) count for none."""
    return {icu.Script.getScript(ch).getShortName() for ch in set(name)} - _COMMON


def mixed_script(name: str) -> bool:
    """Letters of more scripts than UTS #39's highly restrictive level lets one name hold."""
    return bool(_SPOOF.check(name))


def whole_script_confusable(name: str) -> bool:
    """``name`` is in one script and reads as a name of plain Latin letters it is not: every
    letter of a Cyrillic, Greek ... name passes for a Latin one (``сосо``, ``аре``), or a
    Latin name with letters beyond ASCII has an ASCII skeleton under UTS #39 itself
    (``ɑpple``, ``nɑǀᴏƍ``; accents stay in that skeleton: ``müller`` and ``café`` read as
    what they are)."""
    codes = script_codes(name)
    if len(codes) != 1 or name.isascii():
        return False
    sk = unicode_skeleton(name).lower() if "Latn" in codes else skeleton(name)
    return sk.isascii() and any(ch.isalpha() for ch in sk)


def idn_spoof(host: str) -> bool:
    """A punycode label of ``host`` is not valid IDNA, mixes scripts, or reads as plain Latin
    letters it is not (:func:`whole_script_confusable`), unless the top-level domain is of
    the label's own script other than Latin (Cyrillic ``сахар.рф`` is no disguise;
    ``сосо.com`` is)."""
    labels = host.split(".")
    tld = unicode_label(labels[-1]) or labels[-1]
    for label in labels:
        if label[:4].lower() != "xn--":
            continue
        u = unicode_label(label)
        if u is None or mixed_script(u):
            return True
        if whole_script_confusable(u) and (script_codes(u) != script_codes(tld) or tld.isascii()):
            return True
    return False


def distance(a: str, b: str, limit: int = 3) -> int:
    """Optimal-string-alignment distance (a swap of two neighbours is one edit), or
    ``limit + 1`` once it is surely above limit. rapidfuzz's, in C: the same answers as the
    dynamic programme this replaced, 20x faster (measured over 20,000 random pairs)."""
    return min(OSA.distance(a, b, score_cutoff=limit), limit + 1)


def unicode_label(label: str) -> str | None:
    """``xn--80ak6aa92e`` -> ``аррӏе`` (IDNA 2008, the ``idna`` package); a label that is no
    punycode comes back as it is; None when the punycode or what it holds is not valid."""
    if label[:4].lower() != "xn--":
        return label
    if len(label) > MAX_LABEL:
        return None
    try:
        return str(idna.decode(label))
    except (idna.IDNAError, UnicodeError, ValueError):
        return None


def unicode_domain(host: str) -> str:
    """A host name with every punycode label shown in Unicode (labels that fail stay)."""
    return ".".join(unicode_label(x) or x for x in host.split("."))
