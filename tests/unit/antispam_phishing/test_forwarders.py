"""Trusted forwarders (``antispam.trusted_forwarders``, issue 28): a letter that came through a
forwarding service the installation lists is judged by the hop before it. An address-masking
forwarder writes its own address in From and the sender's into the display name (hard-ham
00204 came so through sneakemail.com); a plain forwarder rewrites the Return-Path to its own.
Without the setting, or when the trusted hop is only what the sender wrote, nothing changes."""

from __future__ import annotations

import ipaddress

import pytest

from pochta.antispam.signs import checks
from pochta.antispam.signs.forwarders import Forwarders, hop, origin
from pochta.antispam.signs.protected import default as default_protected
from pochta.antispam.verdict import Analyzer, Scanner
from pochta.app import analysis_settings
from pochta.config import load_settings
from pochta.errors import ConfigError
from pochta.mailbox.intake import make_analyzer
from pochta.mime.letter import parse
from pochta.types import Envelope

MASKER = "masker.example"
READER = Envelope("198.51.100.7", "ticket_b2oa@masker.example", ("nina@pochta.test",))

# pochta's own trace on top: the forwarder's host handed the letter to pochta
TOP = (
    "Received: from mail.masker.example ([198.51.100.7]) by mx.pochta.test (pochta) with ESMTP;"
    " Mon, 02 Jun 2025 10:00:05 +0000\r\n"
)
# written by the forwarder: where the letter came from before it
FORWARDER = (
    "Received: from lists.devweekly.net (HELO 10.1.1.16) (192.0.2.101)\r\n"
    "  by mail.masker.example with SMTP; 2 Jun 2025 10:00:01 -0000\r\n"
)


def masked(received: str, name: str = "Dev Weekly news@devweekly.net [nina/devweekly]",
           text: str = "") -> bytes:  # fmt: skip
    """A newsletter through the masking forwarder: its address in From, the sender's written
    into the display name and the Reply-To's."""
    body = text or (
        "This week: Struts 1.1, should you upgrade? JavaServer Faces tech talk.\r\n"
        "Read it online: http://lists.devweekly.net/news42.html\r\n"
    )
    return (
        received + "Return-Path: <ticket_b2oa@masker.example>\r\n"
        f'From: "{name}" <ticket_jceh@masker.example>\r\n'
        f'Reply-To: "{name}" <ticket_a79s@masker.example>\r\n'
        "To: nina@pochta.test\r\n"
        "Subject: Struts 1.1 article, JavaServer Faces tech talk\r\n"
        "Date: Mon, 02 Jun 2025 10:00:00 +0000\r\n"
        "Message-ID: <964551971@devweekly.net>\r\n"
        "\r\n" + body
    ).encode()


RUSSIAN = (
    "В этом выпуске: как перейти на Python 3.13 и что нового в PostgreSQL 17.\r\n"
    "Читать на сайте: http://lists.devweekly.net/vypusk-42.html\r\n"
)

TRUSTED = Forwarders.parse([MASKER])
NAME_SIGNS = {"PHISH_DISPLAY_NAME_ADDRESS", "PHISH_REPLY_TO_MISMATCH"}


def symbols(signs: object) -> set[str]:
    return {s.symbol for s in signs}  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", ["", RUSSIAN])
def test_a_masking_forwarders_letter_is_read_from_the_hop_before_it(text: str) -> None:
    letter = parse(masked(TOP + FORWARDER, text=text))
    assert symbols(checks.find(letter, READER).signs) >= NAME_SIGNS  # as before: not listed
    found = checks.find(letter, READER, forwarders=TRUSTED)
    assert not symbols(found.signs) & NAME_SIGNS
    # it rests on the From domain (the forwarder's): withheld, shown again when DMARC shows it
    # forged
    assert symbols(found.withheld) >= NAME_SIGNS


def test_the_decision_files_the_forwarded_newsletter_as_phishing_only_without_the_setting() -> None:
    raw = masked(TOP + FORWARDER)
    rules_only = Scanner(model=None)
    assert rules_only.decide(Analyzer().analyze(parse(raw), READER)).label == "phishing"
    trusted = Analyzer(forwarders=TRUSTED).analyze(parse(raw), READER)
    assert rules_only.decide(trusted).label != "phishing"


