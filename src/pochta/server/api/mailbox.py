"""The mailbox API for users: a session token from ``POST /v1/session``, then the user's own
folders and letters. Someone else's letter is a 404, exactly like a letter that is not there."""

from __future__ import annotations

import functools
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from pochta.errors import InvalidCredentials
from pochta.mailbox.service import Mailbox
from pochta.server.api.errors import documented
from pochta.server.auth import password_allowed
from pochta.server.fields import Bool
from pochta.types import Folder, StoredLetter

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="session_token",
    description="a session token from POST /v1/session",
)

router = APIRouter(prefix="/v1", tags=["mailbox"], responses=documented(401, 422, 503))
BINARY = {"schema": {"type": "string", "format": "binary"}}


def mailbox(request: Request) -> Mailbox:
    box: Mailbox = request.app.state.pochta.mailbox
    return box


def current_user(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> int:
    if credentials is None:
        raise InvalidCredentials("log in first: POST /v1/session gives a token")
    return mailbox(request).authenticate(credentials.credentials)


UserId = Annotated[int, Depends(current_user)]
MessageId = Annotated[int, Path(ge=1, le=2**53 - 1, description="the letter's id")]
Box = Annotated[Mailbox, Depends(mailbox)]


class LoginIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    email: Annotated[str, Field(min_length=3, max_length=320)]
    password: Annotated[str, Field(min_length=1, max_length=1024)]
    device: Annotated[
        str | None,
        Field(
            max_length=128,
            description="the device token an earlier login gave (a device that logged in"
            " before keeps working while the account is under attack)",
        ),
    ] = None


class SessionOut(BaseModel):
    token: str
    email: str
    expires_in: float
    device: str | None = Field(
        None, description="keep it and send it with the next login as device"
    )


class FolderOut(BaseModel):
    name: str
    total: int
    unseen: int

    @classmethod
    def of(cls, f: Folder) -> FolderOut:
        return cls(name=f.name, total=f.total, unseen=f.unseen)


FolderName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        pattern=r"^[^\x00-\x1f]*[^\x00-\x1f\s][^\x00-\x1f]*$",
        description="not blank, no control characters",
    ),
]


class FolderIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: FolderName


class MessageOut(BaseModel):
    id: int
    folder: str
    size: int
    received: float
    date: float | None
    sender: str = Field(serialization_alias="from")
    subject: str
    seen: bool
    flagged: bool
    verdict: str | None

    @classmethod
    def of(cls, m: StoredLetter) -> MessageOut:
        return cls(
            id=m.id,
            folder=m.folder,
            size=m.size,
            received=m.received,
            date=m.date,
            sender=m.sender,
            subject=m.subject,
            seen=m.seen,
            flagged=m.flagged,
            verdict=m.verdict,
        )


class PageOut(BaseModel):
    messages: list[MessageOut]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page")


class AttachmentOut(BaseModel):
    n: int
    filename: str | None
    content_type: str
    size: int


class WarningOut(BaseModel):
    symbol: str
    explanation_ru: str
    explanation_en: str
    evidence: list[str]


class MessageDetailOut(MessageOut):
    warnings: list[WarningOut] = Field(
        description="phishing signs this letter shows, each explained in Russian and English"
    )
    to: list[str]
    cc: list[str]
    message_id: str | None
    text: str | None
    html: str | None
    attachments: list[AttachmentOut]


class PatchIn(BaseModel):
    """What to change; a field left out (or null) stays as it is, so ``{}`` changes nothing."""

    model_config = ConfigDict(extra="forbid")

    seen: Bool | None = None
    flagged: Bool | None = None
    folder: FolderName | None = None


@router.post(
    "/session",
    summary="Log in: e-mail and password give a session token",
    responses=documented(400, 403, 429),
)
async def login(request: Request, body: LoginIn, box: Box) -> SessionOut:
    """Async so that the wait a login guard may ask for (an account under attack) holds no
    thread; the store and the password check run in the thread pool."""
    password_allowed(request)  # over TLS, or in clear from cleartext_login_networks only
    ip = request.client.host if request.client is not None else "unknown"
    entry = await request.app.state.passwords.log_in(
        run_in_threadpool,
        functools.partial(box.admit, body.email, ip, body.device),
        functools.partial(box.enter, password=body.password),
    )
    return SessionOut(
        token=entry.token, email=entry.user.email, expires_in=box.session_ttl, device=entry.device
    )


