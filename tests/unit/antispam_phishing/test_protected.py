"""The protected list (data/protected.toml), look-alike detection and the shipped lists."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.antispam.signs import casefold, lookalike, protected
from pochta.antispam.signs.protected import Protected
from pochta.errors import ConfigError

P = protected.default()

REQUIRED = [
    "nalog.ru",
    "gosuslugi.ru",
    "pfr.gov.ru",
    "sfr.gov.ru",
    "sberbank.ru",
    "tinkoff.ru",
    "vtb.ru",
    "mail.ru",
    "yandex.ru",
    "paypal.com",
    "apple.com",
    "microsoft.com",
    "google.com",
]


@pytest.mark.parametrize("domain", REQUIRED)
def test_the_brief_s_organizations_are_protected(domain: str) -> None:
    assert P.owner(domain) is not None


def test_owner_covers_subdomains_and_idn() -> None:
    fns = P.owner("fcod.nalog.ru")
    assert fns is not None and fns.name == "ФНС России" and fns.kind == "government"
    assert P.owner("lkfl2.nalog.ru") is fns and P.owner("NALOG.RU.") is fns
    assert P.owner("госуслуги.рф") is P.owner("gosuslugi.ru")
    assert P.owner("nalog.ru.evil.example") is None
    assert P.owner("example.com") is None


def test_public_mail_domains_speak_for_their_users() -> None:
    assert P.owner("gmail.com") is not None
    assert P.sender_org("gmail.com") is None and P.sender_org("mail.ru") is None
    google = P.sender_org("accounts.google.com")
    assert google is not None and google.name == "Google"


@pytest.mark.parametrize(
    ("host", "target", "how"),
    [
        ("nalog.de", "nalog", "foreign_tld"),
        ("gosuslugi.com", "gosuslugi", "foreign_tld"),
        ("sberbаnk.ru", "sberbank", "confusable"),  # Cyrillic а
        ("xn--80ak6aa92e.com", "apple", "confusable"),
        ("paypa1.com", "paypal", "confusable"),
        ("rnail.ru", "mail", "confusable"),
        ("googIe.com", "google", "confusable"),
        ("sberbank-online.com", "sberbank", "embedded"),
        ("nalog-ru.com", "nalog", "embedded"),
        ("gosuslugi24.ru", "gosuslugi", "embedded"),
        ("paypalsecure.com", "paypal", "embedded"),
        ("paypal.com.verify-account.net", "paypal", "embedded"),
        ("vtb-bank.ru", "vtb", "embedded"),
        ("sberbamk.ru", "sberbank", "typo"),
        ("microsofft.com", "microsoft", "typo"),
        ("tinkof.ru", "tinkoff", "typo"),
    ],
)
def test_imitations(host: str, target: str, how: str) -> None:
    im = P.imitation(host)
    assert im is not None and (im.target, im.how) == (target, how)


@pytest.mark.parametrize(
    "host",
    [
        "example.com",
        "snapple.com",
        "applebees.com",
        "mail.com",
        "nalog.ru",
        "fcod.nalog.ru",
        "192.0.2.1",
        "habr.com",
        "kinopoisk.ru",
        "sfr.fr",
        "xn--80aswg.xn--p1ai",
        "gov-ru.com",
    ],
)
def test_not_imitations(host: str) -> None:
    assert P.imitation(host) is None


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Служба поддержки Сбербанка", "Сбербанк"),
        ("Cбербанк", "Сбербанк"),  # Latin C
        ("РayPal Support", "PayPal"),  # Cyrillic Р
        ("Налоговой инспекции", "ФНС России"),
        ("ФНС России", "ФНС России"),
        ("Портал Госуслуг", "Госуслуги"),
        ("Mail.ru", "VK (Mail.ru)"),
    ],
)
def test_named_in(text: str, name: str) -> None:
    assert name in [org.name for org in P.named_in(text)]


@pytest.mark.parametrize(
    "text", ["Иван Петров", "Pineapple shop", "mail ru", "Сбережения и вклады", ""]
)
def test_not_named_in(text: str) -> None:
    assert P.named_in(text) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[org]]\nname = 'X'\nkind = 'bank'\ndomains = []\n", "domains must not be empty"),
        ("[[org]]\nname = 'X'\nkind = 'club'\ndomains = ['x.ru']\n", "kind must be one of"),
        ("[[org]]\nname = 'X'\nkind = 'bank'\ndomains = ['not a domain']\n", "is not a domain"),
        (
            "[[org]]\nname = 'X'\nkind = 'bank'\ndomains = ['x.ru']\ncolour = 1\n",
            "unknown keys ['colour']",
        ),
        (
            "[[org]]\nname = 'X'\nkind = 'bank'\ndomains = ['x.ru']\npublic_mail = ['y.ru']\n",
            "public_mail 'y.ru' is not one of its domains",
        ),
        ("", "no [[org]] entries"),
        ("[[org]\n", "not valid TOML"),
    ],
)
def test_bad_lists_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Protected.parse(text)


def test_a_list_of_ones_own() -> None:
    own = Protected.parse(
        "[[org]]\nname = 'Acme'\nkind = 'brand'\ndomains = ['acme.example']\n"
        "names = ['Acme Corp']\n"
    )
    assert own.orgs[0].tokens == ("acme",)
    assert own.imitation("acme.evil") is not None and own.named_in("ACME CORP support")


def test_shorteners_list() -> None:
    short = protected.shorteners()
    assert {"bit.ly", "clck.ru", "tinyurl.com", "goo.gl", "t.co"} <= short
    assert protected.parse_list(["# comment", " Bit.ly  # trailing", ""]) == frozenset({"bit.ly"})


def _osa(a: str, b: str) -> int:
    """Optimal-string-alignment distance, the textbook dynamic programme (the reference)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))  # fmt: skip
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