def test_a_display_name_of_another_party_than_the_origin_still_counts() -> None:
    """The forwarder says where the letter came from; a name that is not that party's is
    still another party's address."""
    raw = masked(TOP + FORWARDER, name="PayPal service@paypal.com [nina/paypal]")
    assert "PHISH_DISPLAY_NAME_ADDRESS" in symbols(
        checks.find(parse(raw), READER, forwarders=TRUSTED).signs
    )


def test_a_forwarders_hop_the_sender_wrote_is_not_read() -> None:
    """The letter came straight from a stranger's host: the forwarder's field below pochta's
    own is the sender's writing."""
    stranger = (
        "Received: from bulk.stranger.example ([203.0.113.50]) by mx.pochta.test (pochta)"
        " with ESMTP; Mon, 02 Jun 2025 10:00:05 +0000\r\n"
    )
    raw = masked(stranger + FORWARDER.replace("lists.devweekly.net", "mta.devweekly.net"))
    envelope = Envelope("203.0.113.50", "ticket_b2oa@masker.example", ("nina@pochta.test",))
    assert origin(parse(raw).headers("received"), TRUSTED) is None
    assert symbols(checks.find(parse(raw), envelope, forwarders=TRUSTED).signs) >= NAME_SIGNS


def test_a_network_entry_trusts_the_forwarders_address_not_its_helo() -> None:
    by_network = Forwarders.parse(["198.51.100.0/24"])
    letter = parse(masked(TOP + FORWARDER))
    assert origin(letter.headers("received"), by_network) is not None
    # the same HELO from another address: a name only the client wrote, no listed address
    helo_only = TOP.replace("198.51.100.7", "203.0.113.50")
    assert origin(parse(masked(helo_only + FORWARDER)).headers("received"), by_network) is None
    # ... which a domain entry, matched against the HELO pochta wrote, would trust: the
    # setting's description says so
    assert origin(parse(masked(helo_only + FORWARDER)).headers("received"), TRUSTED) is not None


def test_local_hops_and_the_users_own_provider_are_walked_past() -> None:
    """Hops on the receiving host (loopback, private addresses) and a listed mailbox provider
    the letter was fetched from lead down to the forwarder's field."""
    fetched = (
        "Received: from localhost (localhost.localdomain [127.0.0.1]) by home.pochta.test;"
        " Mon, 02 Jun 2025 10:01:00 +0000\r\n"
        "Received: from imap.provider.example [192.0.2.86] by localhost with IMAP (fetchmail);"
        " Mon, 02 Jun 2025 10:00:59 +0000\r\n"
        "Received: from www.provider.example (server1.internal [10.202.2.132]) by"
        " server2.provider.example with LMTP; Mon, 02 Jun 2025 10:00:58 +0000\r\n"
        "Received: from mail.masker.example (mail.masker.example [198.51.100.7]) by"
        " www.provider.example (Postfix); Mon, 02 Jun 2025 10:00:57 +0000\r\n"
        "Received: (qmail 21231 invoked from network); 2 Jun 2025 10:00:02 -0000\r\n"
    )
    fields = parse(masked(fetched + FORWARDER)).headers("received")
    assert origin(fields, TRUSTED) is None  # the provider is not listed: nothing is read past it
    found = origin(fields, Forwarders.parse([MASKER, "provider.example"]))
    assert found is not None and found.hosts[0] == "lists.devweekly.net"


