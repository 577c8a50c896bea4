"""The personal rule (:mod:`pochta.antispam.personal`): what an account's allow / block
entries make of the installation's verdict, and what an entry may be."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pochta.antispam import personal
from pochta.antispam.auth.results import AuthResults, DkimResult, DmarcResult
from pochta.antispam.auth.spf import SpfResult
from pochta.antispam.signs.registry import SYMBOLS, Sign
from pochta.antispam.verdict import Label, Verdict
from pochta.errors import InvalidInput
from pochta.types import ListEntry


def auth(
    spf: str = "none",
    spf_domain: str = "",
    dkim: tuple[tuple[str, str], ...] = (),
    dmarc: str = "none",
) -> AuthResults:
    return AuthResults(
        SpfResult(spf, "mailfrom", f"bounce@{spf_domain}", spf_domain),  # type: ignore[arg-type]
        tuple(DkimResult(r, d, "s1") for r, d in dkim),  # type: ignore[arg-type]
        DmarcResult(dmarc, "shop.example"),  # type: ignore[arg-type]
    )


def verdict(
    label: Label = "spam",
    signs: tuple[str, ...] = (),
    a: AuthResults | None = None,
    partial: tuple[str, ...] = (),
) -> Verdict:
    return Verdict(
        label,
        0.9,
        5.0,
        [],
        [Sign(s, "", "") for s in signs],
        a if a is not None else auth(),
        {},
        partial=partial,
    )


ALLOW_BOB = ListEntry("bob@shop.example", "allow")
ALLOW_SHOP = ListEntry("shop.example", "allow")
BLOCK_SHOP = ListEntry("shop.example", "block")


# -- entries ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given_", "stored"),
    [
        ("Bob@Shop.Example", "bob@shop.example"),
        ("  shop.example. ", "shop.example"),
        ("News.Shop.CO.UK", "news.shop.co.uk"),
        ("почта@пример.рф", "почта@xn--e1afmkfd.xn--p1ai"),
        ("пример.рф", "xn--e1afmkfd.xn--p1ai"),
    ],
)
def test_an_entry_is_normalized_as_letters_are(given_: str, stored: str) -> None:
    assert personal.entry_value(given_) == stored


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "com",
        "co.uk",
        "localhost",
        "github.io",
        "192.0.2.1",
        "[192.0.2.1]",
        "bob@",
        "@shop.example",
        "bob smith@shop.example",
        "<bob@shop.example>",
        "bob@shop.example\r\nBcc: x@y.example",
        "a" * 250 + ".example",
        "b" * 65 + "@shop.example",
        "bob@com",
    ],
)
def test_a_bad_entry_is_refused_with_a_reason(bad: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        personal.entry_value(bad)
    assert exc.value.message


@given(st.text(max_size=400))
def test_any_text_is_an_entry_or_a_clear_refusal(text: str) -> None:
    try:
        value = personal.entry_value(text)
    except InvalidInput:
        return
    assert len(value) <= personal.MAX_ENTRY
    assert personal.entry_value(value) == value  # stored values are already normal


def test_candidates_go_from_the_address_to_the_registrable_domain() -> None:
    assert personal.candidates("Bob@Mail.News.Shop.co.uk") == [
        "bob@mail.news.shop.co.uk",
        "mail.news.shop.co.uk",
        "news.shop.co.uk",
        "shop.co.uk",
    ]
    assert personal.candidates("") == []
    assert personal.candidates("not an address") == []


def test_a_domain_covers_its_subdomains_and_the_most_specific_entry_wins() -> None:
    entries = [BLOCK_SHOP, ALLOW_BOB]
    assert personal.match(entries, "bob@shop.example") == ALLOW_BOB
    assert personal.match(entries, "ann@shop.example") == BLOCK_SHOP
    assert personal.match(entries, "ann@news.shop.example") == BLOCK_SHOP
    assert personal.match(entries, "ann@notshop.example") is None
    assert personal.match(
        [BLOCK_SHOP, ListEntry("news.shop.example", "allow")], "a@news.shop.example"
    )
    assert personal.match(entries, "") is None


# -- block ----------------------------------------------------------------------------------
def test_block_makes_ham_spam_and_says_so() -> None:
    mine = personal.personal(verdict("ham"), [BLOCK_SHOP], "ann@news.shop.example")
    assert mine.label == "spam" and mine.folder == "Spam"
    assert mine.header().endswith("; list=block")
    assert mine.as_dict()["list"] == {
        "action": "block",
        "entry": "shop.example",
        "from": "ann@news.shop.example",
        "applied": True,
        "reason": None,
    }


def test_block_leaves_phishing_phishing() -> None:
    mine = personal.personal(verdict("phishing"), [BLOCK_SHOP], "ann@shop.example")
    assert mine.label == "phishing"
    assert "list=block-refused:phishing" in mine.header()


def test_no_entry_leaves_the_verdict_itself() -> None:
    v = verdict("spam")
    assert personal.personal(v, [BLOCK_SHOP], "ann@other.example") is v
    assert personal.personal(v, [], "ann@shop.example") is v
    assert v.as_dict()["list"] is None and "list=" not in v.header()


# -- allow ----------------------------------------------------------------------------------
def test_an_allowed_address_makes_spam_ham_when_nothing_says_it_is_forged() -> None:
    mine = personal.personal(verdict("spam"), [ALLOW_BOB], "bob@shop.example")
    assert mine.label == "ham" and mine.folder == "Inbox"
    assert mine.header().endswith("; list=allow")


def test_an_allowed_sender_is_still_checked_for_phishing() -> None:
    mine = personal.personal(verdict("phishing"), [ALLOW_BOB], "bob@shop.example")
    assert mine.label == "phishing"
    assert mine.header().endswith("; list=allow-refused:phishing")
    assert mine.as_dict()["list"]["applied"] is False


@pytest.mark.parametrize("dmarc", ["fail", "permerror", "temperror"])
def test_an_allowed_address_failing_dmarc_is_not_let_through(dmarc: str) -> None:
    mine = personal.personal(verdict("spam", a=auth(dmarc=dmarc)), [ALLOW_BOB], "bob@shop.example")
    assert mine.label == "spam"
    assert mine.listed is not None and mine.listed.reason == "dmarc"


@pytest.mark.parametrize("sign", sorted(personal.SPOOFING))
def test_a_display_name_or_reply_to_imitating_another_party_is_not_let_through(sign: str) -> None:
    assert sign in SYMBOLS  # the registry still has it
    mine = personal.personal(verdict("spam", signs=(sign,)), [ALLOW_BOB], "bob@shop.example")
    assert mine.label == "spam"
    assert mine.listed is not None and mine.listed.reason == sign


def test_other_signs_do_not_stop_an_allow() -> None:
    mine = personal.personal(
        verdict("spam", signs=("PHISH_URGENCY",)), [ALLOW_BOB], "bob@shop.example"
    )
    assert mine.label == "ham"


def test_an_allowed_address_whose_spf_fails_needs_an_aligned_dkim_pass() -> None:
    failing = auth(spf="fail", spf_domain="shop.example")
    mine = personal.personal(verdict("spam", a=failing), [ALLOW_BOB], "bob@shop.example")
    assert mine.label == "spam" and mine.listed is not None and mine.listed.reason == "spf"
    signed = dataclasses.replace(failing, dkim=(DkimResult("pass", "mail.shop.example", "s"),))
    assert (
        personal.personal(verdict("spam", a=signed), [ALLOW_BOB], "bob@shop.example").label == "ham"
    )


def test_an_allowed_domain_needs_an_spf_or_dkim_pass_of_that_domain() -> None:
    sender = "news@mail.shop.example"
    unchecked = personal.personal(verdict("spam"), [ALLOW_SHOP], sender)
    assert unchecked.label == "spam" and unchecked.listed is not None
    assert unchecked.listed.reason == "unaligned"
    elsewhere = auth(spf="pass", spf_domain="esp.example", dkim=(("pass", "esp.example"),))
    assert personal.personal(verdict("spam", a=elsewhere), [ALLOW_SHOP], sender).label == "spam"
    for good in (
        auth(spf="pass", spf_domain="bounce.shop.example"),
        auth(dkim=(("fail", "esp.example"), ("pass", "shop.example"))),
        auth(dmarc="pass"),
    ):
        assert personal.personal(verdict("spam", a=good), [ALLOW_SHOP], sender).label == "ham"


def test_an_allow_on_a_verdict_the_time_budget_cut_is_not_applied() -> None:
    for cut in (("signs",), ("auth",), ("timeout",)):
        mine = personal.personal(verdict("spam", partial=cut), [ALLOW_BOB], "bob@shop.example")
        assert mine.label == "spam" and mine.listed is not None and mine.listed.reason == "partial"
    counters_down = personal.personal(
        verdict("spam", partial=("counters",)), [ALLOW_BOB], "bob@shop.example"
    )
    assert counters_down.label == "ham"


LABELS = st.sampled_from(["ham", "spam", "phishing"])
ENTRIES = st.lists(
    st.builds(
        ListEntry,
        st.sampled_from(["bob@shop.example", "shop.example", "news.shop.example", "x.example"]),
        st.sampled_from(["allow", "block"]),
    ),
    max_size=4,
)
AUTHS = st.builds(
    auth,
    st.sampled_from(["none", "pass", "fail", "softfail"]),
    st.sampled_from(["", "shop.example", "esp.example"]),
    st.lists(
        st.tuples(
            st.sampled_from(["pass", "fail"]), st.sampled_from(["shop.example", "esp.example"])
        ),
        max_size=2,
    ).map(tuple),
    st.sampled_from(["none", "pass", "fail", "temperror"]),
)


@given(
    LABELS,
    ENTRIES,
    AUTHS,
    st.lists(st.sampled_from(sorted(SYMBOLS)), max_size=3).map(tuple),
    st.sampled_from(["bob@shop.example", "ann@news.shop.example", "eve@other.example", ""]),
)
def test_a_list_never_unmakes_phishing_nor_lets_a_forged_sender_through(
    label: Label, entries: list[ListEntry], a: AuthResults, signs: tuple[str, ...], sender: str
) -> None:
    v = verdict(label, signs=signs, a=a)
    mine = personal.personal(v, entries, sender)
    if label == "phishing":
        assert mine.label == "phishing"
    matched = personal.match(entries, sender)
    if matched is None:
        assert mine is v
        return
    assert mine.listed is not None and mine.listed.entry == matched
    if matched.action == "block":
        assert mine.label == ("phishing" if label == "phishing" else "spam")
    elif mine.label == "ham" and label != "ham":  # the allow was applied
        assert a.dmarc.result not in ("fail", "temperror")
        assert not set(signs) & personal.SPOOFING
    # only what the list decided changes: the rest of the verdict is the installation's
    assert dataclasses.replace(mine, label=label, listed=None) == v