LABELS = st.text(alphabet="abnkрсеo1l-", max_size=12)


@settings(max_examples=500, deadline=None)
@given(a=LABELS, b=LABELS, limit=st.integers(0, 4))
def test_distance_is_osa_capped_at_limit_plus_one(a: str, b: str, limit: int) -> None:
    assert lookalike.distance(a, b, limit) == min(_osa(a, b), limit + 1)


def test_lookalike_helpers() -> None:
    assert lookalike.skeleton("аррӏе") == lookalike.skeleton("apple")
    assert lookalike.skeleton("rnail") == lookalike.skeleton("mail")
    assert lookalike.skeleton("PAYPA1") == lookalike.skeleton("paypal")
    assert lookalike.mixed_script("sberbаnk") and not lookalike.mixed_script("сбербанк")
    assert lookalike.whole_script_confusable("аре")
    assert not lookalike.whole_script_confusable("банк")
    assert not lookalike.whole_script_confusable("ape")
    assert lookalike.distance("sberbank", "sberbamk") == 1
    assert lookalike.distance("sberbank", "sbrebank") == 1  # a transposition
    assert lookalike.distance("a", "abcdefg", limit=2) == 3
    assert lookalike.unicode_label("xn--80ak6aa92e") == "аррӏе"
    assert lookalike.unicode_label("xn--zz") is None
    assert lookalike.unicode_domain("xn--80ak6aa92e.com") == "аррӏе.com"


def _named_in_by_search(p: Protected, text: str) -> list[str]:
    """named_in as it was: each organization's pattern searched over the whole text."""
    s = unicodedata.normalize("NFKC", text[: protected.MAX_NAMED_TEXT])
    variants = [s, s.translate(protected._LAT_TO_CYR), s.translate(protected._CYR_TO_LAT)]
    found = [org for org, rx in p._patterns if any(rx.search(v) for v in variants)]
    sk = lookalike.skeleton(s)
    found += [org for org, rx in p._skeleton_patterns if org not in found and rx.search(sk)]
    return [org.name for org in p.orgs if org in found]


NAME_PIECES = [
    *sorted({n for org in P.orgs for n in org.names})[:60],
    "PayPaI", "Сбербанка", "Госуслуг", "Mail.Ru", "x", " ", "-", ".", "ё", "0", "_", "\n",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(NAME_PIECES), max_size=12).map("".join))
def test_named_in_reads_each_name_where_the_one_pass_found_one(text: str) -> None:
    assert [org.name for org in P.named_in(text)] == _named_in_by_search(P, text)


@pytest.mark.parametrize("text", ["Сбербанк " * 40 + "и PayPaI", "x " + "Госуслуги, " * 33, "ozon"])
def test_named_in_past_the_bound_of_positions(text: str) -> None:
    assert [org.name for org in P.named_in(text)] == _named_in_by_search(P, text)


CASE_PIECES = [
    *NAME_PIECES,
    *sorted({n.upper() for org in P.orgs for n in org.names})[:20],
    "Tınkoff", "TİNKOFF", "ᲃбербанк", "ſberbank", "paypal\u2003inc", "\x1c", "\u0307", "İ", "ı",
    "Σ", "\ud800",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(CASE_PIECES), max_size=12).map("".join))
def test_named_in_past_the_re2_prefilter(text: str) -> None:
    """RE2 skips texts that name nothing; what is named is the same, in every case form
    Python's engine takes for a name's letters (and a text RE2 cannot read)."""
    assert [org.name for org in P.named_in(text)] == _named_in_by_search(P, text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(CASE_PIECES), max_size=12).map("".join))
