"""Every regex in src/pochta, what it reads, how it can go super-linear, what was chosen, and
what it costs (the table of docs/regexes.md).

For each pattern that reads what a sender controls (letter text, header fields, names, URLs,
DNS records of the sender's domain), measured as pochta calls it, before and after the
linear-time rewrites ("before" is tests/regex_before.py; a pattern outside this work that is
still super-linear gets a "proposed" rewrite, measured too):

- normal: CPU µs per letter over the SpamAssassin corpus's unsealed letters (~4,840 of
  6,046; ``--quick``: 300),
  the pattern run on the very pieces of each letter it reads in pochta;
- crafted: CPU ms on the pattern's worst input at 10,000 and 100,000 characters (stopped after
  ``--budget`` seconds: null).

    python benchmarks/regex_table.py                     # JSON on stdout (a few minutes)
    python benchmarks/regex_table.py --quick             # 300 letters, 1,000 / 10,000 chars
    python benchmarks/regex_table.py --markdown docs/regexes.md   # also rewrite the table there
    python benchmarks/regex_table.py --check docs/regexes.md      # no measuring: is every regex
                                                         # of src/pochta in ROWS and in the doc?
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import emit, machine, note

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.regex_before, tests.cputime

from tests import regex_before as before
from tests.cputime import cpu

from pochta.antispam import features
from pochta.antispam.auth import results as auth_results
from pochta.antispam.auth import spf
from pochta.antispam.model import design
from pochta.antispam.shingles import extract
from pochta.antispam.signs import (
    casefold,
    checks,
    extortion,
    forwarders,
    links,
    lures,
    protected,
    wording,
)
from pochta.mime import headers, normalize
from pochta.mime import html as html_mod
from pochta.mime import letter as letter_mod
from pochta.mime.letter import parse
from pochta_factory import corpus

SRC = Path(__file__).resolve().parent.parent / "src"
Run = Callable[[Any], object]


# -- how pochta calls a pattern ----------------------------------------------------------------
def finditer(rx: re.Pattern[Any]) -> Run:
    return lambda text: sum(1 for _ in rx.finditer(text))


def findall(rx: re.Pattern[Any]) -> Run:
    return lambda text: rx.findall(text)


def search(rx: re.Pattern[Any]) -> Run:
    return lambda text: rx.search(text)


def match(rx: re.Pattern[Any]) -> Run:
    return lambda text: rx.match(text)


def fullmatch(rx: re.Pattern[Any]) -> Run:
    return lambda text: rx.fullmatch(text)


def sub(rx: re.Pattern[Any]) -> Run:
    return lambda text: rx.sub(" ", text)


def find_all(rx: re.Pattern[str], old: bool = False) -> Run:
    if old:
        return lambda text: before.find_all(rx, text)
    return lambda text: wording.find_all(rx, text)


def per_sentence(rx: re.Pattern[str], gate: bool = False) -> Run:
    """As requests()/asks_for() use an item: searched in each sentence of the folded body (now
    after the RE2 gate over the whole body)."""

    def run(body: str) -> object:
        if gate and wording.first_candidate(rx, body) is None:
            return None
        return [rx.search(s) for s in wording.sentences(body)]

    return run


# -- the rows ----------------------------------------------------------------------------------
@dataclass
class Row:
    key: str  # path under src/ : name (as --check finds it)
    matches: str
    reads: str  # which text, and how much of it
    risk: str  # of the pattern before this work
    choice: str
    why: str
    input: str | None = None  # a key of corpus_inputs(); None: not measured on the corpus
    crafted: Callable[[int], Any] | None = None  # the worst input of n characters
    now: Run | None = None
    before: Run | None = None  # when rewritten here
    proposed: Run | None = None  # when outside this work and still super-linear
    results: dict[str, Any] = field(default_factory=dict)


W = "pochta/antispam/signs/wording.py"
F = "pochta/antispam/features.py"
N = "pochta/mime/normalize.py"
H = "pochta/mime/headers.py"
C = "pochta/antispam/signs/checks.py"
FW = "pochta/antispam/signs/forwarders.py"
R = "pochta/antispam/shingles/extract.py"
LK = "pochta/antispam/signs/links.py"
X = "pochta/antispam/signs/extortion.py"
L = "pochta/mime/letter.py"
HT = "pochta/mime/html.py"
SPF = "pochta/antispam/auth/spf.py"
AR = "pochta/antispam/auth/results.py"
LU = "pochta/antispam/signs/lures.py"

LINEAR = "linear"
AS_IS = "Python re as is"
NOT_LETTER = "not letter input"


def rep(piece: str) -> Callable[[int], str]:
    return lambda n: piece * max(1, n // len(piece))


STEMS = {
    "card details": "данн", "card number": "номер", "CVV/CVC": "код", "expiry date": "срок",
    "PIN": "пин", "SMS code": "код",
}  # fmt: skip


def card(label: str) -> Row:
    return Row(
        f"{W}:CARD_ITEMS[{label}]",
        f"card data named in a sentence: {label}",
        "each sentence of the folded body (200,000 + 200,000 chars)",
        "quadratic: a stem repeated inside one long word (\\w* then \\s, no \\b before the stem)",
        "rewrite + RE2 gate",
        "word tails bounded to 40 chars, possessive; RE2 skips the item when the body has no "
        "candidate",
        "body",
        rep(STEMS[label]),
        per_sentence(wording.CARD_ITEMS[label], gate=True),
        per_sentence(before.CARD_ITEMS[label]),
    )


# fmt: off
ROWS: list[Row] = [
    # -- wording: folded letter text ----------------------------------------------------------
    Row(f"{W}:_SPACE", "runs of blanks (fold)", "all text of the letter (400,000 chars)",
        LINEAR, AS_IS, "one character class, each run read once", "all_text", rep(" \u00a0"),
        sub(wording._SPACE)),
    Row(f"{W}:_SPACES", "runs of spaces made one (fold, after the blanks became spaces)",
        "all text of the letter (400,000 chars)", LINEAR, AS_IS,
        "a literal space first, each run read once", "all_text", rep(" "),
        sub(wording._SPACES)),
    Row(f"{W}:_FORMAT", "invisible format characters (fold)", "all text (400,000 chars)",
        LINEAR, AS_IS, "one character class", "all_text", rep("\u200b"), sub(wording._FORMAT)),
    Row(f"{W}:_SENTENCE_END", "sentence ends: after .!? and blank lines", "folded body",
        LINEAR, AS_IS,
        "begins with its blank; the one rescan (\\n\\s*\\n) starts only at a newline and "
        "consumes its run",
        "body", rep(".\n \n "), lambda t: wording._SENTENCE_END.split(t)),
    Row(f"{W}:GREETING", "impersonal greetings (dear customer, уважаемый клиент)",
        "first 600 chars of the text, folded (bounded in checks.py)",
        "quadratic: \"dear dear dear ...\" (the adjective loop rescanned from every \"dear\")",
        "rewrite + RE2 prefilter + bounded input",
        "at most 8 adjectives, possessive; RE2 finds where a greeting may begin", "head",
        rep("dear "), find_all(wording.GREETING), find_all(before.GREETING, old=True)),
    Row(f"{W}:NAMELESS_GREETING", "a nameless \"Добрый день!\" as the first line",
        "first line of the first 600 chars", LINEAR, AS_IS, "anchored, one pass", "first_line",
        lambda n: "добрый день" + " " * n, match(wording.NAMELESS_GREETING)),
    Row(f"{W}:OFFER", "too-generous offers: prizes, compensation, easy money, amounts per day",
        "folded subject + body (464,000 chars)",
        "quadratic: digit runs (\"1 1 1 ...\": the amount patterns rescan the run from every "
        "digit) and stems repeated in one word",
        "rewrite + RE2 prefilter",
        "possessive units, skipped runs, bounded word tails; RE2 (ASCII \\b and \\w are wrong on "
        "Cyrillic, so only as a prefilter of a relaxed copy) finds the first candidate: no "
        "Python scan at all in most letters",
        "offer", rep("1 "), find_all(wording.OFFER), find_all(before.OFFER, old=True)),
    Row(f"{W}:ALARM", "alarming subjects (blocked, debt, verify)", "folded Subject (64 KiB)",
        "quadratic: a stem repeated in one word (удален\\w*\\s+ ...)", "rewrite + RE2 prefilter",
        "bounded word tails; RE2 prefilter", "subject_folded", rep("удален"),
        find_all(wording.ALARM), find_all(before.ALARM, old=True)),
    Row(f"{W}:URGENCY", "deadlines and threats in the text", "folded body (400,000 chars)",
        "quadratic: \"картакарта...\" (карт\\w*\\s+), \"переданпередан...\"",
        "rewrite + RE2 prefilter", "bounded word tails; RE2 prefilter", "body", rep("карта"),
        find_all(wording.URGENCY), find_all(before.URGENCY, old=True)),
    *(card(label) for label in wording.CARD_ITEMS),
    Row(f"{W}:PERSONAL_OBJECTS", "passwords, passport, SNILS, personal data",
        "sentences with a request verb and no negation",
        "quadratic: \"личнличн...\" (personal-data stems, \\w*\\s+)", "rewrite + RE2 gate",
        "bounded word tails; RE2 gate over the body", "body", rep("личн"),
        per_sentence(wording.PERSONAL_OBJECTS, gate=True), per_sentence(before.PERSONAL_OBJECTS)),
    Row(f"{W}:REQUEST", "request verbs (укажите, enter, confirm)", "each sentence", LINEAR,
        "Python re + RE2 gate", "\\b-led or literal alternatives; gated by RE2 over the body",
        "body", rep("укажите"), per_sentence(wording.REQUEST, gate=True),
        per_sentence(wording.REQUEST)),
    Row(f"{W}:NEGATION", "negations (никому, never, do not)", "each sentence", LINEAR,
        "Python re + RE2 gate", "\\b-led or literal alternatives; gated by RE2 over the body",
        "body", rep("не "), per_sentence(wording.NEGATION, gate=True),
        per_sentence(wording.NEGATION)),
    Row(f"{W}:_rx()", "compiles a phrase family (the families are rows of their own)", "-",
        LINEAR, NOT_LETTER, "a factory"),
    Row(f"{W}:_QUANTIFIER", "{m,n} in a pattern's source (the RE2 translation)",
        "pochta's own pattern sources", LINEAR, NOT_LETTER, "never sees letter text"),
    # -- features: the visible text ------------------------------------------------------------
    Row(f"{F}:_MONEY", "amounts of money (12 000 руб, $500, 100 тыс.)",
        "visible text (200,000 chars)",
        "quadratic: \"1 1 1 ...\" (the run rescanned from every digit); 5.9 s at 10 KB",
        "rewrite", "possessive run before the unit; runs without a unit matched and not counted;"
        " one class of first characters, a look-behind picks the branch (the engine skips to a"
        " digit or sign in C)",
        "visible", rep("1 "), features.money, lambda t: len(before.MONEY.findall(t))),
    Row(f"{F}:_WORD", "words (count)", "visible text", LINEAR, AS_IS, "one class, runs",
        "visible", rep("a "), findall(features._WORD)),
    Row(f"{F}:_REPLY", "Re:/Ответ: at the start of the Subject", "Subject (64 KiB)",
        "quadratic: \"re\" + 60,000 blanks + \"x\" (two \\s* around an optional part)",
        "rewrite", "possessive blanks", "subject", lambda n: "re" + " " * n + "x",
        match(features._REPLY), match(before.FEATURES_REPLY)),
    Row(f"{F}:_LETTERS", "letters (count)", "visible text, Subject", LINEAR,
        "rewrite (speed)", "runs instead of single letters: the same count, fewer matches; "
        "not run on ASCII text (its letters are the Latin ones)", "visible", rep("аb1 "),
        lambda t: t.isascii() or features._count(features._LETTERS, t),
        lambda t: len(before.LETTER.findall(t))),
    Row(f"{F}:_CYRILLIC", "Cyrillic letters (count)", "visible text, Subject", LINEAR,
        "rewrite (speed)", "runs; not run on ASCII text", "visible", rep("аб "),
        lambda t: t.isascii() or features._count(features._CYRILLIC, t),
        lambda t: len(before.CYRILLIC.findall(t))),
    Row(f"{F}:_LATIN", "Latin letters (count)", "visible text, Subject", LINEAR,
        "rewrite (speed)", "runs", "visible", rep("ab "),
        lambda t: features._count(features._LATIN, t), lambda t: len(before.LATIN.findall(t))),
    # -- mime ---------------------------------------------------------------------------------
    Row(f"{N}:_SPACE", "whitespace runs (normalize.text)", "any normalized piece", LINEAR,
        AS_IS, "one class", "visible", rep(" \n"), sub(normalize._SPACE)),
    Row(f"{N}:_format_class()", "any format character (normalize.text translates only then)",
        "any normalized piece, only when it is not ASCII", LINEAR, AS_IS,
        "one class of code-point runs", "visible", rep("\u200b"),
        search(normalize._format_class())),
    Row("pochta/antispam/signs/casefold.py:_REWRITTEN",
        "any character folded() rewrites past lower() (ı, ſ, the old Cyrillic forms...)",
        "a text folded for an RE2 first look, only when it is not ASCII", LINEAR, AS_IS,
        "one class", "all_text", rep("\u0131"), search(casefold._REWRITTEN)),
    Row(f"{N}:_REPLY", "a chain of reply/forward prefixes", "normalized Subject", LINEAR,
        "rewrite (hygiene)", "possessive blanks and digits; the text has single blanks anyway",
        "subject", rep("re: "), normalize.subject, before.subject),
    Row(f"{N}:_TAGS", "[list] tags before the prefixes", "normalized Subject",
        "quadratic: \"[list] Re: [list] Re: ...\" (subject() rebuilt the text and matched the "
        "kept tags again after each prefix)", "rewrite", "subject() reads the text once",
        "subject", rep("[list] re: "), normalize.subject, before.subject),
    Row(f"{N}:_PCT", "percent escapes in a URL path", "link paths", LINEAR, AS_IS, "one token",
        "url_paths", rep("%41"), sub(normalize._PCT)),
    Row(f"{H}:_HEADER_LINE", "a header line (From , name:, continuation)", "each raw line",
        "linear (one start; 2 passes over a long name)", "rewrite (hygiene)",
        "possessive: \":\" is no name character", "raw_lines", lambda n: b"a" * n,
        match(headers._HEADER_LINE), match(before.HEADER_LINE)),
    Row(f"{H}:_MEDIA_TYPE", "type/subtype of Content-Type", "200 chars of the value", LINEAR,
        "rewrite (hygiene)", "possessive tokens", "content_type", lambda n: "a" * n,
        match(headers._MEDIA_TYPE), match(before.MEDIA_TYPE)),
    Row(f"{H}:_FOLD", "folding (CRLF + blanks)", "header values (64 KiB)", LINEAR, AS_IS,
        "one token", "header_values", rep("\r\n "), sub(headers._FOLD)),
    Row(f"{L}:_MSGID", "<...> in Message-ID", "Message-ID (64 KiB)", LINEAR,
        AS_IS, "starts at <, the class cannot cross <", "message_id", rep("<a"),
        search(letter_mod._MSGID)),
    Row(f"{H}:_SURROGATE", "undecodable bytes kept as lone surrogates", "header values (64 KiB)",
        LINEAR, AS_IS, "one class; ASCII values are not searched", "header_values",
        rep("\udc80a"), search(headers._SURROGATE)),
    Row(f"{H}:_LONE_SURROGATE", "lone surrogates a decoder left (UTF-7's +2D0-)",
        "decoded text, only when it does not encode", LINEAR, AS_IS, "one class", "header_values",
        rep("\ud83da"), search(headers._LONE_SURROGATE)),
    Row("pochta/mime/tree.py:_delimiter()", "multipart delimiter lines", "a multipart's body",
        "linear per level (MAX_DEPTH 32 levels rescan their body)", AS_IS,
        "anchored at line starts; depth is capped"),
    Row("pochta/mime/codec.py:_NOT_B64", "non-base64 bytes", "a base64 body", LINEAR, AS_IS,
        "one class"),
    # -- the parsed letter: mime/letter.py, mime/html.py ---------------------------------------
    Row(f"{L}:_URL_IN_TEXT", "URLs in plain text", "plain text (200,000 chars)", LINEAR, AS_IS,
        "the class run ends the pattern, possessive; one match per run", "plain",
        rep("http://a"), finditer(letter_mod._URL_IN_TEXT)),
    Row(f"{L}:_BARE_ADDRESS", "a From / To / Cc field that is one bare address",
        "From, To, Cc (4,096 chars)", LINEAR, "new (getaddresses skipped)",
        "possessive runs, fullmatch; a look-behind keeps a search linear too",
        "address_fields", rep("a-"), fullmatch(letter_mod._BARE_ADDRESS)),
    Row(f"{L}:_NAMED_ADDRESS", "a From / To / Cc field that is one display name and <address>",
        "From, To, Cc (4,096 chars)", LINEAR, "new (getaddresses skipped)",
        "possessive runs, fullmatch; look-behinds keep a search linear too", "address_fields",
        rep("a "),
        fullmatch(letter_mod._NAMED_ADDRESS)),
    Row(f"{HT}:_HIDDEN_STYLE", "display:none and friends", "style attributes", LINEAR, AS_IS,
        "literal-led", "styles", lambda n: "display" + " " * n,
        search(html_mod._HIDDEN_STYLE)),
    Row(f"{HT}:_LONG_TAG", "a tag longer than MAX_TAG (4 KB) before Lexbor reads it",
        "the HTML source (1 MiB)", LINEAR, AS_IS,
        "starts at <, a bounded run that cannot cross < or >", "html", rep("<a "),
        search(html_mod._LONG_TAG)),
    Row(f"{HT}:_LONG_TAG_REST", "the rest of a long tag, cut away", "the HTML source (1 MiB)",
        LINEAR, AS_IS, "as _LONG_TAG, then one possessive run", "html",
        lambda n: "<" + "a" * n, lambda t: html_mod._LONG_TAG_REST.sub(r"\1", t)),
    # -- checks.py ------------------------------------------------------------------------------
    Row(f"{C}:_REPLY", "Re: at the start of the Subject (fake reply)",
        "Subject, first 256 chars",
        "quadratic before: \"Re\" + 60,000 blanks + \"x\" (6 s at 64 KB)",
        "rewrite: bounded repetitions + bounded input", "every run bounded ({0,16}, {0,40})",
        "subject", lambda n: "re" + " " * n + "x", match(checks._REPLY)),
    Row(f"{C}:_ADDRESS_IN_NAME", "an address or domain shown in the display name",
        "display name, lowercased (64 KiB)",
        "quadratic before: \"a.a.a.a...\" (every label started a scan to the end); 4.4 s at 20 KB",
        "rewrite: bounded local part and labels, no start inside a run",
        "an address is at most 64 + 8 labels of 63", "display_name_lower", rep("a."),
        finditer(checks._ADDRESS_IN_NAME)),
    Row(f"{C}:_NAME_CUT", "a hyphen or dot between two pieces of two letters or more of a "
        "display name (Meta-Mask; not the initials of V.K. Singh)",
        "display name (256 chars: MAX_NAME)", LINEAR, AS_IS,
        "one character between two look-arounds of two characters", None,
        rep("ab-"), sub(checks._NAME_CUT)),
    Row(f"{C}:_ADDRESS", "the address in Reply-To, Sender, List-Post", "header values (64 KiB)",
        "quadratic before: one long run without @ (1.2 s at 20 KB)",
        "rewrite: (?<![\\w.+-]) start, bounded runs", "only a run's start can match",
        "reply_to", lambda n: "a" * n, search(checks._ADDRESS)),
    Row(f"{C}:_LIST_ID", "<list.id> in List-Id", "List-Id (64 KiB)", LINEAR, AS_IS,
        "starts at <, bounded class run", "header_values", rep("<a"), search(checks._LIST_ID)),
    Row(f"{C}:_RECEIVED_FROM", "from clause of Received", "Received fields", LINEAR, AS_IS,
        "anchored", "received", lambda n: "from " + "a" * n, match(checks._RECEIVED_FROM)),
    Row(f"{C}:_HOSTNAME", "a host name", "host candidates from Received",
        "linear (O(63) per label)", AS_IS, "labels bounded", "received_hosts",
        lambda n: "a." * (n // 2) + "1", match(checks._HOSTNAME)),
    # -- forwarders.py: Received fields, read only with antispam.trusted_forwarders set ---------
    Row(f"{FW}:_FROM_PART", "a Received field's from part, up to by / with / id / for",
        "Received fields, first 1,024 chars", LINEAR, AS_IS,
        "anchored; a lazy run bounded at 900, a literal alternative at each step", "received",
        lambda n: "from " + "a" * n, match(forwarders._FROM_PART)),
    Row(f"{FW}:_HOST", "a host name among a from part's words", "words of 253 chars at most",
        "linear (O(126) labels)", AS_IS, "fullmatch; labels bounded; words bounded",
        "received_hosts", lambda n: "a." * (n // 2) + "1", fullmatch(forwarders._HOST)),
    Row(f"{FW}:_IPV4", "an IPv4 address in a from part", "a from part (900 chars)", LINEAR,
        AS_IS, "bounded digit runs, look-arounds of one character", "received",
        rep("1."), finditer(forwarders._IPV4)),
    Row(f"{FW}:_IPV6", "[IPv6:...] or [address] in a from part", "a from part (900 chars)",
        LINEAR, AS_IS, "starts at [, a class run bounded at 45", "received",
        lambda n: "[" + "1" * n, finditer(forwarders._IPV6)),
    # -- links.py: link texts, targets, site names written out -------------------------------
    Row(f"{LK}:_SHOWN_URL", "a URL or host name as a link's text", "anchor texts", LINEAR,
        AS_IS, "fullmatch; labels bounded, a label cannot hold a dot", "link_texts", rep("a."),
        fullmatch(links._SHOWN_URL)),
    Row(f"{LK}:_URL_IN_WORDS", "a URL inside a link's text", "anchor texts", LINEAR, AS_IS,
        "literal-led, bounded class run at the end", "link_texts", rep("http://"),
        search(links._URL_IN_WORDS)),
    Row(f"{LK}:_CARRIED", "a URL carried in another URL's query", "link targets", LINEAR,
        AS_IS, "literal alternatives", "link_urls", rep("http%3a"), search(links._CARRIED)),
    Row(f"{LK}:_AUTHORITY", "the authority of a link target", "link targets", LINEAR, AS_IS,
        "anchored (match); bounded runs", "link_urls", lambda n: "http://" + "a" * n,
        match(links._AUTHORITY)),
    Row(f"{LK}:_OBFUSCATED", "a host name with its dots written otherwise",
        "visible text past the RE2 first look (200,000 chars)", LINEAR, AS_IS,
        "no start inside a run ((?<![\\w.-])); labels and separators bounded; at most 8 labels",
        "visible", rep("a [.] "), finditer(links._OBFUSCATED)),
    Row(f"{LK}:_SEPARATOR", "a written-out dot", "a found site name", LINEAR, AS_IS,
        "literal alternatives, bounded blanks", None, rep("a [.] "), sub(links._SEPARATOR)),
    Row(f"{LK}:_SCHEME_ONLY", "hxxp:// and friends with what follows",
        "visible text past the first look",
        LINEAR, AS_IS, "literal-led, bounded class run", "visible", rep("hxxp://"),
        finditer(links._SCHEME_ONLY)),
    Row(f"{LK}:_CALL", "words that ask to go to a site", "the sentence around a site name",
        LINEAR, AS_IS, "\\b-led literals, one word tail", None, rep("перейд"),
        search(links._CALL)),
    Row(f"{LK}:_WARNING", "a warning against a site", "the sentence around a site name",
        LINEAR, AS_IS, "\\b-led literals, one word tail", None, rep("не "),
        search(links._WARNING)),
    Row(f"{LK}:obfuscated()", "where a host name ends in a written-out site name",
        "a found site name", LINEAR, AS_IS, "one class, maxsplit=1", None, rep("a"),
        lambda t: re.split(r"[/?#:]", t, maxsplit=1)),
    Row(f"{LK}:carried_hosts()", "where a host name ends in a URL carried in a query",
        "link targets", LINEAR, AS_IS, "one class, maxsplit=1", None, rep("a"),
        lambda t: re.split(r"[/?#:&;*\\\s]", t, maxsplit=1)),
    Row(f"{LK}:userinfo()", "%40 in an authority", "link targets", LINEAR, AS_IS, "a literal",
        None, rep("%4"), lambda t: re.sub("%40", "@", t, flags=re.IGNORECASE)),
    # -- extortion.py ---------------------------------------------------------------------------
    Row(f"{X}:_WALLET", "crypto wallet addresses", "visible text (200,000 chars)", LINEAR, AS_IS,
        "no start inside a run; bounded lengths", "visible", lambda n: "1" * n,
        finditer(extortion._WALLET)),
    Row(f"{X}:CRYPTO", "crypto words", "visible text, folded", LINEAR, AS_IS,
        "\\b-led literals, word tails {0,24}+", "body", rep("bitcoin"), search(extortion.CRYPTO)),
    Row(f"{X}:GIFT_CARDS", "gift cards named", "visible text, folded", LINEAR, AS_IS,
        "\\b-led literals, word tails {0,24}+", "body", rep("подарочн"),
        search(extortion.GIFT_CARDS)),
    Row(f"{X}:_SEND_CODES", "a demand to send the codes", "visible text, folded, when it "
        "names a gift card", "exponential before: a run of \"-\" after the verb (a dash was "
        "both a word and a gap: 75 dashes ran for minutes; not measured, as the CPU timer's "
        "signal does not stop it)",
        "rewrite: words and gaps share no character, both possessive",
        "each word read once; at most 6 words of 20 between", "body",
        lambda n: "send " + "-" * n, search(extortion._SEND_CODES)),
    Row(f"{X}:_PAY", "pay/transfer verbs", "text near a wallet (600 chars)", LINEAR, AS_IS,
        "\\b-led literals", None, rep("pay"), search(extortion._PAY)),
    Row(f"{X}:_DEADLINE", "a deadline", "visible text, folded", LINEAR, AS_IS,
        "\\b-led literals, bounded digits and tails", "body", rep("1 "),
        search(extortion._DEADLINE)),
    Row(f"{X}:_THREAT", "a threat to publish recordings", "visible text, folded", LINEAR, AS_IS,
        "\\b-led literals, bounded tails", "body", rep("video"), search(extortion._THREAT)),
    Row("pochta/antispam/signs/protected.py:Protected.__init__()",
        "organization names in a display name", "display name (64 KiB)", LINEAR, AS_IS,
        "(?<!\\w)-led literals; tails bounded {0,3}", "display_name", rep("сбер "),
        lambda t: protected.default().named_in(t)),
    *(
        Row(f"pochta/antispam/signs/protected.py:{key}", what,
            "display name, visible text (4,096 chars: MAX_NAMED_TEXT)", LINEAR, AS_IS,
            "(?<!\\w)-led literals; bounded input", None, rep("сбер "),
            lambda t: protected.default().named_in(t))
        for key, what in [
            ("Protected.__init__() (2)", "organization names as skeletons (PayPaI)"),
            ("_bounded_any()", "any organization name, one pass first"),
            ("_bounded_any() (2)", "any skeleton, one pass first"),
            ("_lookahead()", "where any organization name or skeleton begins: the one pass in "
             "a look-ahead, overlapping matches too; each organization is then tried only there"),
        ]
    ),
    # -- lures.py (issue 28): today's lures, behind the RE2 prefilter like wording's ------------
    Row(f"{LU}:ACCOUNT_LURE", "account lures: keep your password, mailbox full, pending "
        "messages, recovery phrase, re-register MFA", "folded subject + body", LINEAR,
        "RE2 prefilter", "\\b-led literals, word tails bounded {0,40}+; RE2 finds where one "
        "may begin", None, rep("keep "), find_all(lures.ACCOUNT_LURE)),
    Row(f"{LU}:FEE_REQUEST", "a customs, delivery or unlock fee; a payment method to update",
        "folded subject + body", LINEAR, "RE2 prefilter",
        "\\b-led literals, word tails bounded {0,40}+, at most 2 words between", None,
        rep("оплатите "), find_all(lures.FEE_REQUEST)),
    Row(f"{LU}:MAIL_ROLE", "a mail administrator's name (Mail Administrator, IT Helpdesk)",
        "display name (256 chars: MAX_NAME), folded", LINEAR, "RE2 prefilter",
        "\\b-led literals; bounded input", None, rep("mail "), find_all(lures.MAIL_ROLE)),
    Row(f"{LU}:ROLE", "a service's name (Support, Служба безопасности)",
        "display name (256 chars: MAX_NAME), folded", LINEAR, "RE2 prefilter",
        "\\b-led literals; bounded input", None, rep("служб"), find_all(lures.ROLE)),
    Row(f"{LU}:QR", "a QR code to scan", "folded subject + body of a short letter with an image",
        LINEAR, "RE2 prefilter", "\\b-led literals", None, rep("qr "), find_all(lures.QR)),
    Row(f"{LU}:QR_PAYMENT", "a payment named beside a QR code in an attached document",
        "folded subject + body of a short letter with a document, when QR matched", LINEAR,
        "RE2 prefilter", "\\b-led literals, one bounded suffix", None, rep("billy "),
        find_all(lures.QR_PAYMENT)),
    Row(f"{LU}:CALLBACK_CALL", "a request to call a phone number (callback phishing)",
        "folded subject + body (100,000 chars: CALLBACK_READ), only when CALLBACK_REASON matched",
        LINEAR, AS_IS, "verb-led literals; at most 80 non-digits, then a number of at most 22 "
        "characters; kept out of the shared RE2 pass (it grew the pass's automaton)", None,
        lambda n: "call (1" + "-1" * (n // 2), finditer(lures.CALLBACK_CALL)),
    Row(f"{LU}:CALLBACK_REASON", "a charge or sign-in the reader did not make; cancel, refund, "
        "block; the SMS code to tell", "folded subject + body (of a letter with a number to "
        "call)", LINEAR, "RE2 prefilter", "\\b-led literals, at most 3 words between", None,
        rep("назовите "), find_all(lures.CALLBACK_REASON)),
    Row(f"{LU}:BEC_MONEY", "pay to new bank details (business e-mail compromise)",
        "folded subject + body, when BEC_HUSH matched or the Reply-To is another public mailbox",
        LINEAR, "RE2 prefilter", "\\b-led literals, word tails bounded {0,40}, at most 6 "
        "words between", None, rep("переводите на "), find_all(lures.BEC_MONEY)),
    Row(f"{LU}:BEC_GIFT", "gift cards to buy",
        "folded subject + body of a public mailbox's letter to an organization", LINEAR,
        "RE2 prefilter", "\\b-led literals, at most 4 words between", None, rep("buy "),
        find_all(lures.BEC_GIFT)),
    Row(f"{LU}:BEC_CODES", "codes to send, a card's back to scratch",
        "folded subject + body, when BEC_GIFT matched", LINEAR, "RE2 prefilter",
        "\\b-led literals, each part optional once", None, rep("send me the "),
        find_all(lures.BEC_CODES)),
    Row(f"{LU}:BEC_PAYMENT", "a payment, a wire, an invoice to pay",
        "folded subject + body, when BEC_HUSH matched", LINEAR, "RE2 prefilter",
        "\\b-led literals, at most 3 words between; \"wire\" only as a verb", None, rep("pay the "),
        find_all(lures.BEC_PAYMENT)),
    Row(f"{LU}:BEC_HUSH", "the writer cannot be reached or asks for secrecy",
        "folded subject + body of a public mailbox's letter to an organization", LINEAR,
        "RE2 prefilter", "\\b-led literals, at most 40 characters of the sentence between",
        None, rep("in a meeting can "), find_all(lures.BEC_HUSH)),
    Row(f"{LU}:MESSENGER_CODE", "a code to enter or send", "folded subject + body", LINEAR,
        "RE2 prefilter", "\\b-led literals, at most 2 words between", None, rep("введите "),
        find_all(lures.MESSENGER_CODE)),
    Row(f"{LU}:BEC_PRESS", "today, now, within the hour",
        "the subject, and each sentence (of the first 20,000 characters) that BEC_PAYMENT "
        "matches, when BEC_PAYMENT and BEC_HUSH matched", LINEAR,
        "RE2 prefilter", "\\b-led literals, bounded digits", None, rep("by 1 "),
        find_all(lures.BEC_PRESS)),
    Row(f"{LU}:BEC_SECRET", "keep this between us, strictly confidential, никому не говори",
        "folded subject + body, when BEC_PAYMENT and BEC_HUSH matched", LINEAR,
        "RE2 prefilter", "\\b-led literals, at most 1 word between", None, rep("keep it "),
        find_all(lures.BEC_SECRET)),
    Row(f"{LU}:TASK_JOB", "a job offered (remote, part-time; подработка)",
        "folded subject + body of a public mailbox's letter", LINEAR, "RE2 prefilter",
        "\\b-led literals, word tails bounded {0,40}, at most 3 words between", None,
        rep("remote "), find_all(lures.TASK_JOB)),
    Row(f"{LU}:DOCUMENT_LURE", "a document or a statement to review or sign, the reader's "
        "pay changing (salary adjustment, индексация зарплаты)", "folded subject + body "
        "(20,000 chars: DOCUMENT_READ) of a letter with a calendar invitation or a short one "
        "with an image or a document", LINEAR, "RE2 alone (its own pattern)",
        "literal-led alternatives, at most 3 words between; kept out of the shared RE2 set (it "
        "grew the set's automaton past SET_MEMORY): its own RE2 pattern (lures._DOCUMENT_RE2, "
        "max_mem 16 MiB, word tails unbounded), Python's engine only to confirm a match ending "
        "beside a non-ASCII letter (\\b), at most 8 a text", None, rep("review a b c "),
        lambda text: lures.find_document(text, 2), finditer(lures.DOCUMENT_LURE)),
    Row(f"{LU}:TASK_PAY", "pay by the day, paid out daily or the same day, or by the piece "
        "($2 per photo, оплата за каждое фото)",
        "folded subject + body, when TASK_JOB matched", LINEAR, "RE2 prefilter",
        "an amount of at most 13 characters, then at most 30 of the sentence", None,
        rep("$1 "), find_all(lures.TASK_PAY)),
    Row(f"{LU}:TASK_RANGE", "pay as a range of amounts ($200-$800, от 2 000 до 5 000 руб.)",
        "folded subject + body, when TASK_PAY matched", LINEAR, "RE2 prefilter",
        "digit runs bounded {0,9}, one separator between two amounts", None, rep("$1-"),
        find_all(lures.TASK_RANGE)),
    Row(f"{LU}:TASK_EASY", "minutes a day, from a phone, no experience",
        "folded subject + body, when TASK_PAY matched", LINEAR, "RE2 prefilter",
        "\\b-led literals, bounded digits", None, rep("1-1 "), find_all(lures.TASK_EASY)),
    Row(f"{LU}:TASK_WORK", "the task scams' work: rating, liking, reviewing products or apps",
        "folded subject + body, when TASK_PAY matched and TASK_RANGE did not", LINEAR,
        "RE2 prefilter", "\\b-led literals, at most 3 words between", None, rep("rate "),
        find_all(lures.TASK_WORK)),
    Row(f"{LU}:MESSENGER", "a messenger named (Telegram, WhatsApp, Viber)",
        "120 characters either side of a MESSENGER_CODE match, its sentence; the first 20,000 "
        "of folded subject + body when TASK_EASY matched", LINEAR, AS_IS,
        "\\b-led literals, one word tail", None, rep("телеграм"), find_all(lures.MESSENGER)),
    Row("pochta/antispam/signs/protected.py:_DIGITS", "digit runs in a host label",
        "host labels (63 chars)", LINEAR, AS_IS, "one bounded class", "host_labels", rep("1a"),
        sub(protected._DIGITS)),
    # -- shingles/extract.py ----------------------------------------------------------------
    Row(f"{R}:_DROPPED", "addresses and URLs in the body (dropped before shingling)",
        "normalized body (the first 100,000 chars: MAX_BODY_CHARS)",
        "quadratic before (\\S+@\\S+): any long run without a blank and without @ "
        "(\"long_line\": 12.8 s at 100 KB)",
        "rewrite: one pattern, tried at run starts only, possessive runs",
        "(?<!\\S) starts a match only at a run's start; \\S*?:// reads one run once",
        "normalized_body", lambda n: "a" * n, sub(extract._DROPPED),
        lambda t: re.sub(r"\S+@\S+", " ", t)),
    Row(f"{R}:_WORD", "words of the body", "normalized body", LINEAR, AS_IS,
        "one class, possessive runs", "normalized_body", rep("a "), findall(extract._WORD)),
    Row(f"{R}:_BRACKET_IP", "[ip] in Received", "Received fields", LINEAR, AS_IS,
        "starts at [, bounded class", "received", lambda n: "[" + "1" * n,
        search(extract._BRACKET_IP)),
    # -- auth: records and names from the sender's DNS and envelope ---------------------------
    Row(f"{SPF}:_SPF_RECORD", "an SPF record's version", "each TXT record of a name (DNS)",
        LINEAR, AS_IS, "anchored literal", None, lambda n: "v=spf1" + "x" * n,
        match(spf._SPF_RECORD)),
    Row(f"{SPF}:_LABEL", "a DNS label", "labels of a domain", LINEAR, AS_IS, "{1,63}", None,
        lambda n: "a" * n, match(spf._LABEL)),
    Row(f"{AR}:_TOKEN", "an authserv-id", "pochta's own setting", LINEAR, NOT_LETTER,
        "configuration"),
    Row(f"{AR}:_PVALUE", "a value that needs no quotes", "domains, selectors from signatures",
        LINEAR, AS_IS, "@ is outside the first class", None, lambda n: "a" * n + "@",
        fullmatch(auth_results._PVALUE)),
    Row(f"{AR}:_comment()", "line breaks in a reason", "error texts", LINEAR, AS_IS,
        "one class", None, rep("\r\n"), lambda t: re.sub(r"[\r\n\t]+", " ", t)),
    Row(f"{AR}:_tags()", "blanks in a DKIM tag value", "DKIM-Signature tags", LINEAR, AS_IS,
        "one class", None, rep(" a"), lambda t: re.sub(r"\s+", "", t)),
    Row(f"{AR}:_VERSION", "v=DMARC1 first in a record", "a DMARC record (DNS)", LINEAR, AS_IS,
        "anchored; bounded blank runs around a literal", None, lambda n: "v" + " " * n + "x",
        match(auth_results._VERSION)),
    Row(f"{AR}:_URI", "a report URI (rua=)", "one comma-separated rua value (DNS)", LINEAR,
        AS_IS, "fullmatch; the scheme class has no ':', one backtrack of the rest", None,
        lambda n: "a:" + "b" * n + " ", fullmatch(auth_results._URI)),
    # -- not letter input -------------------------------------------------------------------
    *(
        Row(key, what, "rules file", LINEAR, NOT_LETTER, "configuration")
        for key, what in [
            ("pochta/antispam/rules/expr.py:_SIGN_NAME", "a sign name"),
            ("pochta/antispam/rules/expr.py:_unquote()", "escapes in a string literal"),
            ("pochta/antispam/rules/ruleset.py:_SYMBOL", "a symbol"),
            ("pochta/antispam/rules/ruleset.py:_GROUP", "a group"),
            ("pochta/antispam/rules/ruleset.py:_FEATURE", "a feature name"),
            ("pochta/antispam/rules/ruleset.py:_SHINGLE_FEATURE", "a shingle feature name"),
        ]
    ),
    *(
        Row(key, what, "antispam.trusted_forwarders", LINEAR, NOT_LETTER, "configuration")
        for key, what in [
            ("pochta/netaddr.py:_DOMAIN", "a trusted forwarder's domain"),
        ]
    ),
    *(
        Row(key, what, reads, LINEAR, NOT_LETTER, why)
        for key, what, reads, why in [
            ("pochta/antispam/model/design.py:LEAN", "a counters' column name",
             "the model's own feature names", "names pochta makes"),
            ("pochta/antispam/model/design.py:_DROPPED_STATS", "dropped counters' columns",
             "the model's own feature names", "names pochta makes"),
            ("pochta/antispam/model/design.py:MONOTONE", "monotone feature names",
             "the model's own feature names", "names pochta makes"),
            *((f"pochta/antispam/model/design.py:MONOTONE ({i})", "monotone feature names",
               "the model's own feature names", "names pochta makes")
              for i in range(2, len(design.MONOTONE))),  # the first is LEAN, named
            ("pochta/antispam/model/explain.py:_LEAN", "a counters' column name",
             "the model's own feature names", "names pochta makes"),
            ("pochta/antispam/model/explain.py:_STAT", "a counters' column name",
             "the model's own feature names", "names pochta makes"),
            ("pochta/antispam/model/explain.py:_AUTH", "an auth feature name",
             "the model's own feature names", "names pochta makes"),
            ("pochta_factory/training.py:_BRACKET_IP", "[ip] in Received",
             "corpus letters at training", "training only"),
            ("pochta_factory/training.py:_RETURN_PATH", "Return-Path",
             "corpus letters at training", "training only"),
            ("pochta_factory/corpus.py:_MEMBER", "a corpus file name",
             "the npm tarball", "corpus only"),
            ("pochta_factory/corpus.py:_FROM_LINE", "the mbox From line",
             "corpus letters", "corpus only"),
            ("pochta_factory/corpus.py:_version_key()", "version parts",
             "npm metadata", "corpus only"),
            ("pochta_factory/corpus.py:_latest()", "a version string",
             "npm metadata", "corpus only"),
            ("pochta/antispam/shingles/counters/buckets.py:_WINDOW", "a window (24h)",
             "API parameter (service token)", "fullmatch of a short token; linear"),
            ("pochta/blobs/keys.py:_KEY_RE", "a blob key", "API path", "fullmatch {64}"),
            ("pochta/antispam/model/store/__init__.py:_VERSION", "a model version's name",
             "the CLI's argument, the store's folder names", "fullmatch {0,63}"),
            ("pochta/blobs/valkyrie/names.py:_BLOB_RE", "a blob file name", "the node's own files",
             "fullmatch, bounded"),
            ("pochta/server/api/blobs.py:_RANGE", "an HTTP Range header", "HTTP clients",
             "fullmatch; \\d* then - once"),
            ("pochta/server/api/errors.py:_template()", "a path of the API's OpenAPI document",
             "the request's URL path (HTTP clients), for a 405's Allow",
             "fullmatch; [^/]+ per segment between literal slashes: one way to match; the "
             "templates are the API's own (cached)"),
            ("pochta/server/web/i18n.py:_RANGE", "one language of Accept-Language",
             "a browser's header, cut to 512 characters and 32 items, each stripped",
             "fullmatch; subtags split by '-', the q part by ';': one way to match"),
            ("pochta/server/api/limits.py:JsonDepth._OUTSIDE", "a bracket or a quote",
             "a JSON request body, piece by piece, up to its limit",
             "one character class, search from a position that only moves forward"),
            ("pochta/server/api/limits.py:JsonDepth._INSIDE", "a quote or a backslash in a string",
             "a JSON request body, piece by piece, up to its limit",
             "one character class, search from a position that only moves forward"),
            ("pochta/server/smtp.py:PLAIN_PATH",
             "a plain path of MAIL FROM / RCPT TO (`<local@domain>` of dot-atoms, or `<>`)",
             "an SMTP command line (at most aiosmtpd's command size limit)",
             "match at the start only; runs of one class each separated by a literal `.` or `@`"
             " that the classes exclude: one way to match"),
            ("pochta/server/imapread.py:_APPEND", "an APPEND command (its letter is spooled)",
             "an IMAP command line (at most imap.line_length_limit)",
             "match; {1,64} of one class without the space, then a literal word"),
            ("pochta/server/imapread.py:_APPEND_TO_LITERAL",
             "an APPEND whose first literal is its folder's name", "an IMAP command line",
             "match; {1,64} of one class, a literal word, \\d{1,19} between braces, then"
             " \\r?\\n\\Z: one way to match"),
            ("pochta/server/imapproto.py:LITERAL", "a literal's {n} or {n+} at a line's end",
             "an IMAP command line (at most imap.line_length_limit)",
             "search; \\d{1,19} between literal braces, then \\r?\\n\\Z: one way to match"),
            ("pochta/server/imapproto.py:_NO_ARGS", "UNSELECT / NAMESPACE with a tag",
             "an IMAP command", "match; one character class, then a literal word"),
            ("pochta/server/imapproto.py:_NUMBER",
             "a one-letter sequence set (a FETCH of one letter, without pymap's parser)",
             "a FETCH command's sequence set", "fullmatch; a digit, then {0,18} of one class"),
            ("pochta/server/imapproto.py:_TAG", "a command's tag", "an IMAP command",
             "match, {1,64} of one class"),
            ("pochta/server/imapproto.py:_FETCH", "a FETCH's tag, UID, sequence set, attributes",
             "an IMAP command",
             "match; each class excludes the character that ends it (space, CR, LF): one way"),
            ("pochta/server/imapproto.py:_QUOTABLE", "a string that can be quoted",
             "header values and names sent to IMAP clients", "fullmatch, {0,1000} of one class"),
        ]
    ),
    *(
        Row(key, what, reads, LINEAR, AS_IS, why)
        for key, what, reads, why in [
            ("pochta/server/web/sanitize.py:_SAFE_VALUE", "a safe CSS value",
             "a letter's style declaration value, at most 300 characters (webmail)",
             "fullmatch of one character class, starred: one pass"),
            ("pochta/server/web/sanitize.py:_DATA_IMAGE", "an inline image (data: URL)",
             "a letter's img src (webmail)",
             "fullmatch: a literal, then one character class starred: one pass"),
        ]
    ),
]
# fmt: on


# -- the inputs of the corpus ----------------------------------------------------------------
_STYLE = re.compile(r"style\s*=\s*\"([^\"]*)\"", re.IGNORECASE)


def corpus_inputs(letters: Iterable[corpus.CorpusLetter]) -> tuple[int, dict[str, list[Any]]]:
    """Per input kind, every piece of every letter that a pattern reads in pochta."""
    out: dict[str, list[Any]] = {}

    def add(name: str, *values: Any) -> None:
        out.setdefault(name, []).extend(v for v in values if v is not None)

    count = 0
    for item in letters:
        count += 1
        letter = parse(item.raw)
        body = wording.fold(letter.all_text)
        subject_folded = wording.fold(letter.subject)
        head = wording.fold(letter.text[:600])
        add("raw_lines", *item.raw.split(b"\n"))
        add("subject", letter.subject)
        add("subject_folded", subject_folded)
        add("all_text", letter.all_text)
        add("body", body)
        add("offer", subject_folded + "\n" + body)
        add("head", head)
        add("first_line", *wording.first_lines(head, 1))
        add("visible", letter.text)
        add("plain", letter.plain_text)
        add("normalized_body", normalize.text(letter.text))
        add("html_text", letter.html.text if letter.html is not None else None)
        add("styles", *_STYLE.findall(letter.body_html or ""))
        add("html", letter.body_html[: html_mod.MAX_SOURCE] if letter.body_html else None)
        add("display_name", letter.from_name)
        add("display_name_lower", letter.from_name.lower())
        add("reply_to", letter.header("reply-to"))
        add("message_id", letter.header("message-id"))
        received = letter.headers("received")
        add("received", *received)
        add("received_hosts", *checks.received_hosts(received))
        add("content_type", *letter.headers("content-type"))
        add("header_values", *(v for _, v in letter.fields))
        add("address_fields", *(letter.header(n) for n in ("from", "to", "cc")))
        links = letter.links
        add("link_texts", *(link.text for link in links if link.text))
        add("link_urls", *(link.href for link in links))
        add("url_paths", *(link.url.partition("//")[2].partition("/")[2] for link in links))
        add("host_labels", *(x for link in links for x in link.host.split(".") if link.host))
    return count, out


# -- measuring -------------------------------------------------------------------------------
MIN_CPU = 0.05  # s: a measurement shorter than this is repeated (the CPU clock is coarse)


def _repeated(fn: Callable[[], object], budget: float) -> float:
    """CPU seconds of one ``fn()``, from enough repetitions to take MIN_CPU; inf when one
    call runs over ``budget``."""
    t = min(cpu(fn, budget) for _ in range(2))
    if math.isinf(t) or t >= MIN_CPU:
        return t
    times = max(2, int(MIN_CPU / max(t, 1e-5)))
    return cpu(lambda: [fn() for _ in range(times)], budget * times) / times


def normal_us(run: Run, texts: list[Any], letters: int) -> float:
    for text in texts[:50]:  # warm caches (the RE2 programs, lru caches)
        run(text)

    def all_of_them() -> None:
        for text in texts:
            run(text)

    return round(_repeated(all_of_them, math.inf) * 1e6 / letters, 2)


def crafted_ms(run: Run, text: Any, budget: float) -> float | None:
    t = _repeated(lambda: run(text), budget)
    return None if math.isinf(t) else round(t * 1000, 3)


def measure(rows: list[Row], args: argparse.Namespace) -> dict[str, Any]:
    groups = ["easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1", "spam-2"]
    letters = list(corpus.unsealed(groups))  # a sealed letter is never read
    if args.quick:
        letters = letters[:: max(1, len(letters) // 300)][:300]
    count, inputs = corpus_inputs(letters)
    sizes = [1_000, 10_000] if args.quick else [10_000, 100_000]
    for row in rows:
        runs = {"before": row.before, "now": row.now, "proposed": row.proposed}
        runs = {k: v for k, v in runs.items() if v is not None}
        if not runs:
            continue
        if row.input is not None:
            row.results["normal_us_per_letter"] = {
                k: normal_us(run, inputs[row.input], count) for k, run in runs.items()
            }
        if row.crafted is not None:
            row.results["crafted_ms"] = {
                str(n): {k: crafted_ms(run, row.crafted(n), args.budget) for k, run in runs.items()}
                for n in sizes
            }
        note(f"{row.key:70} {json.dumps(row.results, ensure_ascii=False)}")
    return {"letters": count, "sizes": sizes}


# -- the check: every regex of src/pochta has a row ------------------------------------------
_CALLS = {"compile", "search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer"}


def found_in_source(root: Path = SRC) -> list[str]:
    """``path:name`` of every regex in src/pochta: a call of re.compile / re.search ... or of
    wording's _rx, named by the variable it is assigned to outside functions (``NAME[key]`` in
    a dict), else by the functions around it (``f()``, then ``f() (2)`` ...)."""
    keys: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = str(path.relative_to(root))
        seen: dict[str, int] = {}

        def visit(
            node: ast.AST, names: list[str], rel: str = rel, seen: dict[str, int] = seen
        ) -> None:
            for child in ast.iter_child_nodes(node):
                inner = names
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    inner = [*names, child.name + "()"]
                elif isinstance(child, ast.ClassDef):
                    inner = [*names, child.name]
                elif isinstance(child, ast.Assign | ast.AnnAssign) and not any(
                    n.endswith("()") for n in names
                ):  # a variable names its regex outside functions only
                    target = child.targets[0] if isinstance(child, ast.Assign) else child.target
                    if isinstance(target, ast.Name):
                        inner = [*names, target.id]
                    elif isinstance(target, ast.Attribute):
                        inner = [*names, target.attr]
                elif isinstance(child, ast.Dict) and names:
                    for k, v in zip(child.keys, child.values, strict=True):
                        if isinstance(k, ast.Constant) and _is_regex(v):
                            keys.append(f"{rel}:{names[-1]}[{k.value}]")
                    continue
                if isinstance(child, ast.Call) and _is_regex(child):
                    name = ".".join(inner) or "<module>"
                    seen[name] = seen.get(name, 0) + 1
                    keys.append(f"{rel}:{name}" + (f" ({seen[name]})" if seen[name] > 1 else ""))
                    continue
                visit(child, inner)

        visit(ast.parse(path.read_text()), [])
    return keys


def _is_regex(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Name):
        return f.id == "_rx"
    return (
        isinstance(f, ast.Attribute)
        and isinstance(f.value, ast.Name)
        and f.value.id == "re"
        and f.attr in _CALLS
    )


def check(doc: Path | None) -> list[str]:
    """What is missing: regexes of src/pochta without a row, rows without a regex, and rows
    the doc does not show."""
    found = set(found_in_source())
    keys = {row.key for row in ROWS}
    problems = [f"no row for {k}" for k in sorted(found - keys)]
    problems += [f"row without a regex in src: {k}" for k in sorted(keys - found)]
    if doc is not None:
        text = doc.read_text()
        problems += [f"not in {doc}: {k}" for k in sorted(keys) if f"`{k}`" not in text]
    return problems


# -- the markdown table ----------------------------------------------------------------------
BEGIN, END = "<!-- regex table: benchmarks/regex_table.py --markdown -->", "<!-- end of table -->"


def _cost(values: dict[str, Any] | None) -> str:
    if not values:
        return ""

    def one(v: float | None) -> str:
        return "stopped" if v is None else f"{v:g}"

    order = [k for k in ("before", "now", "proposed") if k in values]
    if order == ["now"]:
        return one(values["now"])
    return " → ".join(one(values[k]) for k in order) + (
        " (proposed)" if "proposed" in values else ""
    )


def markdown(rows: list[Row], meta: dict[str, Any]) -> str:
    small, big = (str(n) for n in meta["sizes"])
    head = (
        f"| pattern | matches | reads | risk (before) | choice | why | normal µs/letter | "
        f"crafted ms @{int(small):,} | crafted ms @{int(big):,} |\n" + "|---" * 9 + "|\n"
    )
    lines = []
    for row in rows:
        crafted = row.results.get("crafted_ms", {})
        cells = [
            f"`{row.key}`", row.matches, row.reads, row.risk, row.choice, row.why,
            _cost(row.results.get("normal_us_per_letter")), _cost(crafted.get(small)),
            _cost(crafted.get(big)),
        ]  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return head + "\n".join(lines) + "\n"


def write_markdown(doc: Path, table: str) -> None:
    text = doc.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    doc.write_text(text[:start] + "\n" + table + text[end:])


_CALLABLES = ("crafted", "now", "before", "proposed")


def main(args: argparse.Namespace) -> None:
    if args.check is not None:
        problems = check(args.check)
        for p in problems:
            print(p, file=sys.stderr)
        sys.exit(1 if problems else 0)
    meta = measure(ROWS, args)
    result: dict[str, Any] = {
        "benchmark": "regex_table",
        "machine": machine(Path(".")),
        "budget_s": args.budget,
        **meta,
        "unlisted": check(None),
        "rows": [{k: v for k, v in row.__dict__.items() if k not in _CALLABLES} for row in ROWS],
    }
    if args.markdown is not None:
        write_markdown(args.markdown, markdown(ROWS, meta))
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="300 letters, 1,000 and 10,000 chars")
    p.add_argument("--budget", type=float, default=5.0, help="CPU seconds per crafted run")
    p.add_argument("--markdown", type=Path, help="rewrite the table in this file")
    p.add_argument("--check", type=Path, help="only check that every regex is listed here")
    return p.parse_args()


if __name__ == "__main__":
    main(_args())
