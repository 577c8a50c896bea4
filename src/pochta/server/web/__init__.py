"""Webmail (``/webmail``) and admin (``/admin``) pages, served by ``pochta serve`` from the same
accounts and services as the HTTP API.

Built with what the stack has: FastAPI routers rendering Jinja2 templates, plain HTML forms,
one stylesheet and server-drawn SVG charts, all shipped in the package (no CDN; works
offline). No JavaScript at all — not htmx either: every action is a form post and a redirect,
so the pages can forbid every script in their Content-Security-Policy, which is the strongest
defence a page that shows hostile HTML can have (htmx would need ``script-src 'self'`` and
would act on ``hx-*`` attributes wherever they appear).

    webmail.py   log in and out, folders, a folder's letters, a letter, its attachments,
                 spam / not spam / delete / move, the language switch
    admin.py     storage, pairs, Valkyrie, verdicts, login limits, leak audits
    pages.py     who is looking, CSRF, errors as pages
    security.py  cookies, CSRF tokens, CSP
    sanitize.py  a letter's HTML made safe (nh3)
    evidence.py  phishing signs laid out for the banner
    charts.py    SVG charts
    i18n.py      Russian and English
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from pochta.server.web import admin, webmail

STATIC = Path(__file__).parent / "static"


def install(app: FastAPI) -> None:
    """Add the pages to the application (``app.state.web_secret`` is set by the lifespan)."""
    app.include_router(webmail.router)
    app.include_router(admin.router)
    app.mount("/web-static", StaticFiles(directory=STATIC), name="web-static")
