"""Signs that misfired on legitimate letters in a way that generalizes (issue 28: the rules'
phishing verdicts on the non-sealed hard ham), each with the phishing look-alike that must
still fire: a publication whose title names a brand, a web page's own pop-up link, a shop's
search box."""

from __future__ import annotations

import pytest
from tests.unit.antispam_phishing.helpers import letter

from pochta.antispam.signs import checks as phishing


def signs(raw: bytes) -> dict[str, tuple[str, ...]]:
    return {s.symbol: s.evidence for s in phishing.scan(raw)}


LINKS = (
    '<p>This week: <a href="https://www.gnomedigest.com/issue/12">the issue</a>, '
    '<a href="https://www.gnometomes.com/">books</a></p>'
)


# -- a brand inside a publication's title ------------------------------------------------------
# (an exemption for a display name that names its sender first was tried and dropped: every
# fact it rested on is the sender's to choose; the review's lure below)
def test_a_senders_own_name_before_a_brand_is_no_exemption() -> None:
    lure = (
        '<p>Your account is limited. <a href="https://acmenews.com/paypal/login">Log in</a>'
        " to restore it.</p>"
    )
    found = signs(
        letter(sender='"Acmenews PayPal Security" <service@acmenews.com>', text=None, html=lure)
    )
    assert "PHISH_DISPLAY_NAME_BRAND" in found


@pytest.mark.parametrize(
    ("sender", "received"),
    [
        # the brand comes first: the letter speaks for Apple
        ('"Apple Support via Gnomedigest" <support@gnomedigest.com>', None),
        ('"Apple Gnomedigest" <support@gnomedigest.com>', None),
        # the sender's own name is no word of the display name
        ('"Apple Support" <support@gnomedigest.com>', None),
        # a public mailbox's name is anybody's
        ('"Gmail Apple Support" <apple.support.desk@gmail.com>', None),
        # the letter came through somebody else's servers
        (
            '"Gnomedigest Apple Core" <subscriptions@gnomedigest.com>',
            "from mail.bulk-sender.example.org (mail.bulk-sender.example.org [203.0.113.9]) "
            "by mx.pochta.test; Mon, 23 Nov 2026 10:00:00 +0000",
        ),
    ],
)
def test_a_brand_in_the_name_still_counts(sender: str, received: str | None) -> None:
    headers = {"Received": received} if received else None
    found = signs(letter(sender=sender, text=None, html=LINKS, headers=headers))
    assert "PHISH_DISPLAY_NAME_BRAND" in found or "PHISH_FREEMAIL_BRAND" in found


# -- a web page's own pop-up link --------------------------------------------------------------
NEWS = "Daily News <refertofriend@reply.newsdaily.com>"


@pytest.mark.parametrize(
    "href",
    [
        'javascript: rs("ss","http://story.newsdaily.com/news?p=1&amp;id=2")',
        "javascript:\n openWindow('https://www.newsdaily.com/mail/story', 400, 300);",
    ],
)
def test_a_pages_own_popup_link_is_no_script_link(href: str) -> None:
    html = f'<p>Top story. <a href="{href.replace(chr(34), "&quot;")}">Email it</a></p>'
    assert "PHISH_LINK_DATA_URL" not in signs(letter(sender=NEWS, text=None, html=html))


@pytest.mark.parametrize(
    "href",
    [
        "javascript:alert(1)",  # no address at all
        "javascript:rs('ss','http://login.newsdaily.example.org/')",  # somebody else's site
        "javascript:window.location='http://story.newsdaily.com/'",  # an assignment
        "javascript:go('http://story.newsdaily.com/'+document.cookie)",  # an expression
        "javascript:go('http://story.newsdaily.com/",  # an open quote
        # code in a string, or a call that runs or decodes code (the review's bypasses)
        'javascript:eval("YWxlcnQoMSk=");f("http://newsdaily.com/")',
        "javascript:setTimeout(\"location=unescape('%68ttp://evil.example/')\");"
        "go('http://newsdaily.com/x')",
        "javascript:go(atob('aHR0cDovL2V2aWwuZXhhbXBsZS8='),'http://newsdaily.com/')",
        "javascript:go('http://newsdaily.com/%2e%2e/x')",
        "data:text/html;base64,PGgxPkhpPC9oMT4=",
    ],
)
def test_other_scripts_still_count(href: str) -> None:
    html = f'<p>Top story. <a href="{href}">Read</a></p>'
    assert "PHISH_LINK_DATA_URL" in signs(letter(sender=NEWS, text=None, html=html))


# -- a search box is no form to fill in --------------------------------------------------------
def test_a_search_box_with_hidden_fields_is_no_form() -> None:
    html = (
        '<form name="frmsearch" method="post" action="https://www.shop.example.com/index">'
        '<input type="hidden" name="store" value="ALL"><input type="text" name="q" size="10">'
        '<input type="image" name="go" src="https://www.shop.example.com/go.gif">'
        '<input type="hidden" name="type" value="1"><input type="submit" value="Go"></form>'
    )
    assert "PHISH_HTML_FORM" not in signs(letter(text=None, html=html))


def test_a_type_a_browser_does_not_know_is_a_field_to_fill() -> None:
    """``type=" hidden"`` is no type a browser knows: it shows a text field."""
    html = (
        '<form action="https://verify.example.org/p"><input type=" hidden" name="card">'
        '<input type="hidden " name="exp"><input type="HIDDEN " name="cvv">'
        '<input type="submit" value="Verify"></form>'
    )
    assert "PHISH_HTML_FORM" in signs(letter(text=None, html=html))


def test_a_form_with_fields_to_fill_still_counts() -> None:
    html = (
        '<form action="https://verify.example.org/p"><input type="hidden" name="t" value="1">'
        '<input name="card"><input name="exp"><input type="text" name="cvv">'
        '<input type="submit" value="Verify"></form>'
    )
    assert "PHISH_HTML_FORM" in signs(letter(text=None, html=html))
