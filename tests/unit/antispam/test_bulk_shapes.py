"""Two bulk mailers' shapes as features (issue 28): a Message-ID no mail program writes, and
recipients hidden in Bcc; what counts and what must not (a list's letter, a person's letter
with a normal Message-ID)."""

from __future__ import annotations

import pytest

from pochta.antispam import features
from pochta.antispam.model import design
from pochta.mime.letter import parse


def shapes(head: str) -> tuple[float, float]:
    raw = f"From: Sales <sales@shop.example.com>\r\n{head}Subject: Offer\r\n\r\nHello\r\n"
    f = features.extract(parse(raw.encode()))
    return f["headers.message_id_malformed"], f["recipients.hidden"]


@pytest.mark.parametrize(
    "mid",
    ["PM200011:12:45 AM", "12345", "<12345>", "<a@b@c>", "a@b.example", "<a@>", "<a b@c.example>"],
)
def test_a_message_id_no_mail_program_writes(mid: str) -> None:
    assert shapes(f"To: ann@mail.example.org\r\nMessage-ID: {mid}\r\n")[0] == 1.0


@pytest.mark.parametrize("mid", ["<20020912182131.20322.qmail@rts.example.com>", " <x@y> "])
def test_a_proper_message_id(mid: str) -> None:
    assert shapes(f"To: ann@mail.example.org\r\nMessage-ID: {mid}\r\n")[0] == 0.0


def test_no_message_id_is_another_feature() -> None:
    assert shapes("To: ann@mail.example.org\r\n")[0] == 0.0


@pytest.mark.parametrize(
    "to",
    [
        "",
        "To: undisclosed-recipients:;\r\n",
        "To: <Undisclosed-Recipient:;@spamassassin.example.org>\r\n",
        "To: sales@shop.example.com\r\n",
        'To: "*" <SALES@shop.example.com>\r\n',
    ],
)
def test_recipients_hidden(to: str) -> None:
    assert shapes(to + "Message-ID: <1@shop.example.com>\r\n")[1] == 1.0


@pytest.mark.parametrize(
    "head",
    [
        "To: ann@mail.example.org\r\n",
        "To: sales@shop.example.com\r\nCc: ann@mail.example.org\r\n",
        # a list's letter names the list, or nobody (a digest gateway)
        "To: undisclosed-recipients:;\r\nList-Id: <talk.lists.example.org>\r\n",
        "List-Post: <mailto:talk@lists.example.org>\r\n",
    ],
)
def test_recipients_named(head: str) -> None:
    assert shapes(head + "Message-ID: <1@shop.example.com>\r\n")[1] == 0.0


def test_both_only_ever_push_toward_spam() -> None:
    for name in ("headers.message_id_malformed", "recipients.hidden"):
        assert design.decision(name) == "monotone +1"
