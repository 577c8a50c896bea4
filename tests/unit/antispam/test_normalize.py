"""Normalization of each kind of shingle value (pochta.mime.normalize)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.mime import normalize


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("ＨＥＬＬＯ", "hello"),  # NFKC: full-width letters
        ("Straße", "strasse"),  # case folding, not just lower()
        ("ﬁnal", "final"),  # NFKC: the ligature
        ("Ⅻ", "xii"),  # NFKC: the Roman numeral
        ("a\t\n b\u00a0\u2003c  ", "a b c"),  # every whitespace run is one space
        ("free\u200bmoney\u00ad!", "freemoney!"),  # zero-width space and soft hyphen go
        ("\u202eevil", "evil"),  # bidi override goes
        ("ПРИВЕТ Мир", "привет мир"),
    ],
)
def test_text_is_nfkc_casefolded_with_whitespace_collapsed(raw: str, expected: str) -> None:
    assert normalize.text(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Re: Hello", "hello"),
        ("RE: re:Hello", "hello"),
        ("Fwd: Hello", "hello"),
        ("FW: Hello", "hello"),
        ("Fw : Hello", "hello"),
        ("Re[2]: Hello", "hello"),
        ("Re(3): Hello", "hello"),
        ("Ответ: Hello", "hello"),
        ("ОТВ: Re: Fwd:   Hello   world", "hello world"),
        ("AW: WG: Termin", "termin"),
        ("SV: Möte", "möte"),
        ("[list-name] Re: Hello", "[list-name] hello"),
        ("Real: estate", "real: estate"),  # a word that only starts like a prefix stays
        ("Fwdx: y", "fwdx: y"),
        ("Re:", ""),
        ("Hello Re: there", "hello re: there"),  # only leading prefixes
        ("ＲＥ： Hello", "hello"),  # full-width, after NFKC
    ],
)
def test_subject_drops_reply_and_forward_prefixes(raw: str, expected: str) -> None:
    assert normalize.subject(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("EXAMPLE.com.", "example.com"),
        ("Пример.РФ", "xn--e1afmkfd.xn--p1ai"),  # IDN -> punycode
        ("münchen.DE", "xn--mnchen-3ya.de"),
        ("xn--e1afmkfd.xn--p1ai", "xn--e1afmkfd.xn--p1ai"),
        ("ｅｘａｍｐｌｅ.com", "example.com"),  # full-width letters
        ("[192.0.2.1]", "192.0.2.1"),  # an address literal
        ("192.0.2.1", "192.0.2.1"),
        ("bad domain", None),
        ("a..b", None),
        ("", None),
        ("evil.com/path", None),
    ],
)
def test_domain(raw: str, expected: str | None) -> None:
    assert normalize.domain(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a.b.example.co.uk", "example.co.uk"),  # ICANN suffix of two labels
        ("mail.example.com", "example.com"),
        ("alice.github.io", "alice.github.io"),  # a private suffix counts: users are apart
        ("www.пример.рф", "xn--e1afmkfd.xn--p1ai"),
        ("a.b.kawasaki.jp", "a.b.kawasaki.jp"),  # the wildcard rule *.kawasaki.jp
        ("sub.city.kawasaki.jp", "city.kawasaki.jp"),  # ... and its exception
        ("198.51.100.7", "198.51.100.7"),
        ("co.uk", "co.uk"),  # no registrable part: stays as it is
        ("localhost", "localhost"),
    ],
)
def test_registrable_domain_uses_the_public_suffix_list_offline(raw: str, expected: str) -> None:
    assert normalize.registrable(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTP://WWW.Example.COM:80/a/./b/../c?q=1#frag", ("http://www.example.com/a/c", "www.example.com")),  # noqa: E501
        ("https://example.com", ("https://example.com/", "example.com")),
        ("https://example.com:443/", ("https://example.com/", "example.com")),
        ("https://example.com:8443/x", ("https://example.com:8443/x", "example.com")),
        ("www.example.com/%7euser/%2f%41", ("http://www.example.com/~user/%2FA", "www.example.com")),  # noqa: E501
        ("https://user:pw@пример.рф/путь", ("https://xn--e1afmkfd.xn--p1ai/%D0%BF%D1%83%D1%82%D1%8C", "xn--e1afmkfd.xn--p1ai")),  # noqa: E501
        ("http://[::1]:8080/x", ("http://[::1]:8080/x", "::1")),
        ("http://192.0.2.1/login", ("http://192.0.2.1/login", "192.0.2.1")),
        ("  <https://example.com/a>  ", ("https://example.com/a", "example.com")),
        ("mailto:a@example.com", None),
        ("javascript:alert(1)", None),
        ("http://exa mple.com/", None),
        ("http://example.com:99999/", None),
        ("", None),
    ],
)  # fmt: skip
def test_url(raw: str, expected: tuple[str, str] | None) -> None:
    assert normalize.url(raw) == expected


def test_urls_differing_only_in_query_or_fragment_are_one() -> None:
    a = normalize.url("https://shop.example/offer?uid=1#top")
    b = normalize.url("https://SHOP.example/offer?uid=2")
    assert a == b


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<Vasya@Example.COM>", "vasya@example.com"),
        ("ÄÖ@münchen.de", "äö@xn--mnchen-3ya.de"),
        ("noat", None),
        ("@example.com", None),
        ("a@", None),
    ],
)
def test_address(raw: str, expected: str | None) -> None:
    assert normalize.address(raw) == expected


@pytest.mark.parametrize(
    ("raw", "ip", "network"),
    [
        ("198.51.100.7", "198.51.100.7", "198.51.100.0/24"),
        ("::ffff:198.51.100.7", "198.51.100.7", "198.51.100.0/24"),  # IPv4-mapped
        ("2001:DB8:1:2::5", "2001:db8:1:2::5", "2001:db8:1::/48"),
        ("[IPv6:2001:db8::1]", "2001:db8::1", "2001:db8::/48"),
        ("not an ip", None, None),
    ],
)
def test_ip_and_network(raw: str, ip: str | None, network: str | None) -> None:
    assert normalize.ip(raw) == ip
    assert normalize.network(raw) == network


@settings(deadline=None)
@given(st.text())
def test_normalizers_never_raise(value: str) -> None:
    normalize.text(value)
    normalize.subject(value)
    normalize.domain(value)
    normalize.registrable(value)
    normalize.address(value)
    normalize.url(value)
    normalize.ip(value)


@settings(deadline=None)
@given(st.text())
def test_text_is_idempotent(value: str) -> None:
    once = normalize.text(value)
    assert normalize.text(once) == once


TEXT_PIECES = ["A", "b", " ", "\t\n", "\u00a0", "\u200b", "\u00ad", "Straße", "K", "ﬁ", "Ⅻ", "!"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(TEXT_PIECES), max_size=12).map("".join))
def test_text_deletes_format_characters_as_the_whole_table_does(raw: str) -> None:
    """An ASCII text skips the format characters' table (none is ASCII): the same text."""
    table = normalize._format_chars()
    assert min(table) >= 128
    s = unicodedata.normalize("NFKC", raw).casefold().translate(table)
    assert normalize.text(raw) == " ".join(s.split())


