"""Text decoded from a letter is always encodable: no lone surrogate and no Python-only codec
ever reaches storage, the API or a page (found in review: a UTF-7 ``+2D0-`` in a Subject made
a letter impossible to deliver, and in a body made it impossible to open)."""

from __future__ import annotations

import warnings
from pathlib import Path

from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.config import load_settings
from pochta.mime.headers import clean_text, decode_bytes
from pochta.mime.letter import parse
from pochta.server.http import create_app

CHARSETS = [
    "utf-7", "utf-8", "utf-16", "koi8-r", "latin-1", "unicode_escape", "raw_unicode_escape",
    "punycode", "idna", "base64", "zlib", "rot13", "undefined", "no-such-charset", None,
]  # fmt: skip
UTF7_LONE = b"a+2D0-b"  # UTF-7 for a lone high surrogate


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64), charset=st.sampled_from(CHARSETS))
def test_decoded_text_is_always_encodable(data: bytes, charset: str | None) -> None:
    decode_bytes(data, charset).encode("utf-8")
    decode_bytes(UTF7_LONE + data, charset).encode("utf-8")


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    assert decode_bytes(UTF7_LONE, "utf-7") == "a\ufffdb"
    assert clean_text("=?utf-7?Q?a+2D0-b?=") == "a\ufffdb"
    assert decode_bytes(b"\\ud800x", "unicode_escape") == "\\ud800x"  # not a charset: UTF-8
    assert decode_bytes(b"xyz", "base64") == "xyz"


LETTER = (
    b"From: x@example.net\r\nTo: alice@example.org\r\nSubject: =?utf-7?Q?a+2D0-b?=\r\n"
    b"Content-Type: text/plain; charset=utf-7\r\n\r\nhi +2D0- there\r\n"
)


def test_such_a_letter_is_delivered_and_opened(tmp_path: Path) -> None:
    parsed = parse(LETTER)
    assert parsed.subject == "a\ufffdb"
    s = load_settings(
        data_dir=tmp_path / "data",
        smtp={"enabled": False},
        imap={"enabled": False},
        antispam={"pool_processes": 0},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        client = TestClient(create_app(s), base_url="https://testserver")
    with client:
        box = client.app.state.pochta.mailbox  # type: ignore[attr-defined]
        user = box.add_user("alice@example.org", "a long enough password")
        (letter_id,) = box.deliver(LETTER, [user], scan=True).ids
        token = client.post(
            "/v1/session", json={"email": "alice@example.org", "password": "a long enough password"}
        ).json()["token"]
        r = client.get(f"/v1/messages/{letter_id}", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        assert r.json()["subject"] == "a\ufffdb"
        assert "hi \ufffd there" in r.json()["text"]
        raw = client.get(
            f"/v1/messages/{letter_id}/raw", headers={"Authorization": f"Bearer {token}"}
        )
        assert raw.content.endswith(LETTER)  # stored byte for byte
