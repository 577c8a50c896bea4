"""The webmail: log in, folders with unread counts, a folder a page at a time, a letter
(text, or sanitized HTML in a sandboxed frame) with its phishing banner, attachments, and
"spam" / "not spam" / delete / move, and after "spam" / "not spam" the offer to put the
sender on the reader's own list (``/webmail/lists``: the list, with remove). Every action is
the same service call as the HTTP API (``Mailbox.login``, ``update``, ``delete``, the lists'
``add``, ``remove``...), so limits, ownership and the shingles' counters behave the same.
Plain HTML forms, no script."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Form, Path, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from pochta import errors
from pochta.antispam import personal
from pochta.antispam.shingles.registry import Shingle, ShingleType
from pochta.antispam.signs import protected
from pochta.antispam.signs.registry import Sign
from pochta.mailbox.lists import SenderListService
from pochta.mailbox.service import SPAM
from pochta.mime import normalize
from pochta.mime.letter import Letter
from pochta.server.auth import password_allowed
from pochta.server.web import security
from pochta.server.web.evidence import shown
from pochta.server.web.i18n import LANGS
from pochta.server.web.pages import (
    Anyone,
    PageRoute,
    Posted,
    PostedReader,
    Reader,
    Viewer,
    redirect,
    render,
)
from pochta.server.web.sanitize import count_remote_images, sanitize
from pochta.types import Folder, StoredLetter

router = APIRouter(route_class=PageRoute, include_in_schema=False)

LetterId = Annotated[int, Path(ge=1, le=2**53 - 1)]
FolderField = Annotated[str, Form(min_length=1, max_length=200)]
NOTICES = frozenset({"moved", "deleted", "listed"})
OFFERS = frozenset({"allow", "block"})
SENDER_MIN_LETTERS = 20
"""Letters from one address over 14 days before its letters' pages say anything of them: with
fewer, a share could tell a reader what one other reader did."""


def _folder_url(folder: str, **more: str | int) -> str:
    return "/webmail?" + urlencode({"folder": folder, **more})


def _letter_url(letter_id: int, **more: str | int) -> str:
    return f"/webmail/letters/{letter_id}" + (f"?{urlencode(more)}" if more else "")


@router.get("/")
def home() -> Response:
    return redirect("/webmail")


@router.get("/webmail/login")
def login_form(request: Request, v: Anyone) -> Response:
    if v.user is not None:
        return redirect("/webmail")
    return _login_page(request, v, 200, "")


def _login_page(request: Request, v: Viewer, status: int, error: str, email: str = "") -> Response:
    nonce = request.cookies.get(security.LOGIN_COOKIE) or security.new_nonce()
    csrf = security.csrf_token(request.app.state.web_secret, nonce)
    response = render(v, "login.html", status, error=error, email=email, login_csrf=csrf)
    security.set_cookie(response, request, security.LOGIN_COOKIE, nonce, max_age=3600)
    return response


@router.post("/webmail/login")
async def login(
    request: Request,
    v: Posted,
    email: Annotated[str, Form(max_length=320)] = "",
    password: Annotated[str, Form(max_length=1024)] = "",
) -> Response:
    """Async so that the wait a login guard may ask for (an account under attack) holds no
    thread; the store and the password check run in the thread pool."""
    ip = request.client.host if request.client is not None else "unknown"
    box = v.pochta.mailbox
    try:
        password_allowed(request)  # over TLS, or in clear from cleartext_login_networks only
        device = request.cookies.get(security.DEVICE_COOKIE)
        entry = await request.app.state.passwords.log_in(
            run_in_threadpool,
            functools.partial(box.admit, email, ip, device),
            functools.partial(box.enter, password=password),
        )
    except errors.InvalidCredentials:
        return _login_page(request, v, 401, v.word("wrong_login"), email)
    except errors.ResetRequired:
        return _login_page(request, v, 403, v.word("reset_required"), email)
    except errors.TlsRequired:
        return _login_page(request, v, 403, v.word("tls_required"), email)
    except errors.RateLimited as exc:
        seconds = max(1, int(exc.retry_after + 0.999))
        response = _login_page(request, v, 429, v.word("rate_limited", seconds=seconds), email)
        response.headers["Retry-After"] = str(seconds)
        return response
    response = redirect("/webmail")
    ttl = int(box.session_ttl)
    security.set_cookie(response, request, security.SESSION_COOKIE, entry.token, max_age=ttl)
    security.drop_cookie(response, request, security.LOGIN_COOKIE)
    if entry.device is not None:
        days = v.pochta.settings.guard.login_known_days
        security.set_cookie(
            response,
            request,
            security.DEVICE_COOKIE,
            entry.device,
            max_age=int(days * 86400),
            path=security.DEVICE_PATH,
        )
    return response


@router.post("/webmail/logout")
def logout(request: Request, v: PostedReader) -> Response:
    assert v.session is not None
    v.pochta.mailbox.logout(v.session)
    response = redirect("/webmail/login")
    security.drop_cookie(response, request, security.SESSION_COOKIE)
    return response


@router.post("/webmail/lang")
def language(
    request: Request,
    v: Posted,
    lang: Annotated[str, Form(max_length=8)] = "en",
    back: Annotated[str, Form(max_length=2000)] = "/webmail",
) -> Response:
    """Switch the pages' language (a cookie); back to the page the switch was on."""
    if not back.startswith(("/webmail", "/admin")) or "//" in back or "\\" in back:
        back = "/webmail"
    response = redirect(back)
    if lang in LANGS:
        security.set_cookie(response, request, security.LANG_COOKIE, lang, max_age=365 * 86400)
    return response


