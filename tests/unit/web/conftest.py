"""The pages through FastAPI's TestClient (real SQLite and disks; no server, no browser)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pochta.config import load_settings
from pochta.server.http import create_app

PASSWORD = "a long enough password"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Site:
    client: TestClient

    @property
    def pochta(self):  # type: ignore[no-untyped-def]
        return self.client.app.state.pochta  # type: ignore[attr-defined]

    def as_user(self, jar: dict[str, str]) -> TestClient:
        """The client with one user's cookies (and no one else's)."""
        self.client.cookies.clear()
        for name, value in jar.items():
            self.client.cookies.set(name, value)
        return self.client

    def login(self, email: str, password: str = PASSWORD) -> dict[str, str]:
        """Log in through the form; the session's cookies."""
        c = self.as_user({})
        page = c.get("/webmail/login")
        token = CSRF.search(page.text)
        assert token is not None
        r = c.post(
            "/webmail/login",
            data={"email": email, "password": password, "csrf": token.group(1)},
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text
        return dict(c.cookies.items())

    def csrf(self, jar: dict[str, str], path: str = "/webmail") -> str:
        page = self.as_user(jar).get(path)
        token = CSRF.search(page.text)
        assert token is not None, page.text
        return token.group(1)

    def deliver(self, raw: bytes, *emails: str) -> list[int]:
        box = self.pochta.mailbox
        ids: list[int] = box.deliver(raw, [box.user(e) for e in emails]).ids
        return ids


def make_site(
    tmp_path: Path,
    base_url: str = "https://testserver",
    client: tuple[str, int] = ("testclient", 50000),
) -> Iterator[Site]:
    """A site as a browser sees it over HTTPS (a password goes over plain HTTP only from
    connections.cleartext_login_networks: ``client`` must then be on loopback)."""
    settings = load_settings(
        data_dir=tmp_path / "data",
        smtp={"enabled": False},
        imap={"enabled": False},
        valkyrie={"enabled": False},
        antispam={"pool_processes": 0},
    )
    with TestClient(create_app(settings), base_url=base_url, client=client) as client_:
        box = client_.app.state.pochta.mailbox  # type: ignore[attr-defined]
        box.add_user("alice@example.org", PASSWORD)
        box.add_user("bob@example.org", PASSWORD)
        box.add_user("root@example.org", PASSWORD, admin=True)
        yield Site(client_)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """One site for a module's tests (each test uses letters of its own)."""
    yield from make_site(tmp_path_factory.mktemp("site"))


@pytest.fixture
def fresh_site(tmp_path: Path) -> Iterator[Site]:
    """A site of its own, for a test that changes what others rely on (pairs, settings)."""
    yield from make_site(tmp_path)
