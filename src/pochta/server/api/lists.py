"""The sender-list API for users (``/v1/lists``): an account's own "never spam from" (allow)
and "always spam from" (block) entries. The session token says whose list it is: nobody
reads or changes another account's list (there is no account in the paths)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from pochta.antispam.personal import MAX_ENTRY
from pochta.errors import ConfigError
from pochta.mailbox.lists import SenderListService
from pochta.server.api.errors import documented
from pochta.server.api.mailbox import UserId
from pochta.types import ListEntry

router = APIRouter(prefix="/v1", tags=["lists"], responses=documented(401, 422, 503))

EntryValue = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_ENTRY,
        description="an address (bob@shop.example) or a domain (shop.example: its subdomains"
        " too); not a public suffix",
    ),
]


class EntryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: EntryValue
    action: Literal["allow", "block"] = Field(
        description="allow: never spam from it (still checked for phishing and a forged From);"
        " block: always spam (phishing stays phishing)"
    )


class EntryOut(BaseModel):
    value: str = Field(description="as stored: lower-case, the domain in its ASCII (IDNA) form")
    action: Literal["allow", "block"]

    @classmethod
    def of(cls, e: ListEntry) -> EntryOut:
        return cls(value=e.value, action=e.action)


class ListOut(BaseModel):
    entries: list[EntryOut]
    max_entries: int = Field(description="how many entries the list may hold")


def sender_lists(request: Request) -> SenderListService:
    lists: SenderListService | None = request.app.state.pochta.mailbox.lists
    if lists is None:
        raise ConfigError("sender lists are not set up on this server")
    return lists


@router.get("/lists", summary="The user's sender list (allow / block entries), by value")
def show(request: Request, user: UserId) -> ListOut:
    lists = sender_lists(request)
    return ListOut(
        entries=[EntryOut.of(e) for e in lists.entries(user)], max_entries=lists.max_entries
    )


@router.post(
    "/lists",
    status_code=201,
    summary="Add an entry, or change the action of the same one",
    responses=documented(400),
)
def add(request: Request, body: EntryIn, user: UserId) -> EntryOut:
    return EntryOut.of(sender_lists(request).add(user, body.value, body.action))


@router.delete(
    "/lists/{value}",
    status_code=204,
    summary="Remove an entry",
    responses=documented(400, 404),
)
def remove(
    request: Request,
    value: Annotated[str, Path(min_length=1, max_length=MAX_ENTRY)],
    user: UserId,
) -> Response:
    sender_lists(request).remove(user, value)
    return Response(status_code=204)
