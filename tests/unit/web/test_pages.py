"""The webmail and admin pages without a browser: sessions, CSRF on every form, who may see
what, the API's login limits, the actions' effects, bounds. (The browser tests are in
tests/integration/web.)"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from selectolax.lexbor import LexborHTMLParser
from tests.mailtools import letter, payload
from tests.unit.web.conftest import CSRF, PASSWORD, Site, make_site

from pochta.antispam.shingles.registry import ShingleType
from pochta.antispam.shingles.shingler import Shingler
from pochta.errors import InvalidCredentials, RateLimited
from pochta.server.web import webmail
from pochta.types import Tally

PHISHING = Path(__file__).parents[2] / "data" / "phishing" / "en01_paypal_confusable.eml"


@pytest.fixture
def tls_site(tmp_path: Path) -> Iterator[Site]:
    yield from make_site(tmp_path, base_url="https://testserver")


@pytest.fixture
def http_site(tmp_path: Path) -> Iterator[Site]:
    """Plain HTTP from a browser on this machine (loopback may send a password in clear)."""
    yield from make_site(tmp_path, base_url="http://testserver", client=("127.0.0.1", 50000))


def forms(html: str) -> list[tuple[str, dict[str, str]]]:
    """Every POST form of a page: its action and the fields a browser would send."""
    out = []
    for form in LexborHTMLParser(html).css("form"):
        if (form.attributes.get("method") or "").lower() != "post":
            continue
        fields: dict[str, str] = {}
        for field in form.css("input, select, button[name]"):
            name = field.attributes.get("name")
            if not name or name in fields:
                continue
            if field.tag == "select":
                option = field.css_first("option")
                fields[name] = option.text() if option is not None else ""
            else:
                fields[name] = field.attributes.get("value") or "true"
        out.append((form.attributes.get("action") or "", fields))
    return out


def test_login_sets_a_strict_httponly_session_cookie_and_logout_ends_it(http_site: Site) -> None:
    site = http_site
    c = site.as_user({})
    assert c.get("/webmail", follow_redirects=False).headers["location"] == "/webmail/login"
    jar = site.login("alice@example.org")
    r = site.as_user({}).get("/webmail/login")
    token = re.search(r'name="csrf" value="([^"]+)"', r.text).group(1)  # type: ignore[union-attr]
    r = c.post(
        "/webmail/login",
        data={"email": "alice@example.org", "password": PASSWORD, "csrf": token},
        follow_redirects=False,
    )
    cookie = next(v for k, v in r.headers.multi_items() if v.startswith("pochta_session="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie
    page = site.as_user(jar).get("/webmail")
    assert page.status_code == 200 and "alice@example.org" in page.text
    csrf = site.csrf(jar)
    r = site.as_user(jar).post("/webmail/logout", data={"csrf": csrf}, follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (303, "/webmail/login")
    again = site.as_user(jar).get("/webmail", follow_redirects=False)
    assert again.headers["location"] == "/webmail/login"  # the old cookie no longer works


def test_the_cookie_is_secure_over_tls(tls_site: Site) -> None:
    c = tls_site.as_user({})
    page = c.get("/webmail/login")
    assert "Secure" in page.headers["set-cookie"]
    token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    r = c.post(
        "/webmail/login",
        data={"email": "alice@example.org", "password": PASSWORD, "csrf": token},
        follow_redirects=False,
    )
    cookie = next(v for k, v in r.headers.multi_items() if v.startswith("pochta_session="))
    assert "Secure" in cookie and "HttpOnly" in cookie


def test_pages_forbid_every_script_and_letters_get_their_own_policy(site: Site) -> None:
    (letter_id,) = site.deliver(letter(html="<p>hi</p>"), "alice@example.org")
    jar = site.login("alice@example.org")
    c = site.as_user(jar)
    for path in ("/webmail", f"/webmail/letters/{letter_id}", "/webmail/login"):
        r = c.get(path)
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src" not in csp, path
        assert "frame-ancestors 'none'" in csp and r.headers["x-frame-options"] == "DENY"
        assert r.headers["x-content-type-options"] == "nosniff"
        assert "<script" not in r.text
    body = c.get(f"/webmail/letters/{letter_id}/body")
    csp = body.headers["content-security-policy"]
    assert "img-src data:;" in csp and "sandbox" in csp and "script-src" not in csp
    shown = c.get(f"/webmail/letters/{letter_id}/body?images=1")
    assert "img-src data: https: http:;" in shown.headers["content-security-policy"]


def slow_down(site: Site, email: str) -> None:
    """Guesses at ``email`` from strangers' addresses until the account's next slot is
    further away than a login waits (each guess not waiting for its slot, as a test may)."""
    users = site.pochta.mailbox.users
    for i in range(50):
        try:
            admission = users.admit(email, f"198.18.7.{i}")
        except RateLimited:
            return
        with pytest.raises(InvalidCredentials):
            users.verify_admitted(admission, "no")
    raise AssertionError("the account was never slowed")


def test_a_browser_that_logged_in_before_is_let_in_during_an_attack(fresh_site: Site) -> None:
    """Its device cookie makes it a known client of the account wherever it is; a browser
    without one, at the same new address, waits for the account's slots."""
    app = fresh_site.client.app

    def browser(ip: str) -> TestClient:
        return TestClient(app, client=(ip, 50000), base_url="https://testserver")

    def post_login(c: TestClient) -> Response:
        token = CSRF.search(c.get("/webmail/login").text)
        assert token is not None
        form = {"email": "alice@example.org", "password": PASSWORD, "csrf": token.group(1)}
        r: Response = c.post("/webmail/login", data=form, follow_redirects=False)
        return r

    laptop = browser("198.51.100.7")
    r = post_login(laptop)
    assert r.status_code == 303
    cookie = next(v for k, v in r.headers.multi_items() if v.startswith("pochta_device="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Path=/webmail/login" in cookie and f"Max-Age={90 * 86400}" in cookie
    slow_down(fresh_site, "alice@example.org")
    travelling = browser("203.0.113.50")
    travelling.cookies.set("pochta_device", laptop.cookies["pochta_device"], path="/webmail/login")
    assert post_login(travelling).status_code == 303
    stranger = post_login(browser("192.0.2.51"))  # (203.0.113.0/24 is hers now)
    assert stranger.status_code == 429 and int(stranger.headers["retry-after"]) >= 1


def state(site: Site, letter_id: int) -> tuple[str, bool]:
    stored = site.pochta.mailbox.index.letter(
        site.pochta.mailbox.user("alice@example.org").id, letter_id
    )
    assert stored is not None
    return stored.folder, stored.flagged


def test_every_form_refuses_a_missing_or_wrong_csrf_token(site: Site) -> None:
    raw = letter(attachments=[("a.bin", payload(1, 5000))])
    (letter_id,) = site.deliver(raw, "root@example.org")
    root = site.login("root@example.org")
    bob = site.login("bob@example.org")
    bobs_token = site.csrf(bob)
    pages = ["/webmail", f"/webmail/letters/{letter_id}"] + [
        f"/admin/{s}" for s in ("pairs", "logins", "storage")
    ]
    slow_down(site, "x@example.org")  # an account slowed: its "lift" form shows
    site.pochta.mailbox.users.activity.login_failed("192.0.2.9", "x@example.org")
    site.pochta.history.flush()
    seen: set[str] = set()
    for path in pages:
        page = site.as_user(root).get(path)
        assert page.status_code == 200, path
        for action, fields in forms(page.text):
            assert "csrf" in fields, f"{action} on {path} has no CSRF token"
            seen.add(re.sub(r"\d+", "N", action))
            for bad in (None, "0" * 64, bobs_token):
                sent = {k: v for k, v in fields.items() if k != "csrf"}
                if bad is not None:
                    sent["csrf"] = bad
                r = site.as_user(root).post(action, data=sent, follow_redirects=False)
                assert r.status_code == 403, (action, bad, r.status_code)
    assert seen >= {
        "/webmail/logout",
        "/webmail/lang",
        "/webmail/letters/N/spam",
        "/webmail/letters/N/delete",
        "/webmail/letters/N/move",
        "/admin/pairs/N/flags",
        "/admin/pairs/N/evacuate",
        "/admin/logins/reset",
    }
    # nothing happened: the letter is where it was, the session lives, the pair is as it was
    root_id = site.pochta.mailbox.user("root@example.org").id
    assert site.pochta.mailbox.index.letter(root_id, letter_id).folder == "Inbox"
    assert site.as_user(root).get("/webmail").status_code == 200
    assert not site.pochta.blobs.pairs()[0].flags
    assert site.pochta.evacuations.jobs() == []
    # and with the right token the same form works
    token = site.csrf(root)
    r = site.as_user(root).post(
        f"/webmail/letters/{letter_id}/spam", data={"csrf": token}, follow_redirects=False
    )
    assert r.status_code == 303
    assert site.pochta.mailbox.index.letter(root_id, letter_id).folder == "Spam"


def test_the_login_form_needs_its_own_token(site: Site) -> None:
    c = site.as_user({})
    r = c.post("/webmail/login", data={"email": "alice@example.org", "password": PASSWORD})
    assert r.status_code == 403
    c.get("/webmail/login")  # a nonce cookie, but the token of another one
    r = c.post(
        "/webmail/login",
        data={"email": "alice@example.org", "password": PASSWORD, "csrf": "f" * 64},
    )
    assert r.status_code == 403 and "pochta_session" not in c.cookies


def test_nobody_reaches_another_users_letter_through_any_page(site: Site) -> None:
    raw = letter(attachments=[("secret.bin", payload(2, 3000))], html="<p>secret</p>")
    (letter_id,) = site.deliver(raw, "alice@example.org")
    bob = site.login("bob@example.org")
    token = site.csrf(bob)
    c = site.as_user(bob)
    for path in (
        f"/webmail/letters/{letter_id}",
        f"/webmail/letters/{letter_id}/body",
        f"/webmail/letters/{letter_id}/attachments/0",
        f"/webmail/letters/{letter_id}?images=1",
    ):
        r = c.get(path)
        assert r.status_code == 404 and "secret" not in r.text, path
    for action in ("spam", "not-spam", "delete", "move"):
        r = c.post(
            f"/webmail/letters/{letter_id}/{action}",
            data={"csrf": token, "folder": "Spam"},
            follow_redirects=False,
        )
        assert r.status_code == 404, action
    assert state(site, letter_id) == ("Inbox", False)
    missing = c.get(f"/webmail/letters/{letter_id + 100}")
    assert missing.status_code == 404 and missing.text.count("Not found") >= 1


def test_admin_pages_refuse_non_admins(site: Site) -> None:
    alice = site.login("alice@example.org")
    token = site.csrf(alice)
    c = site.as_user(alice)
    for path in (
        "/admin/storage",
        "/admin/pairs",
        "/admin/valkyrie",
        "/admin/verdicts",
        "/admin/logins",
        "/admin/audits",
    ):
        assert c.get(path).status_code == 403, path
    for path, data in (
        ("/admin/pairs/1/flags", {"readonly": "true"}),
        ("/admin/pairs/1/evacuate", {}),
        ("/admin/logins/reset", {"kind": "ip", "subject": "192.0.2.1"}),
    ):
        r = c.post(path, data={"csrf": token, **data}, follow_redirects=False)
        assert r.status_code == 403, path
    assert not site.pochta.blobs.pairs()[0].flags
    assert "/admin" not in c.get("/webmail").text  # no link to where one cannot go
    anonymous = site.as_user({}).get("/admin/storage", follow_redirects=False)
    assert anonymous.headers["location"] == "/webmail/login"
    assert 'href="/admin"' in site.as_user(site.login("root@example.org")).get("/webmail").text


def test_web_logins_share_the_apis_limits(site: Site) -> None:
    c = site.as_user({})
    page = c.get("/webmail/login")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    limit = site.pochta.settings.guard.login_client_max  # this client's failures on alice
    for _ in range(limit):
        r = c.post(
            "/webmail/login",
            data={"email": "alice@example.org", "password": "wrong!", "csrf": token},
        )
        assert r.status_code == 401 and "Wrong e-mail or password" in r.text
    r = c.post(
        "/webmail/login", data={"email": "alice@example.org", "password": PASSWORD, "csrf": token}
    )
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
    api = c.post("/v1/session", json={"email": "alice@example.org", "password": PASSWORD})
    assert api.status_code == 429  # one limit for both doors
    site.pochta.mailbox.users.logins.reset(ip="testclient", email="alice@example.org")
    assert site.login("alice@example.org")


def test_spam_and_not_spam_move_the_letter_and_feed_the_counters(site: Site) -> None:
    raw = letter(sender="Promo <promo@spammer.example>", subject="Cheap offers")
    (letter_id,) = site.deliver(raw, "alice@example.org")
    jar = site.login("alice@example.org")
    token = site.csrf(jar)
    c = site.as_user(jar)
    r = c.post(f"/webmail/letters/{letter_id}/spam", data={"csrf": token})
    assert r.status_code == 200 and "Moved to Spam" in r.text
    assert state(site, letter_id)[0] == "Spam"
    r = c.post(f"/webmail/letters/{letter_id}/not-spam", data={"csrf": token})
    assert "Moved to Inbox" in r.text
    assert state(site, letter_id)[0] == "Inbox"
    shingler = site.pochta.shingles
    (from_,) = [s for s in shingler.shingles(raw) if s.type == ShingleType.FROM_ADDRESS]
    (counts,) = shingler.query([from_.ref], ["24h"])
    assert (counts["24h"]["complaint"], counts["24h"]["unspam"]) == (1, 1)
    site.pochta.history.flush()
    names = {t.name for t in site.pochta.history.store.tallies("complaint", 0)}
    assert any("promo@spammer.example" in n for n in names)
    site.pochta.mailbox.add_folder(site.pochta.mailbox.user("alice@example.org").id, "Archive")
    r = c.post(f"/webmail/letters/{letter_id}/move", data={"csrf": token, "folder": "Archive"})
    assert state(site, letter_id)[0] == "Archive"
    r = c.post(f"/webmail/letters/{letter_id}/move", data={"csrf": token, "folder": "Nope"})
    assert r.status_code == 404
    r = c.post(f"/webmail/letters/{letter_id}/delete", data={"csrf": token})
    assert r.status_code == 200 and "The letter was deleted." in r.text
    assert c.get(f"/webmail/letters/{letter_id}").status_code == 404


def sender_stats(page: str) -> dict[str, tuple[str, str, str]]:
    """The letter page's lines about its sender: kind -> (say, percent, text)."""
    found = LexborHTMLParser(page).css("#sender-stats li")
    return {
        li.attributes["data-kind"] or "": (
            li.attributes["data-say"] or "",
            li.attributes["data-percent"] or "",
            li.text(),
        )
        for li in found
    }


def test_the_letter_page_tells_shares_of_the_senders_mail_never_what_others_did(
    site: Site,
) -> None:
    raw = letter(sender="News <news@bulk.example>", subject="Weekly")
    (letter_id,) = site.deliver(raw, "alice@example.org")
    shingler = site.pochta.shingles
    (from_,) = [s for s in shingler.shingles(raw) if s.type == ShingleType.FROM_ADDRESS]
    c = site.as_user(site.login("alice@example.org"))
    shingler.update([from_.ref], "ham", 14)
    shingler.update([from_.ref], "spam", 5)
    shingler.update([from_.ref], "read", 19)  # how often others opened this sender's mail
    shingler.update([from_.ref], "complaint", 1)
    page = c.get(f"/webmail/letters/{letter_id}").text
    assert sender_stats(page) == {}  # 19 letters: too few to say anything of them
    shingler.update([from_.ref], "ham", 11)  # 30 letters, 5 of them spam, 1 complaint
    shingler.update([from_.ref], "unspam", 2)
    page = c.get(f"/webmail/letters/{letter_id}").text
    stats = sender_stats(page)
    assert stats.keys() == {"spam", "complaint"}  # never opened, never "not spam" counts
    assert stats["spam"][:2] == ("about", "20") and "about 20 %" in stats["spam"][2]
    assert stats["complaint"][:2] == ("under", "10") and "under 10 %" in stats["complaint"][2]
    text = LexborHTMLParser(page).css_first("#sender-stats").text()
    assert "opened" not in text and set(re.findall(r"\d+", text)) == {"14", "20", "10"}
    shingler.update([from_.ref], "complaint", 8)  # 9 of 30
    again = sender_stats(c.get(f"/webmail/letters/{letter_id}").text)
    assert again["complaint"][:2] == ("about", "30")


def test_an_attachment_downloads_byte_exactly_and_is_never_rendered(site: Site) -> None:
    data = payload(7, 70_000)
    raw = letter(attachments=[("отчёт <1>.html", data)])
    (letter_id,) = site.deliver(raw, "alice@example.org")
    c = site.as_user(site.login("alice@example.org"))
    r = c.get(f"/webmail/letters/{letter_id}/attachments/0")
    assert r.status_code == 200 and r.content == data
    disposition = r.headers["content-disposition"]
    assert disposition.startswith("attachment;") and "filename*=UTF-8''" in disposition
    assert '"' not in disposition.split('filename="', 1)[1].split('";', 1)[0]
    assert "sandbox" in r.headers["content-security-policy"]
    assert c.get(f"/webmail/letters/{letter_id}/attachments/5").status_code == 404


HOSTILE = """<html><head><meta http-equiv="refresh" content="0;url=http://evil.test/">
<link rel="stylesheet" href="http://evil.test/x.css"><style>@import url(http://evil.test/i.css);
body{background:url(http://evil.test/bg.png)}</style><script>alert(1)</script></head>
<body onload="alert(2)"><p style="color: red; background-image: url(http://evil.test/p.png);
width: expression(alert(3))">hello</p><img src="http://evil.test/pixel.gif" onerror="alert(4)">
<a href="javascript:alert(5)">click</a><a href="https://example.org/ok">fine</a>
<svg onload="alert(6)"><image href="http://evil.test/svg.png"/></svg>
<iframe src="http://evil.test/frame"></iframe><form action="http://evil.test/f">
<input name="password"></form><object data="http://evil.test/o"></object>
<table background="http://evil.test/t.png"><tr><td>cell</td></tr></table></body></html>"""


def test_an_error_page_looks_the_session_up_once(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = site.pochta.mailbox
    c = site.as_user(site.login("bob@example.org"))
    calls: list[str] = []
    real = box.authenticate

    def counted(token: str) -> int:
        calls.append(token)
        return real(token)

    monkeypatch.setattr(box, "authenticate", counted)
    for path, status in (("/admin/storage", 403), ("/webmail/letters/999999", 404)):
        calls.clear()
        r = c.get(path)
        assert r.status_code == status and "<h1>" in r.text and len(calls) == 1, (path, calls)
    calls.clear()
    r = c.post("/webmail/letters/999999/delete", data={"csrf": "0" * 64})
    assert r.status_code == 403 and len(calls) == 1


def test_any_unexpected_error_is_the_html_500_page_logged_once(
    site: Site, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    box = site.pochta.mailbox
    c = site.as_user(site.login("alice@example.org"))

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the bug's own words /secret/path")

    for where in ("folders", "authenticate"):  # in the page, and in who is looking
        with monkeypatch.context() as m:
            m.setattr(box, where, broken)
            caplog.clear()
            r = c.get("/webmail")
        assert r.status_code == 500 and r.headers["content-type"].startswith("text/html"), where
        assert "Something went wrong" in r.text and "could not answer" in r.text
        assert "the bug's own words" not in r.text and "Traceback" not in r.text
        assert "content-security-policy" in r.headers
        logged = [rec for rec in caplog.records if rec.exc_info is not None]
        assert len(logged) == 1 and "RuntimeError" in caplog.text, where


def test_the_letter_page_neither_sanitizes_nor_extracts_every_shingle(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page only counts the remote images (the frame's request sanitizes) and reads only
    the From address's counters (no body words, links, attachments' shingles)."""
    (letter_id,) = site.deliver(letter(html=HOSTILE), "alice@example.org")
    c = site.as_user(site.login("alice@example.org"))

    def not_here(*args: object, **kwargs: object) -> None:
        raise AssertionError("not on the letter page")

    monkeypatch.setattr(webmail, "sanitize", not_here)
    monkeypatch.setattr(Shingler, "shingles", not_here)
    page = c.get(f"/webmail/letters/{letter_id}")
    assert page.status_code == 200 and "1 remote image(s) blocked" in page.text
    assert c.get(f"/webmail/letters/{letter_id}?images=1").status_code == 200


def test_hostile_html_reaches_the_frame_sanitized(site: Site) -> None:
    (letter_id,) = site.deliver(letter(html=HOSTILE), "alice@example.org")
    c = site.as_user(site.login("alice@example.org"))
    page = c.get(f"/webmail/letters/{letter_id}")
    assert "1 remote image(s) blocked" in page.text
    body = c.get(f"/webmail/letters/{letter_id}/body").text.lower()
    inside = body.split("<body>", 1)[1]
    for bad in (
        "<script",
        "onload",
        "onerror",
        "javascript:",
        "evil.test",
        "expression",
        "<iframe",
        "<form",
        "<input",
        "<object",
        "<svg",
        "<link",
        "<meta",
        "@import",
    ):
        assert bad not in inside, bad
    assert "hello" in inside and 'href="https://example.org/ok"' in inside
    assert 'style="color: red"' in inside
    shown = c.get(f"/webmail/letters/{letter_id}/body?images=1").text
    assert 'src="http://evil.test/pixel.gif"' in shown and "onerror" not in shown


def test_html_over_the_bound_is_not_rendered(fresh_site: Site) -> None:
    site = fresh_site
    site.pochta.settings.web.max_html_bytes = 2048
    html = "<p>" + "word " * 1000 + "</p>"
    (letter_id,) = site.deliver(letter(html=html, text="the text part\n"), "alice@example.org")
    c = site.as_user(site.login("alice@example.org"))
    page = c.get(f"/webmail/letters/{letter_id}")
    assert "too large to show" in page.text and "the text part" in page.text
    assert "<iframe" not in page.text
    assert "word" not in c.get(f"/webmail/letters/{letter_id}/body").text


def test_language_follows_the_browser_then_the_switch(site: Site) -> None:
    raw = PHISHING.read_bytes()
    (letter_id,) = site.deliver(raw, "alice@example.org")
    jar = site.login("alice@example.org")
    c = site.as_user(jar)
    en = c.get(f"/webmail/letters/{letter_id}").text
    assert "Careful: this letter shows signs of phishing" in en
    ru = c.get(f"/webmail/letters/{letter_id}", headers={"Accept-Language": "ru-RU,ru;q=0.9"})
    assert "Осторожно: у письма есть признаки фишинга" in ru.text
    assert '<code class="fake">paypa1.com</code> подделывает' in ru.text
    token = site.csrf(jar)
    r = c.post(
        "/webmail/lang", data={"csrf": token, "lang": "ru", "back": f"/webmail/letters/{letter_id}"}
    )
    assert "Осторожно" in r.text  # back on the letter, now in Russian
    r = c.post(
        "/webmail/lang",
        data={"csrf": token, "lang": "en", "back": "//evil.test/"},
        follow_redirects=False,
    )
    assert r.headers["location"] == "/webmail"  # never sent off-site


def test_bad_input_gets_a_clear_page_never_a_500(site: Site) -> None:
    c = site.as_user(site.login("alice@example.org"))
    token = site.csrf(site.login("alice@example.org"))
    c = site.as_user(dict(c.cookies.items()))
    for path in (
        "/webmail/letters/abc",
        "/webmail/letters/0",
        f"/webmail/letters/{2**60}",
        "/webmail/letters/1/attachments/-1",
    ):
        assert c.get(path).status_code == 404, path
    assert c.get("/webmail?folder=Nope").status_code == 404
    assert c.get("/webmail?folder=" + "x" * 300).status_code == 400
    assert c.get("/webmail?before=abc").status_code == 400
    r = c.post("/webmail/login", data={"email": "a" * 400, "password": "x", "csrf": token})
    assert r.status_code in (400, 403)
    big = c.post(
        "/webmail/login",
        content=b"email=" + b"a" * 10_000,
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert big.status_code == 413  # the login body bound of the API (http.max_login_body)


def test_a_failed_login_keeps_the_account_only_when_it_is_a_user(fresh_site: Site) -> None:
    site = fresh_site
    c = site.as_user({})
    token = site.csrf({}, "/webmail/login")
    pasted = "Tr0ub4dor&3-my-real-password"  # typed into the e-mail field
    for email in (pasted, "nobody@example.org", "Bob@Example.org"):
        r = c.post("/webmail/login", data={"email": email, "password": "wrong!", "csrf": token})
        assert r.status_code == 401
    site.pochta.history.flush()
    store = site.pochta.history.store
    assert [(t.name, t.n) for t in store.tallies("login_account", 0)] == [("bob@example.org", 1)]
    assert [(t.name, t.n) for t in store.tallies("login_ip", 0)] == [("testclient", 3)]
    logins = site.as_user(site.login("root@example.org")).get("/admin/logins").text
    assert "bob@example.org" in logins and "testclient" in logins
    assert pasted not in logins and "nobody@example.org" not in logins


def test_admin_top_lists_show_the_newest_under_many_older_cells(fresh_site: Site) -> None:
    site = fresh_site
    store = site.pochta.history.store
    old = int(time.time() // 3600) - 14 * 24 + 2  # two weeks ago, still within the window
    store.add_tallies([Tally(old, "complaint", f"8:{i:016x}:old {i}", 1) for i in range(100_001)])
    store.add_tallies(
        [Tally(old, "login_ip", f"198.51.{i // 256}.{i % 256}", 1) for i in range(100_001)]
    )
    site.pochta.history.feedback("complaint", [(14, 0xABC, "newest@spammer.example")])
    site.pochta.history.feedback("complaint", [(14, 0xABC, "newest@spammer.example")])
    site.pochta.history.login_failed("203.0.113.77", None)
    site.pochta.history.login_failed("203.0.113.77", None)
    site.pochta.history.flush()
    c = site.as_user(site.login("root@example.org"))
    assert "newest@spammer.example" in c.get("/admin/verdicts").text
    assert 'data-subject="203.0.113.77"' in c.get("/admin/logins").text


def test_admin_storage_verdicts_logins_and_audits(site: Site) -> None:
    shared = payload(3, 50_000)
    for n in range(3):
        site.deliver(
            letter(subject=f"r{n}", attachments=[("report.pdf", shared)]),
            "alice@example.org",
            "bob@example.org",
        )
    box = site.pochta.mailbox
    box.deliver(PHISHING.read_bytes(), [box.user("alice@example.org")], scan=True)
    slow_down(site, "bob@example.org")
    site.pochta.history.unscored("spam")  # what the intake tells of a letter past its deadline
    site.pochta.history.flush()
    site.pochta.history.sample()
    root = site.login("root@example.org")
    c = site.as_user(root)
    storage = c.get("/admin/storage").text
    stats = box.stats()
    savings = re.search(r'id="savings">([0-9.]+) %', storage)
    stored = stats["skeleton_bytes"] + stats["blob_bytes"]
    expected = 100 * (stats["logical_bytes"] - stored) / stats["logical_bytes"]
    assert savings is not None and float(savings.group(1)) == round(expected, 1) > 0
    assert f'id="letters">{stats["letters"]}<' in storage and "<svg" in storage
    verdicts = c.get("/admin/verdicts").text
    assert 'id="total-phishing">1<' in verdicts
    assert "PHISH_SENDER_LOOKALIKE" in verdicts
    assert 'id="unscored-total">1<' in verdicts and "1 to Spam" in verdicts
    logins = c.get("/admin/logins")
    row = LexborHTMLParser(logins.text).css_first('tr[data-subject="bob@example.org"]')
    assert row is not None and "slowed" in row.text() and "next check in" in row.text()
    token = site.csrf(root)
    c.post(
        "/admin/logins/reset", data={"csrf": token, "kind": "account", "subject": "bob@example.org"}
    )
    row = LexborHTMLParser(c.get("/admin/logins").text).css_first(
        'tr[data-subject="bob@example.org"]'
    )
    assert row is not None and "0.0 checks counted" in row.text() and "not slowed" in row.text()
    assert site.login("bob@example.org")


def test_admin_sets_flags_and_evacuates_a_pair(fresh_site: Site, tmp_path: Path) -> None:
    site = fresh_site
    data = payload(4, 20_000)
    site.deliver(letter(attachments=[("a.bin", data)]), "alice@example.org")
    second = site.pochta.blobs.add_pair(
        *[
            type(site.pochta.blobs.pairs()[0].disks[0])("local", str(tmp_path / d))
            for d in ("x0", "x1")
        ]
    )
    root = site.login("root@example.org")
    token = site.csrf(root)
    c = site.as_user(root)
    c.post("/admin/pairs/1/flags", data={"csrf": token, "readonly": "true", "locked": "true"})
    pair = site.pochta.blobs.pairdb.get(1)
    assert {f.name for f in pair.flags} == {"READONLY", "LOCKED"}  # type: ignore[union-attr]
    c.post("/admin/pairs/1/flags", data={"csrf": token})
    assert not site.pochta.blobs.pairdb.get(1).flags
    r = c.post("/admin/pairs/1/evacuate", data={"csrf": token})
    assert r.status_code == 200
    deadline = time.monotonic() + 20
    while (job := site.pochta.evacuations.status(1)) is not None and job.running:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert job is not None and job.report is not None and job.report.moved == 1
    assert site.pochta.blobs.filedb.count_live(second.id) == 1
    assert "moved 1, errors 0, left 0" in c.get("/admin/pairs").text
    assert c.post("/admin/pairs/99/evacuate", data={"csrf": token}).status_code == 404


def test_the_banner_needs_a_sign_with_points_and_then_shows_every_sign(site: Site) -> None:
    """A Received host of another domain (0 points: half of all legitimate mail shows it)
    alone raises no banner; with a sign that carries points, the banner lists both."""
    hop = b"Received: from mta.mailer.example (mta.mailer.example [198.51.100.7])\r\n"
    plain = hop + letter(sender="news@shop.example", subject="Our autumn catalogue")
    lure = hop + letter(
        sender="news@shop.example",
        subject="Your account has been suspended",
        text="Dear customer, verify your account within 24 hours or it will be closed.",
    )
    quiet, loud = (
        site.deliver(plain, "alice@example.org")[0],
        site.deliver(lure, "alice@example.org")[0],
    )
    c = site.as_user(site.login("alice@example.org"))
    page = c.get(f"/webmail/letters/{quiet}").text
    assert 'id="phishing-banner"' not in page
    page = c.get(f"/webmail/letters/{loud}").text
    assert 'id="phishing-banner"' in page
    assert 'data-symbol="PHISH_ALARMING_SUBJECT"' in page
    assert 'data-symbol="PHISH_RECEIVED_MISMATCH"' in page


def test_no_password_over_plain_http_from_elsewhere(http_site: Site) -> None:
    """Off connections.cleartext_login_networks (loopback) the form's password is refused
    before it is looked at, with a page that says to use HTTPS."""
    app = http_site.client.app
    far = TestClient(app, client=("192.0.2.5", 50000), base_url="http://testserver")
    token = CSRF.search(far.get("/webmail/login").text)
    assert token is not None
    form = {"email": "alice@example.org", "password": PASSWORD, "csrf": token.group(1)}
    r = far.post("/webmail/login", data=form, follow_redirects=False)
    assert r.status_code == 403 and "HTTPS" in r.text
    api = far.post("/v1/session", json={"email": "alice@example.org", "password": PASSWORD})
    assert api.status_code == 403 and api.json()["error"] == "tls_required"
