"""The webmail's sender lists: the offer after "spam" / "not spam", the list page with its
remove buttons, CSRF on every form, and nobody reaching another reader's list."""

from __future__ import annotations

from pathlib import Path

from selectolax.lexbor import LexborHTMLParser
from tests.mailtools import letter
from tests.unit.web.conftest import Site
from tests.unit.web.test_pages import forms

from pochta.types import ListEntry

PHISHING = Path(__file__).parents[2] / "data" / "phishing"


def offers(page: str) -> list[tuple[str, str]]:
    return [
        (b.attributes.get("data-action") or "", b.attributes.get("data-value") or "")
        for b in LexborHTMLParser(page).css("#list-offer button.offer")
    ]


def entries(page: str) -> list[tuple[str, str]]:
    return [
        (tr.attributes.get("data-value") or "", tr.attributes.get("data-action") or "")
        for tr in LexborHTMLParser(page).css("#entries tr.entry")
    ]


def user_id(site: Site, email: str) -> int:
    return int(site.pochta.mailbox.user(email).id)


def test_not_spam_offers_to_trust_the_sender_or_its_domain(site: Site) -> None:
    raw = letter(sender="School <news@mail.school-one.example>", subject="Term dates")
    (letter_id,) = site.deliver(raw, "alice@example.org")
    site.pochta.mailbox.update(user_id(site, "alice@example.org"), letter_id, folder="Spam")
    jar = site.login("alice@example.org")
    token = site.csrf(jar)
    c = site.as_user(jar)
    assert offers(c.get(f"/webmail/letters/{letter_id}").text) == []  # only after a move
    page = c.post(f"/webmail/letters/{letter_id}/not-spam", data={"csrf": token})
    assert offers(page.text) == [
        ("allow", "news@mail.school-one.example"),
        ("allow", "school-one.example"),
    ]
    assert "Always trust school-one.example" in page.text
    (action, fields) = next(
        f for f in forms(page.text) if f[1].get("value") == "school-one.example"
    )
    done = c.post(action, data=fields)
    assert done.status_code == 200 and "Your sender list was changed." in done.text
    assert str(done.url).endswith(f"/webmail/letters/{letter_id}?notice=listed")
    assert site.pochta.mailbox.lists.entries(user_id(site, "alice@example.org")) == [
        ListEntry("school-one.example", "allow")
    ]


def test_no_trust_of_a_whole_public_mailbox_domain_is_offered(site: Site) -> None:
    """After "Not spam" on a friend's letter from gmail.com: trust the friend, never
    gmail.com: an entry for a public mail service would let every one of its senders (any
    of whom passes its DKIM) past the filter with a click."""
    for n, sender in enumerate(("Ann <ann.friend@gmail.com>", "Ivan <ivan@mail.ru>")):
        raw = letter(sender=sender, subject=f"Dinner {n}")
        (letter_id,) = site.deliver(raw, "alice@example.org")
        site.pochta.mailbox.update(user_id(site, "alice@example.org"), letter_id, folder="Spam")
        jar = site.login("alice@example.org")
        c = site.as_user(jar)
        page = c.post(f"/webmail/letters/{letter_id}/not-spam", data={"csrf": site.csrf(jar)})
        address = sender.partition("<")[2].rstrip(">")
        assert offers(page.text) == [("allow", address)]


def test_no_trust_is_offered_for_a_letter_pochta_called_phishing(site: Site) -> None:
    raw = (PHISHING / "en01_paypal_confusable.eml").read_bytes()
    box = site.pochta.mailbox
    done = box.deliver(raw, [box.user("alice@example.org")], scan=True)
    assert done.verdict is not None and done.verdict.label == "phishing"
    jar = site.login("alice@example.org")
    token = site.csrf(jar)
    page = site.as_user(jar).post(f"/webmail/letters/{done.ids[0]}/not-spam", data={"csrf": token})
    assert "Moved to Inbox" in page.text and offers(page.text) == []
    again = site.as_user(jar).post(f"/webmail/letters/{done.ids[0]}/spam", data={"csrf": token})
    assert offers(again.text) == [("block", "service@paypa1.com")]  # blocking it is fine


