"""A generated letter's body as HTML (four layouts, one of them of 2002) and plain text, and
the whole message with the header fields its sender's mail servers would write. Pure.
"""

from __future__ import annotations

import base64
import datetime
import html
import random
import textwrap
from email.header import Header
from email.message import MIMEPart
from email.policy import SMTP
from email.utils import format_datetime

from pochta.antispam.model.legit.compose import Block, Content, Person, Writer
from pochta.antispam.model.legit.orgs import Org

_COLOURS = ("#1a73e8", "#d93025", "#188038", "#e37400", "#6b4fbb", "#00897b", "#263238",
            "#c2185b", "#3949ab", "#5d4037")  # fmt: skip
_FONTS = (
    "Arial, Helvetica, sans-serif",
    "Helvetica, Arial, sans-serif",
    "'Segoe UI', Roboto, sans-serif",
    "Georgia, serif",
    "Verdana, sans-serif",
)


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _block_html(b: Block, colour: str, rng: random.Random, style: str) -> str:
    if b.kind == "heading":
        level = rng.choice(("h2", "h3")) if style != "simple" else "h3"
        return f'<{level} style="margin:16px 0 4px">{_e(b.text)}</{level}>'
    if b.kind == "para":
        text = "<br>".join(_e(line) for line in b.text.split("\n"))
        return (
            f'<p style="margin:0 0 12px;line-height:1.5">{text}</p>'
            if style != "simple"
            else f"<p>{text}</p>"
        )
    if b.kind == "button":
        if style == "simple":
            return f'<p><a href="{_e(b.url)}">{_e(b.text)}</a></p>'
        return (
            '<table role="presentation" cellpadding="0" cellspacing="0"><tr>'
            f'<td style="background:{colour};border-radius:4px;padding:10px 18px">'
            f'<a href="{_e(b.url)}" style="color:#ffffff;text-decoration:none;font-weight:bold">'
            f"{_e(b.text)}</a></td></tr></table>"
        )
    if b.kind == "link":
        a = f'<a href="{_e(b.url)}" style="color:{colour}">{_e(b.text)}</a>'
        return f'<p style="margin:4px 0">{a}</p>'
    if b.kind in ("items", "summary"):
        rows = "".join(
            f'<tr><td style="padding:4px 8px">{_e(k)}</td>'
            f'<td style="padding:4px 8px;text-align:right">{_e(v)}</td></tr>'
            for k, v in b.rows
        )
        table = '<table role="presentation" width="100%" cellpadding="0" cellspacing="0">'
        return f"{table}{rows}</table>"
    if b.kind == "image":
        width = rng.choice((120, 160, 200, 560, 600))
        src = f'src="{_e(b.url)}" alt="{_e(b.text)}" width="{width}"'
        return f'<img {src} style="display:block;border:0">'
    if b.kind == "small":
        return f'<p style="font-size:12px;color:#777777;margin:4px 0">{_e(b.text)}</p>'
    raise ValueError(b.kind)


def _block_legacy(b: Block, colour: str, rng: random.Random, font: str, domain: str) -> str:
    """One block as HTML of around 2002: FONT tags, upper-case tag names, tables."""
    f = f'<FONT FACE="{font}" SIZE="2">'
    if b.kind == "heading":
        size = rng.choice(("3", "4", "5"))
        return f'<FONT FACE="{font}" SIZE="{size}" COLOR="{colour}"><B>{_e(b.text)}</B></FONT><BR>'
    if b.kind == "para":
        text = "<BR>".join(_e(line) for line in b.text.split("\n"))
        return f"{f}{text}</FONT><BR><BR>"
    if b.kind == "button":
        if rng.random() < 0.5:
            host = f"{rng.choice(('images', 'www', 'img'))}.{domain}"
            img = f"http://{host}/btn_{rng.randrange(9)}.gif"
            return (f'<A HREF="{_e(b.url)}"><IMG SRC="{img}" ALT="{_e(b.text)}" BORDER="0" '
                    f'WIDTH="{rng.choice((90, 120, 150))}" HEIGHT="{rng.choice((20, 24, 30))}">'
                    "</A><BR>")  # fmt: skip
        return f'{f}<A HREF="{_e(b.url)}"><B>{_e(b.text)}</B></A></FONT><BR>'
    if b.kind == "link":
        return f'{f}<A HREF="{_e(b.url)}">{_e(b.text or b.url)}</A></FONT><BR>'
    if b.kind in ("items", "summary"):
        rows = "".join(
            f"<TR><TD>{f}{_e(k)}</FONT></TD><TD ALIGN=\"RIGHT\">{f}{_e(v)}</FONT></TD></TR>"
            for k, v in b.rows
        )
        return f'<TABLE WIDTH="100%" BORDER="0" CELLPADDING="2">{rows}</TABLE>'
    if b.kind == "image":
        return (f'<IMG SRC="{_e(b.url)}" ALT="{_e(b.text)}" WIDTH="{rng.choice((150, 300, 600))}" '
                f'HEIGHT="{rng.choice((60, 100, 200))}" BORDER="0"><BR>')  # fmt: skip
    if b.kind == "small":
        return f'<FONT FACE="{font}" SIZE="1" COLOR="#666666">{_e(b.text)}</FONT><BR>'
    raise ValueError(b.kind)