def _folders(v: Viewer) -> list[Folder]:
    assert v.user is not None
    return v.pochta.mailbox.folders(v.user.id)


@router.get("/webmail")
def folder(
    v: Reader,
    folder: Annotated[str, Query(min_length=1, max_length=200)] = "Inbox",
    before: Annotated[int | None, Query(ge=1, le=2**53 - 1)] = None,
    notice: Annotated[str, Query(max_length=20)] = "",
) -> Response:
    assert v.user is not None
    size = v.pochta.settings.web.page_size
    letters = v.pochta.mailbox.letters(v.user.id, folder, size, before)
    older = _folder_url(folder, before=letters[-1].id) if len(letters) == size else None
    return render(
        v,
        "folder.html",
        folders=_folders(v),
        folder=folder,
        letters=letters,
        older=older,
        newest=_folder_url(folder) if before is not None else None,
        notice=notice if notice in NOTICES else "",
        folder_url=_folder_url,
    )


@dataclass(frozen=True, slots=True)
class Share:
    """A share of the sender's letters, as the page says it: ``none``, ``under`` 10 % or
    ``about`` ``percent`` (rounded to 10)."""

    kind: str  # spam: judged spam by pochta; complaint: marked as spam by readers
    say: str  # none | under | about
    percent: int


def share(kind: str, part: int, whole: int) -> Share:
    if part <= 0:
        return Share(kind, "none", 0)
    percent = min(100, (100 * part + 5 * whole) // (10 * whole) * 10)  # to 10, half up
    return Share(kind, "about", percent) if percent >= 10 else Share(kind, "under", 10)


def from_shingle(parsed: Letter) -> Shingle | None:
    """The letter's "14 From" shingle, as ``extract`` makes it, without extracting the rest
    (the body's words, links, attachments: a test keeps the two the same)."""
    address = normalize.address(parsed.from_address) if parsed.from_address else None
    return Shingle.of(ShingleType.FROM_ADDRESS, address) if address else None


def _sender_shares(v: Viewer, parsed: Letter) -> list[Share] | None:
    """What the counters of the letter's From address (the shingle "14 From") say over 14 days,
    as shares of the sender's letters and only for a sender of ``SENDER_MIN_LETTERS`` or more:
    how many were judged spam and how many readers marked as spam. Never a count of what other
    readers did (opened, complained), which would tell one reader about another."""
    from_ = from_shingle(parsed)
    if from_ is None:
        return None
    try:
        (counts,) = v.pochta.shingles.query([from_.ref], ["14d"])
    except errors.PochtaError:
        return None  # the counters' store is down: the page still shows the letter
    c = counts["14d"]
    letters = int(c.get("ham", 0)) + int(c.get("spam", 0))
    if letters < SENDER_MIN_LETTERS:
        return None
    return [share(kind, int(c.get(kind, 0)), letters) for kind in ("spam", "complaint")]


@router.get("/webmail/letters/{letter_id}")
def letter(
    v: Reader,
    letter_id: LetterId,
    images: Annotated[bool, Query()] = False,
    notice: Annotated[str, Query(max_length=20)] = "",
    offer: Annotated[str, Query(max_length=10)] = "",
) -> Response:
    assert v.user is not None
    box = v.pochta.mailbox
    stored, parsed = box.message(v.user.id, letter_id)
    if not stored.seen:  # opening it counts as a read, as GET /v1/messages/{id} does
        stored = box.update(v.user.id, letter_id, seen=True, parsed=parsed)
    html = parsed.body_html
    too_big = html is not None and len(html) > v.pochta.settings.web.max_html_bytes
    blocked = 0  # the frame's own request sanitizes; here only the count the page says
    if html is not None and not too_big and not images:
        blocked = count_remote_images(html)
    body_url = f"/webmail/letters/{letter_id}/body" + ("?images=1" if images else "")
    return render(
        v,
        "letter.html",
        folders=_folders(v),
        folder=stored.folder,
        letter=stored,
        parsed=parsed,
        signs=shown(_alarming(v, box.warnings(parsed)), v.lang),
        show_html=html is not None and not too_big,
        too_big=too_big,
        body_url=body_url,
        images=images,
        blocked=blocked,
        images_url=_letter_url(letter_id, images=1),
        plain_url=_letter_url(letter_id),
        shares=_sender_shares(v, parsed),
        notice=notice if notice in NOTICES else "",
        in_spam=stored.folder == SPAM,
        offers=_offers(offer, parsed, stored) if box.lists is not None else [],
        folder_url=_folder_url,
        quote=quote,
    )


@router.get("/webmail/letters/{letter_id}/body")
def body(v: Reader, letter_id: LetterId, images: Annotated[bool, Query()] = False) -> Response:
    """The letter's HTML, sanitized, as a document of its own for the sandboxed frame."""
    assert v.user is not None
    _stored, parsed = v.pochta.mailbox.message(v.user.id, letter_id)
    html = parsed.body_html or ""
    if len(html) > v.pochta.settings.web.max_html_bytes:
        html = ""
    clean = sanitize(html, remote_images=images)
    response = render(v, "body.html", html=clean.html)
    security.protect(response, security.letter_csp(images), frame=True)
    return response


@router.get("/webmail/letters/{letter_id}/attachments/{n}")
def attachment(
    v: Reader, letter_id: LetterId, n: Annotated[int, Path(ge=0, le=10_000)]
) -> Response:
    """The attachment's bytes exactly, always as a download (never rendered here)."""
    assert v.user is not None
    content, content_type, filename = v.pochta.mailbox.attachment(v.user.id, letter_id, n)
    name = filename or f"attachment-{n}"
    ascii_name = "".join(c if 32 < ord(c) < 127 and c not in '"\\;' else "_" for c in name)
    headers = {
        "Content-Disposition": f'attachment; filename="{ascii_name}"; '
        f"filename*=UTF-8''{quote(name)}"
    }
    response = Response(content, media_type=content_type, headers=headers)
    return security.protect(response, "default-src 'none'; sandbox")


def _move(v: Viewer, letter_id: int, folder: str, offer: str = "") -> Response:
    assert v.user is not None
    v.pochta.mailbox.update(v.user.id, letter_id, folder=folder)
    more = {"offer": offer} if offer else {}
    return redirect(_letter_url(letter_id, notice="moved", **more))


@router.post("/webmail/letters/{letter_id}/spam")
def spam(v: PostedReader, letter_id: LetterId) -> Response:
    """ "This is spam": to Spam; the letter's shingles get a complaint. The page then offers
    "always spam from <sender>"."""
    return _move(v, letter_id, SPAM, offer="block")


@router.post("/webmail/letters/{letter_id}/not-spam")
def not_spam(v: PostedReader, letter_id: LetterId) -> Response:
    """ "Not spam": back to the Inbox; the letter's shingles get an "unspam". The page then
    offers "always trust <sender>" and "<its domain>"."""
    return _move(v, letter_id, "Inbox", offer="allow")


@dataclass(frozen=True, slots=True)
class Offer:
    """A button that puts the letter's sender on the reader's list."""

    value: str  # the entry: the From address, or its registrable domain
    action: str  # allow | block
    word: str  # the button's words (i18n key)
    back: str  # the letter's page, to come back to


def _offers(offer: str, parsed: Letter, stored: StoredLetter) -> list[Offer]:
    """After "not spam": trust the From address or its registrable domain (not a public
    mail service's: ``signs/data/freemail.txt``); after "spam": always spam from the From
    address. None for a letter without a usable From, and no "trust" for a letter pochta
    called phishing (a list never lets phishing through: the button would only mislead)."""
    if offer not in OFFERS or not parsed.from_address:
        return []
    if offer == "allow" and stored.verdict == "phishing":
        return []
    letter_id = stored.id
    try:
        sender = personal.entry_value(parsed.from_address[: personal.MAX_ENTRY])
    except errors.InvalidInput:
        return []
    back = _letter_url(letter_id, notice="listed")
    if offer == "block":
        return [Offer(sender, "block", "block_sender", back)]
    found = [Offer(sender, "allow", "trust_sender", back)]
    registrable = normalize.registrable(sender.rpartition("@")[2]) or ""
    if registrable in protected.freemail():
        return found  # trusting gmail.com would let every one of its users through
    with contextlib.suppress(errors.InvalidInput):
        found.append(Offer(personal.entry_value(registrable), "allow", "trust_domain", back))
    return found


def _back(back: str, default: str) -> str:
    """Where a form may send the reader back to: a page of the webmail, nowhere else."""
    if back.startswith("/webmail") and "//" not in back and "\\" not in back:
        return back
    return default


@router.get("/webmail/lists")
def lists_page(v: Reader, notice: Annotated[str, Query(max_length=20)] = "") -> Response:
    """The reader's sender list, each entry with its "remove" button, and a form to add one."""
    assert v.user is not None
    lists = _sender_lists(v)
    return render(
        v,
        "lists.html",
        folders=_folders(v),
        folder="",
        entries=lists.entries(v.user.id),
        notice=notice == "changed",
        max_entry=personal.MAX_ENTRY,
        folder_url=_folder_url,
    )


EntryField = Annotated[str, Form(min_length=1, max_length=personal.MAX_ENTRY)]


@router.post("/webmail/lists")
def add_entry(
    v: PostedReader,
    value: EntryField,
    action: Annotated[str, Form(max_length=10)],
    back: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    assert v.user is not None
    _sender_lists(v).add(v.user.id, value, action)
    return redirect(_back(back, "/webmail/lists?notice=changed"))


@router.post("/webmail/lists/delete")
def remove_entry(v: PostedReader, value: EntryField) -> Response:
    assert v.user is not None
    _sender_lists(v).remove(v.user.id, value)
    return redirect("/webmail/lists?notice=changed")


def _sender_lists(v: Viewer) -> SenderListService:
    lists = v.pochta.mailbox.lists
    if lists is None:
        raise errors.ConfigError("sender lists are not set up on this server")
    return lists


@router.post("/webmail/letters/{letter_id}/move")
def move(v: PostedReader, letter_id: LetterId, folder: FolderField) -> Response:
    return _move(v, letter_id, folder)


@router.post("/webmail/letters/{letter_id}/delete")
def delete(v: PostedReader, letter_id: LetterId) -> Response:
    assert v.user is not None
    folder = v.pochta.mailbox.letter(v.user.id, letter_id).folder
    v.pochta.mailbox.delete(v.user.id, letter_id)
    v.pochta.deletion_job.wake()
    return redirect(_folder_url(folder, notice="deleted"))


def _alarming(v: Viewer, signs: list[Sign]) -> list[Sign]:
    """The signs the banner shows: none unless one of them carries points in the rules file
    (a Received host or Return-Path of another domain alone is half of all legitimate mail,
    and a banner on every other letter teaches people to ignore it); then all of them, the
    weak ones as supporting evidence."""
    weights = v.pochta.scanner.rules.sign_scores
    return signs if any(weights.get(s.symbol, 0.0) > 0 for s in signs) else []