def test_a_plain_forwarders_own_return_path_is_no_mismatch() -> None:
    """A plain forwarder keeps the sender's From and rewrites the envelope sender (SRS)."""
    raw = (
        "Received: from fwd.alumni.example ([198.51.100.20]) by mx.pochta.test (pochta) with"
        " ESMTP; Mon, 02 Jun 2025 10:00:05 +0000\r\n"
        "Received: from mail.school.example ([192.0.2.44]) by fwd.alumni.example with ESMTP;"
        " Mon, 02 Jun 2025 10:00:01 +0000\r\n"
        "Return-Path: <SRS0=Hx3a=2J=school.example=office@fwd.alumni.example>\r\n"
        "From: Школа 57 <office@school.example>\r\n"
        "To: nina@alumni.example\r\n"
        "Subject: Встреча выпускников 14 июня\r\n\r\n"
        "Дорогие выпускники, встреча состоится 14 июня в 18:00 в актовом зале.\r\n"
    ).encode()
    envelope = Envelope(
        "198.51.100.20", "SRS0=Hx3a=2J=school.example=office@fwd.alumni.example",
        ("nina@pochta.test",),
    )  # fmt: skip
    letter = parse(raw)
    assert "PHISH_RETURN_PATH_MISMATCH" in symbols(checks.find(letter, envelope).signs)
    plain = Forwarders.parse(["alumni.example"])
    assert "PHISH_RETURN_PATH_MISMATCH" not in symbols(
        checks.find(letter, envelope, forwarders=plain).signs
    )
    # the From stays the sender's: a plain forwarder lends no origin to the other checks
    ctx = checks.Context(letter, default_protected(), frozenset(), forwarders=plain)
    assert not ctx.origin_party("school.example")


def test_a_received_fields_from_part() -> None:
    found = hop("from lb1.devweekly.net (HELO 192.168.1.16) (64.49.216.101)\r\n by x")
    assert found is not None
    assert found.hosts == ("lb1.devweekly.net",)
    assert found.addresses == (
        ipaddress.ip_address("192.168.1.16"),
        ipaddress.ip_address("64.49.216.101"),
    )
    assert not found.local  # one address is the world's
    assert hop("from localhost (HELO monkey) (127.0.0.1) by localhost with SMTP").local  # type: ignore[union-attr]
    assert hop("(qmail 21231 invoked from network); 4 Sep 2002") is None
    v6 = hop("from mx.example ([IPv6:2001:db8::5]) by mx.pochta.test")
    assert v6 is not None and v6.addresses == (ipaddress.ip_address("2001:db8::5"),)


def test_a_huge_received_field_costs_a_bounded_read() -> None:
    long = "from " + "a." * 200_000 + "example by mx"
    found = hop(long)  # read up to forwarders.MAX_FIELD characters: no " by " within them
    assert found is None
    fields = ["from x.example ([192.0.2.1]) by y"] * 10_000
    assert origin(fields, Forwarders.parse(["x.example"])) is None  # MAX_FIELDS read, no origin


@pytest.mark.parametrize(
    "entries",
    [["sneakemail.com", "Fastmail.FM.", "207.106.87.0/24", "2001:db8::/32", "198.51.100.7"], []],
)
def test_the_setting_takes_domains_and_networks(entries: list[str]) -> None:
    settings = load_settings(antispam={"trusted_forwarders": entries})
    config = analysis_settings(settings)
    assert config.forwarders == tuple(entries)
    analyzer = make_analyzer(config)
    assert isinstance(analyzer.forwarders, Forwarders)
    assert bool(analyzer.forwarders) is bool(entries)
    if entries:
        assert analyzer.forwarders.names("mail.sneakemail.com")
        assert analyzer.forwarders.names("x.fastmail.fm")
        assert not analyzer.forwarders.names("notsneakemail.com")
        assert analyzer.forwarders.holds(ipaddress.ip_address("207.106.87.13"))


@pytest.mark.parametrize(
    "entry", ["not a host", "sneakemail", "-bad-.example", "x" * 300 + ".com", "10.0.0.0/33"]
)
def test_the_setting_refuses_what_is_neither_a_domain_nor_a_network(entry: str) -> None:
    with pytest.raises(ConfigError, match="trusted_forwarders"):
        load_settings(antispam={"trusted_forwarders": [entry]})
    with pytest.raises(ValueError, match="neither"):
        Forwarders.parse([entry])


def test_the_setting_is_bounded() -> None:
    with pytest.raises(ConfigError, match="at most"):
        load_settings(antispam={"trusted_forwarders": [f"f{i}.example" for i in range(101)]})