def to_html(c: Content, org: Org, rng: random.Random, charset: str = "utf-8") -> str:
    colour = rng.choice(_COLOURS)
    font = rng.choice(_FONTS)
    if org.layout == "legacy":
        face = font.replace("'", "").split(",")[0]
        spacer = f'<IMG SRC="http://www.{org.domain}/images/spacer.gif" WIDTH="1" HEIGHT="10">'
        body = "\n".join(_block_legacy(b, colour, rng, face, org.domain) for b in c.blocks)
        foot = "\n".join(_block_legacy(b, colour, rng, face, org.domain) for b in c.footer)
        return (
            f"<HTML>\n<HEAD>\n<TITLE>{_e(c.subject)}</TITLE>\n"
            f'<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset={charset}">\n</HEAD>\n'
            f'<BODY BGCOLOR="#FFFFFF" TEXT="#000000" LINK="{colour}">\n<CENTER>\n'
            '<TABLE WIDTH="600" BORDER="0" CELLPADDING="0" CELLSPACING="0">\n'
            f"<TR><TD>{spacer if rng.random() < 0.5 else ''}\n{body}\n</TD></TR>\n"
            f'<TR><TD BGCOLOR="#EEEEEE">\n{foot}\n</TD></TR>\n</TABLE>\n</CENTER>\n'
            "</BODY>\n</HTML>\n"
        )
    style = org.layout if org.layout != "plain" else "simple"
    body = "\n".join(_block_html(b, colour, rng, style) for b in c.blocks)
    foot = "\n".join(_block_html(b, colour, rng, style) for b in c.footer)
    pre = ""
    if c.preheader and style != "simple" and rng.random() < 0.6:
        pre = (
            '<div style="display:none;max-height:0;overflow:hidden;mso-hide:all">'
            f"{_e(c.preheader)}</div>\n"
        )
    head = f"<title>{_e(c.subject)}</title>"
    if style == "table":
        return (
            '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" '
            '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n'
            '<html xmlns="http://www.w3.org/1999/xhtml"><head>'
            f'<meta http-equiv="Content-Type" content="text/html; charset={charset}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1.0">'
            f"{head}</head>\n"
            f'<body style="margin:0;padding:0;background:#f4f4f4;font-family:{font}">\n{pre}'
            '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" '
            'bgcolor="#f4f4f4"><tr><td align="center">\n'
            '<table role="presentation" width="600" cellpadding="0" cellspacing="0" '
            'bgcolor="#ffffff" style="max-width:600px"><tr><td style="padding:24px 28px">\n'
            f'{body}\n</td></tr>\n<tr><td style="padding:16px 28px;background:#fafafa">\n'
            f"{foot}\n</td></tr></table>\n</td></tr></table>\n</body></html>\n"
        )
    if style == "div":
        return (
            f'<!doctype html>\n<html><head><meta charset="{charset}">'
            f"{head}<style>body{{font-family:{font};color:#222}}"
            ".wrap{max-width:640px;margin:0 auto;padding:20px}"
            f"a{{color:{colour}}}.foot{{font-size:12px;color:#888}}</style></head>\n"
            f'<body>\n{pre}<div class="wrap">\n{body}\n<div class="foot">\n{foot}\n</div>\n'
            "</div>\n</body></html>\n"
        )
    return f"<html><body>\n{body}\n<hr>\n{foot}\n</body></html>\n"


def _block_text(b: Block, rng: random.Random, link_style: int) -> str:
    if b.kind == "heading":
        return b.text.upper() if link_style == 2 else b.text
    if b.kind in ("para", "small"):
        return b.text
    if b.kind in ("button", "link"):
        return (f"{b.text}: {b.url}", f"{b.text} <{b.url}>", f"{b.text}\n{b.url}")[link_style]
    if b.kind in ("items", "summary"):
        return "\n".join(f"{k}  {v}".strip() for k, v in b.rows)
    return ""


