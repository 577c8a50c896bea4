"""The blob API for services (seed 004's inc / upload / dec / get over HTTP).

The upload (``PUT /v1/blobs/{key}``) is served by a plain Starlette route ahead of the
documented FastAPI one: most attachments are small, and for a 4 KiB file FastAPI's dependency
solving, its validation of the parameters and of the answer cost more CPU than the store's
work. That route does what the documented one promises (the same checks in the same order:
service token, then key and magic with pydantic's own messages, the same JSON answer); the
FastAPI route stays for the OpenAPI document and serves nothing the plain one does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Annotated, Literal

from anyio import to_thread
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from starlette.routing import Route

from pochta.blobs.store import CHUNK, BlobStore, Opened, Stored
from pochta.errors import InvalidInput, RangeNotSatisfiable
from pochta.executors import run_in
from pochta.server.api.errors import documented
from pochta.server.auth import authorize_service, require_service
from pochta.server.fields import NotBool, checked
from pochta.types import FileRecord

router = APIRouter(
    prefix="/v1/blobs",
    tags=["blobs"],
    dependencies=[Depends(require_service)],
    responses=documented(401, 422, 503),
)

KEY_PATTERN = r"^[0-9a-f]{64}$"
MagicValue = Annotated[int, Field(ge=1, le=2**32 - 1, description="1..2**32-1, never 0"), NotBool]
Key = Annotated[
    str, PathParam(pattern=KEY_PATTERN, description="SHA-256 of the content, lowercase hex")
]
BINARY = {"schema": {"type": "string", "format": "binary"}}


class MagicIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    magic: MagicValue


class RecordOut(BaseModel):
    key: str
    counter: int
    magic: int
    flags: list[Literal["do_not_delete"]]
    pair: int
    space: Literal["live", "deleted"]
    moved_at: float | None = None

    @classmethod
    def of(cls, r: FileRecord) -> RecordOut:
        return cls(**r.as_fields())


class StoredOut(RecordOut):
    size: int
    crc32: str = Field(description="CRC-32 of the content, 8 hex digits")
    uploaded: bool = Field(description="false when the key was live and only counted")

    @classmethod
    def stored(cls, s: Stored) -> StoredOut:
        return cls(
            **s.record.as_fields(),
            size=s.size,
            crc32=f"{s.crc32:08x}",
            uploaded=s.uploaded,
        )


async def _store(request: Request) -> BlobStore:
    # async: a plain function would cost every request a trip to a worker thread
    store: BlobStore = request.app.state.pochta.blobs
    return store


Store = Annotated[BlobStore, Depends(_store)]


@router.post(
    "/{key}/inc",
    summary="Count one more reference to a stored file",
    responses=documented(400, 404),
)
def inc(key: Key, body: MagicIn, store: Store) -> RecordOut:
    """404 when there is no live record: the caller then uploads the content with PUT."""
    return RecordOut.of(store.inc(key, body.magic))


def _stored_body(s: Stored) -> bytes:
    """StoredOut's JSON, written directly (no model built per upload)."""
    return json.dumps(
        {
            **s.record.as_fields(),
            "size": s.size,
            "crc32": f"{s.crc32:08x}",
            "uploaded": s.uploaded,
        },
        separators=(",", ":"),
    ).encode()


_key_check: TypeAdapter[str] = TypeAdapter(Annotated[str, Field(pattern=KEY_PATTERN)])
_magic_check: TypeAdapter[int] = TypeAdapter(Annotated[int, Field(ge=1, le=2**32 - 1)])


async def _receive(request: Request, store: BlobStore, key: str, magic: int) -> Stored:
    """The body to both disks: a small file received whole and stored in one trip to a thread
    of the uploads pool (``pochta.executors``); a larger one hashed and written one CHUNK at a
    time in a worker thread while the next CHUNK arrives."""
    size_hint = int(request.headers.get("content-length") or 0)
    if 0 < size_hint <= CHUNK:
        body = [chunk async for chunk in request.stream()]
        pool = request.app.state.pochta.executors.uploads
        stored: Stored = await run_in(pool, store.upload, key, magic, body, size_hint)
        return stored
    up = await to_thread.run_sync(store.begin_upload, key, magic, size_hint)
    writing: asyncio.Future[None] | None = None
    try:
        parts: list[bytes] = []
        held = 0
        async for chunk in request.stream():
            parts.append(chunk)
            held += len(chunk)
            if held >= CHUNK:
                if writing is not None:
                    await writing
                data, parts, held = b"".join(parts), [], 0
                writing = asyncio.ensure_future(to_thread.run_sync(up.write, data))
        if writing is not None:
            await writing
            writing = None
        if parts:
            await to_thread.run_sync(up.write, b"".join(parts))
        stored = await to_thread.run_sync(up.finish)
    except BaseException:
        if writing is not None:  # let the write in flight end before removing its file
            with contextlib.suppress(BaseException):
                await writing
        await to_thread.run_sync(up.abort)
        raise
    return stored


