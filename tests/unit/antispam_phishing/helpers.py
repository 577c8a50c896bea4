"""Helpers for the phishing, authentication and rules tests: the test set's manifest, DKIM
keys and signing, the offline DNS zone, small letters."""

from __future__ import annotations

import base64
import tomllib
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.policy import SMTP
from pathlib import Path
from typing import Any

import dkim
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from pochta.antispam.auth.resolver import FixtureResolver

DATA = Path(__file__).resolve().parents[2] / "data" / "phishing"
SIGNED_HEADERS = [b"from", b"to", b"subject", b"date", b"message-id"]


@dataclass(frozen=True)
class Key:
    private_pem: bytes
    txt: str  # the DNS record: v=DKIM1; k=rsa; p=...


def make_key(bits: int = 2048) -> Key:
    private = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return Key(pem, "v=DKIM1; k=rsa; p=" + base64.b64encode(public).decode())


def crlf(raw: bytes) -> bytes:
    """A letter as SMTP carries it: CRLF line ends."""
    return raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def sign(raw: bytes, key: Key, domain: str, selector: str) -> bytes:
    signature = dkim.sign(
        raw, selector.encode(), domain.encode(), key.private_pem, include_headers=SIGNED_HEADERS
    )
    return signature + raw


@dataclass
class Case:
    file: str
    lang: str
    verdict: str
    what: str
    signs: list[str]
    envelope: dict[str, str]
    auth: dict[str, str]
    dkim: dict[str, Any] | None = None
    features: dict[str, float] = field(default_factory=dict)

    @property
    def symbols(self) -> set[str]:
        return {f"PHISH_{s}" for s in self.signs}

    def raw(self, key: Key) -> bytes:
        """The letter as delivered: CRLF, DKIM-signed when the manifest says so."""
        raw = crlf((DATA / self.file).read_bytes())
        if self.dkim is not None:
            raw = sign(raw, key, self.dkim["domain"], self.dkim["selector"])
            if self.dkim.get("tamper"):  # the body changed after signing
                raw += b"--\r\nSent from my phone\r\n"
        return raw


def manifest() -> dict[str, Any]:
    with (DATA / "manifest.toml").open("rb") as fh:
        return tomllib.load(fh)


def cases() -> list[Case]:
    return [Case(**item) for item in manifest()["letter"]]


def zone(key: Key) -> FixtureResolver:
    """The manifest's DNS, with the test key under every selector a letter is signed with."""
    resolver = FixtureResolver(manifest()["dns"])
    for case in cases():
        if case.dkim is not None:
            resolver.add(
                f"{case.dkim['selector']}._domainkey.{case.dkim['domain']}", "TXT", key.txt
            )
    return resolver


def letter(
    *,
    sender: str = "Sender <sender@example.net>",
    subject: str = "Hello",
    text: str | None = "Hi John,\nsee you tomorrow.\n",
    html: str | None = None,
    headers: dict[str, str] | None = None,
    files: list[tuple[str, bytes]] | None = None,
) -> bytes:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = "john@pochta.test"
    msg["Subject"] = subject
    msg["Date"] = "Mon, 23 Nov 2026 10:00:00 +0000"
    msg["Message-ID"] = "<t1@example.net>"
    for k, v in (headers or {}).items():
        msg[k] = v
    if text is not None:
        msg.set_content(text)
        if html is not None:
            msg.add_alternative(html, subtype="html")
    elif html is not None:
        msg.set_content(html, subtype="html")
    for name, data in files or []:
        msg.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return msg.as_bytes(policy=SMTP)