def to_text(c: Content, rng: random.Random) -> str:
    link_style = rng.randrange(3)
    parts = [_block_text(b, rng, link_style) for b in c.blocks]
    parts.append("--" if rng.random() < 0.5 else "")
    parts += [_block_text(b, rng, link_style) for b in c.footer]
    return "\n\n".join(p for p in parts if p) + "\n"


def _charset(org: Org, rng: random.Random) -> str:
    """utf-8, or for some senders an older charset (when the text fits it): in 2002 most."""
    old = org.era == "2002"
    if org.lang == "ru" and rng.random() < (0.8 if old else 0.25):
        return rng.choice(("koi8-r", "windows-1251"))
    if org.lang == "en" and old and rng.random() < 0.8:
        return rng.choice(("iso-8859-1", "us-ascii", "windows-1252"))
    return "utf-8"


def _fits(text: str, charset: str) -> str:
    try:
        text.encode(charset)
    except UnicodeEncodeError:
        return "utf-8"
    return charset


def _part(text: str, subtype: str, charset: str, rng: random.Random) -> MIMEPart:
    part = MIMEPart(policy=SMTP)
    charset = _fits(text, charset)
    if text.isascii():
        cte = rng.choice(("7bit", "quoted-printable"))
    else:
        cte = rng.choice(("quoted-printable", "base64", "8bit"))
    part.set_content(text, subtype=subtype, charset=charset, cte=cte)
    return part


def _fold(name: str, value: str) -> str:
    """One header field, folded at spaces before 78 characters (RFC 5322)."""
    if "\r\n" in value:  # already folded (an encoded display name or subject)
        return f"{name}: {value}\r\n"
    line, out = f"{name}:", []
    for word in value.split(" "):
        if len(line) + 1 + len(word) > 78 and line.strip():
            out.append(line)
            line = " " + word
        else:
            line += " " + word
    out.append(line)
    return "\r\n".join(out) + "\r\n"


def _words(text: str) -> str:
    """``text`` as header text: RFC 2047 encoded words when it is not ASCII."""
    if text.isascii():
        return text
    return Header(text, "utf-8").encode(linesep="\r\n")


def _address(name: str, addr: str) -> str:
    return f"{_words(name)} <{addr}>" if name else addr


def _boundary(rng: random.Random) -> str:
    """A MIME boundary from ``rng`` (the standard library's own would not be deterministic)."""
    style = rng.randrange(3)
    token = "".join(rng.choice("0123456789abcdef") for _ in range(24))
    return ("----=_Part_" + token, "b1_" + token, "=_" + token.upper())[style]


def _fake_b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(bytes(rng.randrange(256) for _ in range(n))).decode()