async def put_blob(request: Request) -> Response:
    """``PUT /v1/blobs/{key}`` as served (see the module's docstring)."""
    authorize_service(request)
    key = checked(_key_check, request.path_params["key"], ("path", "key"))
    magic = checked(_magic_check, request.query_params.get("magic"), ("query", "magic"))
    stored = await _receive(request, request.app.state.pochta.blobs, key, magic)
    return Response(_stored_body(stored), status_code=201, media_type="application/json")


ROUTE = Route(f"{router.prefix}/{{key}}", put_blob, methods=["PUT"], include_in_schema=False)
"""The route that serves every PUT of a blob: first in the application's routes
(``server.http``), so that no router is searched for it; the FastAPI route below documents
it."""


@router.put(
    "/{key}",
    status_code=201,
    summary="Upload content (streamed)",
    responses=documented(409, 507),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/octet-stream": BINARY},
            "description": "the file; at most blobs.max_upload_size bytes (else 413)",
        }
    },
)
async def upload(
    key: Key,
    request: Request,
    store: Store,
    magic: Annotated[int, Query(ge=1, le=2**32 - 1, description="the letter's magic")],
) -> StoredOut:
    """The body must hash (SHA-256) to the key; otherwise 422 and nothing is kept. When the key
    is already live the body is only hashed and the record counted."""
    return StoredOut.stored(await _receive(request, store, key, magic))


@router.post("/{key}/dec", summary="Drop one reference", responses=documented(400, 404))
def dec(key: Key, body: MagicIn, store: Store) -> RecordOut:
    return RecordOut.of(store.dec(key, body.magic))


@router.get("/{key}/stat", summary="The FileDB record", responses=documented(404))
def stat(key: Key, store: Store) -> RecordOut:
    return RecordOut.of(store.stat(key))


_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """One ``bytes=`` range as [start, end); None for a header we ignore (several ranges).
    RangeNotSatisfiable when it lies outside the file."""
    m = _RANGE.fullmatch(header.strip())
    if m is None:
        return None
    first, last = m.group(1), m.group(2)
    if first == "" and last == "":
        return None
    if first == "":
        start, end = max(size - int(last), 0), size
    else:
        start = int(first)
        end = size if last == "" else min(int(last) + 1, size)
    if start >= size or start >= end:
        raise RangeNotSatisfiable(f"range {header!r} is outside the {size} bytes of the file")
    return start, end


def _expected_crc(crc32: str | None) -> int | None:
    if crc32 is None:
        return None
    try:
        return int(crc32, 16)
    except ValueError:
        raise InvalidInput(f"crc32 {crc32!r} is not 8 hex digits") from None


def _open(
    store: BlobStore, key: str, size: int | None, crc32: str | None, range_header: str | None
) -> tuple[Opened, tuple[int, int] | None]:
    opened = store.open(key, expect_size=size, expect_crc32=_expected_crc(crc32))
    try:
        span = parse_range(range_header, opened.size) if range_header else None
    finally:
        if range_header:
            opened.reader.close()
    if span is not None:
        opened = store.reopen(opened, *span)
    elif range_header:
        opened = store.reopen(opened, 0, None)
    return opened, span


def _headers(opened: Opened, span: tuple[int, int] | None) -> dict[str, str]:
    headers = {"Accept-Ranges": "bytes", "ETag": f'"{opened.record.key}"'}
    if span is None:
        headers["Content-Length"] = str(opened.size)
    else:
        headers["Content-Length"] = str(span[1] - span[0])
        headers["Content-Range"] = f"bytes {span[0]}-{span[1] - 1}/{opened.size}"
    return headers


ExpectSize = Annotated[
    int | None, Query(ge=0, description="refuse (409) a copy whose size differs")
]
ExpectCrc = Annotated[
    str | None,
    Query(pattern=r"^[0-9a-fA-F]{1,8}$", description="refuse (409) a copy whose CRC-32 differs"),
]


@router.get(
    "/{key}",
    summary="Download content (Range supported)",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"application/octet-stream": BINARY}},
        206: {"content": {"application/octet-stream": BINARY}, "description": "the range asked"},
        **documented(400, 404, 409, 416),
    },
)
async def download(
    key: Key, request: Request, store: Store, size: ExpectSize = None, crc32: ExpectCrc = None
) -> Response:
    opened, span = await to_thread.run_sync(
        _open, store, key, size, crc32, request.headers.get("range")
    )
    return StreamingResponse(
        opened.reader,
        status_code=206 if span else 200,
        media_type="application/octet-stream",
        headers=_headers(opened, span),
    )


@router.head(
    "/{key}",
    summary="Size and presence, no body",
    responses={206: {"description": "the range asked"}, **documented(400, 404, 409, 416)},
)
async def head(
    key: Key, request: Request, store: Store, size: ExpectSize = None, crc32: ExpectCrc = None
) -> Response:
    opened, span = await to_thread.run_sync(
        _open, store, key, size, crc32, request.headers.get("range")
    )
    opened.reader.close()
    return Response(
        status_code=206 if span else 200,
        media_type="application/octet-stream",
        headers=_headers(opened, span),
    )
