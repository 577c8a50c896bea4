"""Letters for tests: built with the standard library, deterministic."""

from __future__ import annotations

import random
from email.message import EmailMessage
from email.policy import SMTP


def payload(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def letter(
    *,
    sender: str = "Sender <sender@example.net>",
    to: str = "alice@example.org",
    subject: str = "Quarterly report",
    text: str = "Please find the report attached.\n",
    attachments: list[tuple[str, bytes]] | None = None,
    html: str | None = None,
) -> bytes:
    """A letter with CRLF line endings (as SMTP carries it) and base64 attachments."""
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Date"] = "Mon, 23 Nov 2026 10:00:00 +0000"
    msg["Message-ID"] = f"<{random.Random(subject).getrandbits(64):x}@example.net>"
    msg.set_content(text)
    if html is not None:
        msg.add_alternative(html, subtype="html")
    for name, data in attachments or []:
        msg.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return msg.as_bytes(policy=SMTP)