def message(
    c: Content, org: Org, to: Person, w: Writer, when: datetime.datetime, rng: random.Random
) -> tuple[bytes, str, str]:
    """The letter's bytes, its envelope sender and the sending server's IP."""
    esp = org.esp
    n = rng.randrange(1, 40)
    ident = rng.randrange(10_000, 9_999_999)
    user = to.email.replace("@", "=")
    fmt = {"domain": org.domain, "id": ident, "id4": ident % 10_000, "n": n, "user": user,
           "token": w.token(22), "token16": w.token(16), "token8": w.token(8),
           "list": rng.choice(("news", "announce", "offers", "members"))}  # fmt: skip
    old = org.era == "2002"
    bounce = c.bounce or esp.bounce.format(**fmt)
    host = esp.host.format(**fmt)
    ip = f"{org.ip}{rng.randrange(2, 250)}"
    rcpt_domain = to.email.partition("@")[2]
    h: list[tuple[str, str]] = [("Return-Path", f"<{bounce}>")]
    arrived = when + datetime.timedelta(seconds=rng.randrange(1, 90))
    h.append((
        "Received",
        f"from {host} ({host} [{ip}]) by mx{rng.randrange(1, 9)}.{rcpt_domain} with "
        f"{rng.choice(('SMTP', 'ESMTP') if old else ('ESMTPS', 'ESMTP'))} id {w.token(12)} "
        f"for <{to.email}>; "
        f"{format_datetime(arrived)}",
    ))  # fmt: skip
    if rng.random() < 0.5:
        h.append((
            "Received",
            f"from {rng.choice(('localhost', 'app', 'worker'))}{rng.randrange(1, 9)}.internal "
            f"({rng.choice(('127.0.0.1', '10.0.3.12', '10.12.0.7'))}) by {host} "
            f"(Postfix) with ESMTP id {w.token(10)}; {format_datetime(when)}",
        ))  # fmt: skip
    if not old and rng.random() < (0.9 if org.category == "government" else 0.7):
        signature = " ".join(textwrap.wrap(_fake_b64(rng, 256), 64))
        h.append((
            "DKIM-Signature",
            f"v=1; a=rsa-sha256; c=relaxed/relaxed; d={org.domain}; "
            f"s={rng.choice(('s1', 'k1', 'mail', 'dkim', 'selector1', 'sg'))}; "
            f"t={int(when.timestamp())}; h=from:to:subject:date:message-id:mime-version; "
            f"bh={_fake_b64(rng, 32)}; b={signature}",
        ))  # fmt: skip
    display = org.brand if rng.random() < 0.95 else ""
    if c.sender:
        h.append(("From", _address(c.sender_name, c.sender)))
    else:
        h.append(("From", _address(display, f"{org.mailbox}@{org.domain}")))
    if c.to:  # a list's own address, or none shown (a mailing sent with Bcc)
        h.append(("To", c.to))
    else:
        h.append(("To", _address(to.full if rng.random() < 0.6 else "", to.email)))
    h.append(("Subject", _words(c.subject)))
    zone = datetime.timezone(datetime.timedelta(hours=rng.choice((-5, 0, 1, 3))))
    h.append(("Date", format_datetime(when.astimezone(zone))))
    if esp.name in ("own", "own-click", "own-list", "own-plain") or rng.random() < 0.4:
        mid_domain = rng.choice((org.domain, host.split(".", 1)[-1], org.domain, host))
    else:  # an ESP writes the Message-ID on its own domain
        mid_domain = rng.choice((host, host.split(".", 1)[-1], host.split(".", 1)[-1]))
    if old and rng.random() < 0.6:
        stamp = when.strftime("%Y%m%d%H%M%S")
        mid = rng.choice((f"<{stamp}.{ident}.qmail@{host}>", f"<{stamp}.{w.token(8)}@{mid_domain}>",
                          f"<{ident:x}$0{n}@{host}>"))  # fmt: skip
    else:
        mid = f"<{w.token(20)}.{ident}@{mid_domain}>"
    h.append(("Message-ID", mid))
    if rng.random() < 0.15:
        h.append(("Reply-To", f"support@{org.domain}"))
    if (c.bulk or rng.random() < 0.1) and not any(n == "List-Unsubscribe" for n, _ in c.headers):
        if rng.random() < (0.35 if old else 0.85) or not c.bulk:
            target = c.unsubscribe or f"https://{org.domain}/unsubscribe?u={w.token(10)}"
            mailto = f"<mailto:unsubscribe-{ident}@{org.domain}>"
            h.append(
                ("List-Unsubscribe", rng.choice((f"<{target}>", f"{mailto}, <{target}>", mailto)))
            )
            if rng.random() < 0.5 and not old:
                h.append(("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"))
        if c.bulk and rng.random() < 0.2:
            h.append(("List-Id", f"{_words(org.brand)} <news.{org.domain}>"))
        if c.bulk and rng.random() < 0.3:
            h.append(("Precedence", "bulk"))
    for name, value in esp.headers:
        if rng.random() < 0.8:
            h.append((name, value.format(**fmt)))
    h.extend(c.headers)
    h.append(("MIME-Version", "1.0"))
    charset = _charset(org, rng)
    text = to_text(c, rng)
    with_text = org.layout == "plain" or c.text_only or rng.random() < org.text_part
    with_html = org.layout != "plain" and not c.text_only
    page = ""
    if with_html:
        page = to_html(c, org, rng, charset)
        if _fits(page, charset) != charset:  # the page names the charset it is sent in
            page = page.replace(charset, "utf-8")
    if with_html and with_text:
        body = _part(text, "plain", charset, rng)
        body.make_alternative()
        body.set_boundary(_boundary(rng))
        body.attach(_part(page, "html", charset, rng))
    elif with_html:
        body = _part(page, "html", charset, rng)
    else:
        body = _part(text, "plain", charset, rng)
    if c.attachments:
        body.make_mixed()
        body.set_boundary(_boundary(rng))
        for name, ctype, data in c.attachments:
            main, _, sub = ctype.partition("/")
            part = MIMEPart(policy=SMTP)
            if main == "text":
                part.set_content(
                    data.decode(), subtype=sub, disposition="attachment", filename=name
                )
            else:
                part.set_content(
                    data, maintype=main, subtype=sub, disposition="attachment", filename=name
                )
            body.attach(part)
    head = "".join(_fold(name, value) for name, value in h).encode("ascii")
    return head + body.as_bytes(policy=SMTP), bounce, ip