@router.delete("/session", status_code=204, summary="Log out: the token stops working")
def logout(
    box: Box,
    _user: UserId,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Response:
    assert credentials is not None
    box.logout(credentials.credentials)
    return Response(status_code=204)


@router.get("/folders", summary="The user's folders with their counts")
def folders(box: Box, user: UserId) -> list[FolderOut]:
    return [FolderOut.of(f) for f in box.folders(user)]


@router.post("/folders", status_code=201, summary="Create a folder", responses=documented(400, 409))
def add_folder(body: FolderIn, box: Box, user: UserId) -> FolderOut:
    return FolderOut.of(box.add_folder(user, body.name))


@router.get(
    "/messages",
    summary="Letters of a folder, newest first, a page at a time",
    responses=documented(404),
)
def messages(
    request: Request,
    box: Box,
    user: UserId,
    folder: str = "Inbox",
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,15}$")] = None,
) -> PageOut:
    limit = min(limit, request.app.state.pochta.settings.mailbox.page_limit)
    page = box.letters(user, folder, limit, int(cursor) if cursor else None)
    next_cursor = str(page[-1].id) if len(page) == limit else None
    return PageOut(messages=[MessageOut.of(m) for m in page], next_cursor=next_cursor)


@router.get(
    "/messages/{message_id}",
    response_model_by_alias=True,
    summary="One letter: headers, text and HTML bodies, attachments; marks it seen",
    responses=documented(404, 409),
)
def message(
    message_id: MessageId,
    box: Box,
    user: UserId,
    peek: Annotated[bool, Query(description="do not mark the letter seen")] = False,
) -> MessageDetailOut:
    letter, parsed = box.message(user, message_id)
    if not peek and not letter.seen:
        letter = box.update(user, message_id, seen=True, parsed=parsed)
    base: dict[str, Any] = MessageOut.of(letter).model_dump()
    signs = box.warnings(parsed)
    return MessageDetailOut(
        **base,
        warnings=[
            WarningOut(
                symbol=sign.symbol,
                explanation_ru=sign.explanation_ru,
                explanation_en=sign.explanation_en,
                evidence=list(sign.evidence),
            )
            for sign in signs
        ],
        to=list(parsed.to),
        cc=list(parsed.cc),
        message_id=parsed.message_id,
        text=parsed.body_text,
        html=parsed.body_html,
        attachments=[
            AttachmentOut(n=a.n, filename=a.filename, content_type=a.content_type, size=a.size)
            for a in parsed.attachments
        ],
    )


@router.get(
    "/messages/{message_id}/raw",
    summary="The letter byte for byte as delivered",
    response_class=Response,
    responses={
        200: {"content": {"message/rfc822": BINARY}},
        **documented(404, 409),
    },
)
def raw(message_id: MessageId, box: Box, user: UserId) -> Response:
    return Response(box.raw(user, message_id), media_type="message/rfc822")


@router.get(
    "/messages/{message_id}/attachments/{n}",
    summary="Attachment n of the letter, decoded",
    response_class=Response,
    responses={
        200: {
            "content": {"application/octet-stream": BINARY},
            "description": "the attachment, with its own Content-Type",
        },
        **documented(404, 409),
    },
)
def attachment(
    message_id: MessageId,
    n: Annotated[int, Path(ge=0, description="attachment number, from 0")],
    box: Box,
    user: UserId,
) -> Response:
    content, content_type, filename = box.attachment(user, message_id, n)
    headers = {}
    if filename:
        headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(filename)}"
    return Response(content, media_type=content_type, headers=headers)


@router.patch(
    "/messages/{message_id}",
    summary="Change flags (seen, flagged) or the folder; {} changes nothing",
    responses=documented(400, 404),
)
def patch(message_id: MessageId, body: PatchIn, box: Box, user: UserId) -> MessageOut:
    letter = box.update(user, message_id, seen=body.seen, flagged=body.flagged, folder=body.folder)
    return MessageOut.of(letter)


@router.delete(
    "/messages/{message_id}",
    status_code=204,
    summary="Delete a letter: recorded at once, its attachments released in the background",
    responses=documented(404),
)
def delete(request: Request, message_id: MessageId, box: Box, user: UserId) -> Response:
    box.delete(user, message_id)
    request.app.state.pochta.deletion_job.wake()
    return Response(status_code=204)