def test_the_format_class_is_every_format_character() -> None:
    """text skips the format characters' table for a text the class finds none in: the class
    is exactly the table's characters."""
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    found = set(normalize._format_class().findall(every))
    assert found == {chr(c) for c in normalize._format_chars()}


_LABEL = st.text(alphabet="aZ09-_.xn", max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=40),
        st.lists(_LABEL, max_size=5).map(".".join),
        st.builds("xn--{}.{}".format, _LABEL, _LABEL),
        st.text(alphabet="ab-", min_size=60, max_size=70),
    )
)
def test_an_ascii_name_is_the_name_idna_gives(name: str) -> None:
    """The ASCII fast path of ``domain`` gives what IDNA 2008 / the older codec give."""
    s = unicodedata.normalize("NFKC", name.strip()).rstrip(".").strip()
    assert s.lower() == normalize._by_idna(s).lower()


def test_ascii_names_through_domain() -> None:
    assert normalize.domain("Mail.Example.COM.") == "mail.example.com"
    assert normalize.domain("xn--MNCHEN-3YA.de") == "xn--mnchen-3ya.de"
    assert normalize.domain("a_b.example") == "a_b.example"
    assert normalize.domain("a..b") is None
    assert normalize.domain("münchen.de") == "xn--mnchen-3ya.de"


