"""Fuzz: the letter parser, split and reassemble (round trip byte-exact), and the scan API
(letter-shaped bodies: never a 5xx)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from hypothesis import example, given
from hypothesis import strategies as st

from pochta.config import load_settings
from pochta.mime.letter import parse
from pochta.mime.split import reassemble, split
from pochta.server.http import create_app
from tests.fuzz.conftest import fuzz_settings
from tests.fuzz.letters import letter

ANY = st.one_of(letter(), st.binary(max_size=2000))


@fuzz_settings(300)
@given(raw=ANY, inline_limit=st.sampled_from([0, 16, 4096]))
@example(raw=b"", inline_limit=0)
@example(raw=b"\r\n\r\n", inline_limit=0)
@example(raw=b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n", inline_limit=0)
def test_parse_never_raises_and_split_round_trips(raw: bytes, inline_limit: int) -> None:
    parsed = parse(raw, inline_limit=inline_limit)
    assert parsed.raw == raw
    s = split(raw, inline_limit=inline_limit)
    contents = {p.index: p.content for p in s.parts}
    assert reassemble(s.skeleton, lambda i, ref: contents[i]) == raw


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data = tmp_path_factory.mktemp("fuzz") / "data"
    settings = load_settings(
        data_dir=data,
        smtp={"enabled": False},
        imap={"enabled": False},
        antispam={"pool_processes": 0},
    )
    with TestClient(create_app(settings)) as c:
        yield c


@fuzz_settings(60)
@given(raw=letter(), ip=st.sampled_from([None, "192.0.2.1", "not an ip", "::1"]))
def test_scan_api_answers_every_letter_without_a_5xx(
    client: TestClient, raw: bytes, ip: str | None
) -> None:
    params = {"ip": ip, "mail_from": "a@example.org"} if ip else {}
    token = client.app.state.service_token  # type: ignore[attr-defined]
    r = client.post(
        "/v1/scan",
        content=raw,
        params=params,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "message/rfc822"},
    )
    assert r.status_code < 500, r.text
    if raw:
        assert r.status_code == 200, r.text
        assert r.json()["verdict"] in ("ham", "spam", "phishing")
