"""The shingle counters API for services (seed 002): one letter's counters in one request."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from pochta.antispam.shingles.counters import Ref
from pochta.antispam.shingles.counters.buckets import DEFAULT_WINDOWS, KINDS, Counts
from pochta.antispam.shingles.registry import PAIRED, type_name
from pochta.antispam.shingles.shingler import Shingler
from pochta.errors import InvalidInput
from pochta.server.auth import require_service

router = APIRouter(
    prefix="/v1/shingles", tags=["shingles"], dependencies=[Depends(require_service)]
)

MAX_SHINGLES = 1000

HexHash = Annotated[str, Field(pattern=r"^[0-9a-fA-F]{1,16}$", description="the 64-bit hash, hex")]
TypeNumber = Annotated[int, Field(ge=0, le=65535, description="shingle type (the registry)")]


class UniqueIn(BaseModel):
    type: TypeNumber
    hash: HexHash


class ShingleIn(BaseModel):
    type: TypeNumber
    hash: HexHash
    unique: UniqueIn | None = Field(
        None,
        description="for a paired shingle (types 30, 32): its unique (31, 33). The unique's"
        " counter goes up by one when the pair's bucket goes from zero.",
    )

    def ref(self) -> Ref:
        unique = None if self.unique is None else Ref(self.unique.type, int(self.unique.hash, 16))
        if unique is None and self.type in PAIRED:
            raise InvalidInput(f"shingle type {self.type} is paired: give its unique")
        return Ref(self.type, int(self.hash, 16), unique)


class UpdateIn(BaseModel):
    kind: str = Field(description=f"one of: {', '.join(KINDS)}")
    count: int = Field(1, ge=1, le=2**63 - 1)
    shingles: list[ShingleIn] = Field(max_length=MAX_SHINGLES)


class UpdateOut(BaseModel):
    updated: int = Field(description="counters accepted (buffered; written within seconds)")


class QueryIn(BaseModel):
    windows: list[str] = Field(
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
