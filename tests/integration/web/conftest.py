"""A real ``pochta serve`` and Debian's chromium driven by Playwright (no browser download:
``playwright install`` is never run; scripts/test installs the ``chromium`` package).

One browser for the whole package; each test gets a fresh context (no shared cookies).
Screenshots go to ``$POCHTA_ARTIFACTS/web`` (default ``tmp/artifacts/web`` in the work tree).
"""

from __future__ import annotations

import os
import shutil
import smtplib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from pochta.guard.passwords import hash_password
from pochta.mailbox.index.sqlite import SQLiteIndex
from tests.integration.conftest import Server, eventually, start_server

PASSWORD = "a long enough password"
ALICE, BOB, ROOT = "alice@example.org", "bob@example.org", "root@example.org"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = (
    Path(os.environ.get("POCHTA_ARTIFACTS") or Path(__file__).parents[3] / "tmp" / "artifacts")
    / "web"
)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip("no chromium: `apt-get install chromium` (scripts/test installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@dataclass
class Site:
    server: Server

    @property
    def url(self) -> str:
        return self.server.url

    def send(self, raw: bytes, *rcpts: str, helo: str = "mail.sender.example") -> None:
        """Send, and return once every recipient has the letter (``smtp.answer = "queued"``
        stores it a moment after its 250)."""
        before = {r: self.count(r) for r in rcpts}
        with smtplib.SMTP("127.0.0.1", self.server.smtp_port, local_hostname=helo) as smtp:
            refused = smtp.sendmail("bounce@sender.example", list(rcpts), raw)
        for r in rcpts:
            if r not in refused:
                eventually(lambda r=r: self.count(r), lambda n, r=r: n > before[r], what=r)

    def count(self, email: str) -> int:
        """The account's letters in every folder."""
        with self.api(email) as http:
            return sum(int(f["total"]) for f in http.get("/v1/folders").json())

    def api(self, email: str) -> httpx.Client:
        r = httpx.post(f"{self.url}/v1/session", json={"email": email, "password": PASSWORD})
        r.raise_for_status()
        token = r.json()["token"]
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )


@pytest.fixture(scope="package")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """``pochta serve`` with three accounts (root is an admin); Valkyrie off inside the
    server (the admin test runs a pass itself)."""
    tmp = tmp_path_factory.mktemp("web")
    data = tmp / "data"
    index = SQLiteIndex(data / "mailbox.sqlite3")
    for email in (ALICE, BOB, ROOT):
        index.add_user(email, hash_password(PASSWORD), admin=email == ROOT)
    index.close()
    server = start_server(
        data,
        tmp / "serve.log",
        settings={
            "POCHTA_VALKYRIE__ENABLED": "false",
            "POCHTA_ANTISPAM__POOL_PROCESSES": "1",
        },
    )
    yield Site(server)
    if server.proc.poll() is None:
        server.stop()


def shot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