def test_the_names_positions_are_those_pythons_engine_finds_at_every_position(text: str) -> None:
    """Where RE2 says a name may begin, Python's engine looks, and finds every place its
    look-ahead over the whole text finds: in the text, its look-alike variants and its
    skeleton (any case form, a fold of another length, a text RE2 cannot read)."""
    for v in (text, text.translate(protected._LAT_TO_CYR), text.translate(protected._CYR_TO_LAT)):
        looked = casefold.folded(v)
        assert protected._starts(P._any_name, v, P._names_anywhere, looked) == [
            m.start() for m in P._any_name.finditer(v)
        ]
    sk = lookalike.skeleton(text)
    assert protected._starts(P._any_skeleton, sk, P._skeletons_anywhere, sk) == [
        m.start() for m in P._any_skeleton.finditer(sk)
    ]


NAMES = sorted({n for org in P.orgs for n in org.names})
HOSTILE_PIECES = st.one_of(
    st.sampled_from(CASE_PIECES),
    st.sampled_from(NAMES).map(str.swapcase),
    st.sampled_from(NAMES).map(lambda n: n.upper().replace("I", "İ").replace("S", "ſ")),
    st.sampled_from(NAMES).map(lambda n: "\u0307".join(n)),  # a fold shorter than its text
    st.text(max_size=4),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(HOSTILE_PIECES, max_size=14).map("".join))
def test_named_in_any_text_is_named_in_by_search(text: str) -> None:
    """Any characters around the names, in case forms Python's engine folds (and some it
    does not): what the places RE2 finds give is what each pattern's search finds."""
    assert [org.name for org in P.named_in(text)] == _named_in_by_search(P, text)


@pytest.mark.parametrize("many", [3, protected.STARTS_LOOKED + 1])
def test_the_names_positions_past_the_bound_of_re2_searches(many: int) -> None:
    """More places than RE2 is asked for: Python's engine reads every position, the same."""
    text = "Сбербанк " * many + "ᲃбербанк и PayPal"
    looked = casefold.folded(text)
    bounded = protected._first_look_starts(P._names_anywhere, looked)
    assert (bounded is None) == (many > protected.STARTS_LOOKED)
    assert protected._starts(P._any_name, text, P._names_anywhere, looked) == [
        m.start() for m in P._any_name.finditer(text)
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(NAME_PIECES), max_size=40).map("".join))
def test_a_remembered_answer_is_the_answer_read_again(text: str) -> None:
    """``named_in`` answers a short text from its memory as reading it gives, twice alike, and
    a caller changing the list it got changes no later answer."""
    fresh = Protected(P.orgs)
    read = fresh._named_in(text) if text else []
    first = fresh.named_in(text)
    assert first == read
    first.append(P.orgs[0])
    assert fresh.named_in(text) == read


def test_named_in_remembers_short_texts_only_and_a_bounded_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(protected, "NAMED_CACHE_SIZE", 3)
    fresh = Protected(P.orgs)
    long_text = "Сбербанк " * (protected.MAX_NAMED_CACHED // 9 + 1)
    assert [o.name for o in fresh.named_in(long_text)] == ["Сбербанк"]
    assert long_text not in fresh._named
    for i in range(10):
        assert [o.name for o in fresh.named_in(f"PayPal {i}")] == ["PayPal"]
        assert len(fresh._named) <= 3


HOST_PIECES = [
    "sberbank.ru", "online.sberbank.ru", "paypal.com", "paypal-secure.com", "shop.com",
    "shop.de", "mail.ru", "gmail.com", "192.0.2.1", "[192.0.2.1]", "example.co.uk",
    "a.example.co.uk", "xn--80asehdb.xn--p1ai", "localhost", "", "-", ".",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(HOST_PIECES), st.sampled_from(HOST_PIECES), st.text(max_size=12))
def test_same_party_remembered_is_same_party_read(a: str, b: str, noise: str) -> None:
    """A remembered answer is the one reading the two names gives, for names of the list, of
    noise, and of more than a host name's length (not remembered)."""
    fresh = Protected(P.orgs)
    for x, y in ((a, b), (b, a), (a + noise, b), (a, "x" * 300 + b)):
        read = fresh._same_party(x, y) if x and y else False
        assert fresh.same_party(x, y) == read
        assert fresh.same_party(x, y) == read


def test_same_party_remembers_a_bounded_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protected, "PARTIES_CACHE_SIZE", 3)
    fresh = Protected(P.orgs)
    for i in range(10):
        assert fresh.same_party(f"a{i}.shop.com", "shop.de")
        assert not fresh.same_party(f"a{i}.shop.com", "other.de")
        assert len(fresh._parties) <= 3
    assert fresh.same_party("online.sberbank.ru", "sberbank.ru")
    assert not fresh.same_party("x" * 300 + ".com", "gmail.com")
    assert not fresh.same_party(None, "gmail.com")