def test_spam_offers_to_always_spam_from_the_sender(site: Site) -> None:
    raw = letter(sender="Promo <deals@promo-two.example>", subject="Deals")
    (letter_id,) = site.deliver(raw, "bob@example.org")
    jar = site.login("bob@example.org")
    token = site.csrf(jar)
    c = site.as_user(jar)
    page = c.post(f"/webmail/letters/{letter_id}/spam", data={"csrf": token})
    assert offers(page.text) == [("block", "deals@promo-two.example")]
    (action, fields) = next(f for f in forms(page.text) if f[0] == "/webmail/lists")
    c.post(action, data=fields)
    listed = c.get("/webmail/lists")
    assert ("deals@promo-two.example", "block") in entries(listed.text)
    assert "always spam" in listed.text


def test_the_list_page_adds_and_removes_and_refuses_bad_values_clearly(site: Site) -> None:
    jar = site.login("root@example.org")
    token = site.csrf(jar, "/webmail/lists")
    c = site.as_user(jar)
    assert "Your list is empty." in c.get("/webmail/lists").text
    r = c.post("/webmail/lists", data={"csrf": token, "value": "Shop.Example", "action": "allow"})
    assert r.status_code == 200 and entries(r.text) == [("shop.example", "allow")]
    for value, says in (("com", "public suffix"), ("a b@shop.example", "not an e-mail address")):
        bad = c.post("/webmail/lists", data={"csrf": token, "value": value, "action": "block"})
        assert bad.status_code == 400 and says in bad.text
    bad = c.post("/webmail/lists", data={"csrf": token, "value": "x.example", "action": "trust"})
    assert bad.status_code == 400 and "allow or block" in bad.text
    long = c.post("/webmail/lists", data={"csrf": token, "value": "x" * 300, "action": "allow"})
    assert long.status_code == 400
    (action, fields) = next(f for f in forms(r.text) if f[0] == "/webmail/lists/delete")
    r = c.post(action, data=fields)
    assert r.status_code == 200 and entries(r.text) == []
    again = c.post(action, data=fields)
    assert again.status_code == 404


def test_the_list_forms_need_the_csrf_token_and_a_back_link_stays_in_the_webmail(
    site: Site,
) -> None:
    jar = site.login("alice@example.org")
    c = site.as_user(jar)
    before = site.pochta.mailbox.lists.entries(user_id(site, "alice@example.org"))
    for action in ("/webmail/lists", "/webmail/lists/delete"):
        for bad in ({}, {"csrf": "0" * 64}):
            r = c.post(
                action,
                data={**bad, "value": "evil.example", "action": "block"},
                follow_redirects=False,
            )
            assert r.status_code == 403
    assert site.pochta.mailbox.lists.entries(user_id(site, "alice@example.org")) == before
    token = site.csrf(jar)
    r = c.post(
        "/webmail/lists",
        data={"csrf": token, "value": "ok.example", "action": "block", "back": "//evil.example"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/webmail/lists?notice=changed"


def test_nobody_reaches_another_readers_list(site: Site) -> None:
    alice = user_id(site, "alice@example.org")
    site.pochta.mailbox.lists.add(alice, "secret-friend.example", "allow")
    jar = site.login("bob@example.org")
    token = site.csrf(jar)
    c = site.as_user(jar)
    assert "secret-friend.example" not in c.get("/webmail/lists").text
    r = c.post("/webmail/lists/delete", data={"csrf": token, "value": "secret-friend.example"})
    assert r.status_code == 404
    assert ListEntry("secret-friend.example", "allow") in site.pochta.mailbox.lists.entries(alice)
    site.as_user({})
    assert site.client.get("/webmail/lists", follow_redirects=False).status_code == 303
