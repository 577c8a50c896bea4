r"""RE2 first looks for Python's case-insensitive patterns. Pure.

A pattern compiled with ``re.IGNORECASE`` tries every position of a text in Python's engine;
most texts hold no match anywhere. One RE2 pass (a DFA, linear, in C) over the text as
Python's engine compares its letters says so first, and Python's engine then runs only where
RE2 found something, so what is found stays exactly what Python's engine finds.

:func:`folded` writes a text as Python's case-insensitive engine compares it: each character
becomes its lower case (``str.lower()``), and the letters the engine takes for one another
although neither is the other's lower case (:data:`SAME_CASE`: dotless ``ı`` and ``i``, long
``ſ`` and ``s``, the Greek symbol forms, the old Cyrillic round forms such as ``ᲃ`` for
``с``) become the first of their group. Where the engine takes a character of the text for a
letter of a pattern, the folded character is then the folded letter, so a case-sensitive RE2
pattern of the folded letters finds every place Python's pattern does. ``"İ".lower()`` is
two characters, ``i`` and a combining dot above, and Python's engine reads ``İ`` as ``i``:
``dot=False`` drops the dot, for patterns whose letters may be ``i``; patterns that read a
non-word character (``\W``, which the dot is) keep it (``dot=True``), and hold no ``i``.
tests/unit/antispam_phishing/test_protected.py checks these against Python's engine over
every character.
"""

from __future__ import annotations

import re
from typing import Any

import re2

SPACES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""What Python's ``\\s`` matches in a text (``str.isspace``); RE2's ``\\s`` is ASCII only."""
SAME_CASE = (
    "i\u0131", "s\u017f", "\u00b5\u03bc", "\u0345\u03b9\u1fbe", "\u0390\u1fd3", "\u03b0\u1fe3",
    "\u03b2\u03d0", "\u03b5\u03f5", "\u03b8\u03d1", "\u03ba\u03f0", "\u03c0\u03d6", "\u03c1\u03f1",
    "\u03c2\u03c3", "\u03c6\u03d5", "\u0432\u1c80", "\u0434\u1c81", "\u043e\u1c82", "\u0441\u1c83",
    "\u0442\u1c84\u1c85", "\u044a\u1c86", "\u0463\u1c87", "\u1c88\ua64b", "\u1e61\u1e9b",
    "\ufb05\ufb06",
)  # fmt: skip
"""Lower-case letters Python's case-insensitive engine takes for one another although neither
is the other's lower case (the engine's own table of them)."""
_SAME: dict[int, int | None] = {ord(c): ord(group[0]) for group in SAME_CASE for c in group[1:]}
_SAME_NO_DOT: dict[int, int | None] = {**_SAME, 0x307: None}
_REWRITTEN = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(_SAME_NO_DOT)) + "]")
"""Any character either table rewrites: a text without one (most) is not translated (a
translation by a dict looks every character up: ~0.4 ms for a non-ASCII letter's text)."""


def folded(text: str, *, dot: bool = False) -> str:
    """``text`` as Python's case-insensitive engine compares it (see the module's doc)."""
    low = text.lower()
    if low.isascii() or _REWRITTEN.search(low) is None:  # the tables rewrite nothing
        return low
    return low.translate(_SAME if dot else _SAME_NO_DOT)


def plain(words: list[str]) -> str:
    """An RE2 pattern of ``words`` (matched as they are) with any whitespace between them
    (:data:`SPACES`, one or more)."""
    spaces = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in SPACES) + "]+"
    return spaces.join(
        "".join(c if c.isalnum() or not c.isascii() else "\\" + c for c in w) for w in words
    )


def compile_first_look(patterns: list[str]) -> Any:
    """One RE2 pattern of the alternatives ``patterns`` (one that matches nothing when there
    are none)."""
    options = re2.Options()
    options.never_capture = True
    options.log_errors = False
    return re2.compile(("|".join(patterns) or "[^\\x00-\\x{10ffff}]").encode(), options)


def found(rx: Any, text: str) -> bool:
    """Whether RE2's ``rx`` finds a place in ``text``; True when RE2 cannot read the text (a
    lone surrogate): then Python's engine must look."""
    try:
        data = text.encode()
    except UnicodeEncodeError:
        return True
    return rx.search(data) is not None