_ADDRESS_PIECES = [
    "a", "B", "@", "<", ">", '"', " ", ".", "example.org", "EXAMPLE.org", "[192.0.2.1]",
    "0x7f.1", "127.0.0.1", "2130706433", "::1", "IPv6:", "пример.рф", "ё", "\u00ad", "x" * 300,
    "::ffff:", "2001:db8::", "10.1.2.3",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_ADDRESS_PIECES), max_size=8).map("".join))
def test_remembered_addresses_and_ip_hosts_are_the_ones_worked_out(value: str) -> None:
    """``address``, ``is_ip_host``, ``ip`` and ``network`` give what working the value out
    gives, asked twice, for values short enough to be remembered and longer ones (not
    remembered)."""
    for f in (normalize.address, normalize.is_ip_host, normalize.ip, normalize.network):
        for _ in range(2):
            assert f(value) == f.work_out(value)


def test_long_values_are_not_remembered() -> None:
    long_value = "a@" + "b" * normalize.MAX_REMEMBERED + ".example.org"
    before = normalize.address.held(), normalize.is_ip_host.held()
    normalize.address(long_value)
    normalize.is_ip_host(long_value)
    assert (normalize.address.held(), normalize.is_ip_host.held()) == before
    long_ip = " " * normalize.MAX_REMEMBERED + "192.0.2.1"
    before = normalize.ip.held(), normalize.network.held()
    assert normalize.ip(long_ip) == "192.0.2.1"
    assert normalize.network(long_ip) == "192.0.2.0/24"
    assert (normalize.ip.held(), normalize.network.held()) == before
    for f in (normalize.address, normalize.is_ip_host, normalize.ip, normalize.network):
        assert (f.size, f.longest) == (normalize.REMEMBERED, normalize.MAX_REMEMBERED)


def test_a_remembered_function_keeps_a_bounded_number_of_short_answers() -> None:
    calls: list[str] = []

    @normalize.remembered(size=3, longest=4)
    def upper(value: str) -> str:
        calls.append(value)
        return value.upper()

    assert upper.__name__ == "upper"
    assert [upper(v) for v in ("ab", "ab", "abcd", "abcde", "abcde")] == [
        "AB", "AB", "ABCD", "ABCDE", "ABCDE",
    ]  # fmt: skip
    assert calls == ["ab", "abcd", "abcde", "abcde"]  # the 5-character value each time
    assert upper.held() == 2
    for v in ("c", "d", "e", "f"):
        upper(v)
    assert upper.held() == 3  # the 3 most recently used
    calls.clear()
    upper("f")
    upper("ab")
    assert calls == ["ab"]  # "f" was remembered, "ab" was not any more


def test_domains_and_link_signs_share_one_public_suffix_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parsing the list costs ~0.1 s: a process builds it once (``warm``, before a worker's
    first letter), for the registrable domains and the link signs' TLD look alike."""
    from pochta.antispam.signs import links

    made: list[object] = []
    real = normalize.PublicSuffixList

    class Counted(real):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            made.append(self)
            super().__init__()

    monkeypatch.setattr(normalize, "PublicSuffixList", Counted)
    normalize.public_suffixes.cache_clear()
    links.is_tld.cache_clear()
    try:
        normalize.warm()
        assert len(made) == 1
        assert normalize.registrable("mail.example.co.uk") == "example.co.uk"
        assert links.is_tld("com") and links.is_tld("xn--p1ai") and not links.is_tld("example")
        assert normalize.text("free\u200bmoney") == "freemoney"
        assert len(made) == 1
    finally:
        normalize.public_suffixes.cache_clear()
        links.is_tld.cache_clear()
