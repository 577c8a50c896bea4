"""The shingle counters API for services (seed 002): one letter's counters in one request."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from pochta.antispam.shingles.counters import Ref
from pochta.antispam.shingles.counters.buckets import DEFAULT_WINDOWS, Counts
from pochta.antispam.shingles.registry import PAIRED, type_name
from pochta.antispam.shingles.shingler import Shingler
from pochta.server.api.errors import documented
from pochta.server.auth import require_service
from pochta.server.fields import NotBool

router = APIRouter(
    prefix="/v1/shingles",
    tags=["shingles"],
    dependencies=[Depends(require_service)],
    responses=documented(400, 401, 422, 503),
)

MAX_SHINGLES = 1000

HexHash = Annotated[str, Field(pattern=r"^[0-9a-fA-F]{1,16}$", description="the 64-bit hash, hex")]
TypeNumber = Annotated[
    int, Field(ge=0, le=65535, description="shingle type (the registry)"), NotBool
]


WINDOW = (
    r"^(?:(?:[1-9]|1[0-4])d"
    r"|(?:[1-9][0-9]?|[12][0-9]{2}|3[0-2][0-9]|33[0-6])h"
    r"|(?:[1-9][0-9]{0,3}|1[0-9]{4}|200[0-9]{2}|201[0-5][0-9]|20160)m)$"
)
"""A window the counters keep: 1-20160 minutes, 1-336 hours or 1-14 days."""
Window = Annotated[str, Field(pattern=WINDOW)]
_PAIRED: list[JsonValue] = [int(t) for t in sorted(PAIRED)]
Kind = Literal["ham", "spam", "complaint", "unspam", "read"]
"""The counters of a shingle (``buckets.KINDS``; a test keeps the two the same)."""


class UniqueIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: TypeNumber
    hash: HexHash


class ShingleIn(BaseModel):
    """A shingle; a paired one (types 30, 32) must carry its unique."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [
                {"properties": {"type": {"not": {"enum": _PAIRED}}}},
                {"required": ["unique"], "properties": {"unique": {"type": "object"}}},
            ]
        },
    )

    type: TypeNumber
    hash: HexHash
    unique: UniqueIn | None = Field(
        None,
        description="for a paired shingle (types 30, 32): its unique (31, 33). The unique's"
        " counter goes up by one when the pair's bucket goes from zero.",
    )

    @model_validator(mode="after")
    def _paired_has_unique(self) -> ShingleIn:
        if self.unique is None and self.type in PAIRED:
            raise ValueError(f"shingle type {self.type} is paired: give its unique")
        return self

    def ref(self) -> Ref:
        unique = None if self.unique is None else Ref(self.unique.type, int(self.unique.hash, 16))
        return Ref(self.type, int(self.hash, 16), unique)


class UpdateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Kind = Field(description="which counter goes up")
    count: Annotated[int, Field(ge=1, le=2**32 - 1), NotBool] = 1
    shingles: list[ShingleIn] = Field(max_length=MAX_SHINGLES)


class UpdateOut(BaseModel):
    updated: int = Field(description="counters accepted (buffered; written within seconds)")


class QueryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    windows: list[Window] = Field(
        list(DEFAULT_WINDOWS),
        min_length=1,
        max_length=16,
        description="e.g. 10m, 1h, 24h, 3d, 14d: whole 10-minute buckets up to 24h, whole"
        " days beyond",
    )
    shingles: list[ShingleIn] = Field(max_length=MAX_SHINGLES)


class ShingleCounts(BaseModel):
    type: int
    name: str
    hash: str
    counters: dict[str, Counts] = Field(description="window -> kind -> value")


class QueryOut(BaseModel):
    shingles: list[ShingleCounts]


def _shingler(request: Request) -> Shingler:
    shingler: Shingler = request.app.state.pochta.shingles
    return shingler


ShinglerDep = Annotated[Shingler, Depends(_shingler)]


@router.post("/update", summary="Add to the counters of one letter's shingles")
def update(body: UpdateIn, shingler: ShinglerDep) -> UpdateOut:
    refs = [s.ref() for s in body.shingles]
    shingler.update(refs, body.kind, body.count)
    return UpdateOut(updated=len(refs))


@router.post("/query", summary="The counters of many shingles over windows")
def query(body: QueryIn, shingler: ShinglerDep) -> QueryOut:
    refs = [s.ref() for s in body.shingles]
    values = shingler.query(refs, body.windows)
    return QueryOut(
        shingles=[
            ShingleCounts(type=r.type, name=type_name(r.type), hash=f"{r.hash:016x}", counters=v)
            for r, v in zip(refs, values, strict=True)
        ]
    )
