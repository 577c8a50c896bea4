"""Field types of request bodies that take exactly what their JSON schema promises, so that
the OpenAPI document and the server agree: an integer is a JSON integer (``5``, or ``5.0`` as
JSON Schema allows), never ``true``; a boolean is ``true`` or ``false``, never ``1`` or
``"yes"`` (pydantic's lax mode would take both)."""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import BeforeValidator, StrictBool, TypeAdapter, ValidationError


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("Input should be a valid integer, not a boolean")
    return value


NotBool = BeforeValidator(_not_a_bool)
"""Last in ``Annotated[int, Field(...), NotBool]``, so that the Field's bounds stay in the
JSON schema."""
Bool = StrictBool


def checked(adapter: TypeAdapter[Any], value: str | None, loc: tuple[str, str]) -> Any:
    """``value`` validated as FastAPI validates a path or query parameter (the same pydantic
    errors, located the same way), for the plain routes ahead of documented ones;
    RequestValidationError when it fails. ``None`` (absent) is "Field required"."""
    if value is None:
        raise RequestValidationError(
            [{"type": "missing", "loc": loc, "msg": "Field required", "input": None}]
        )
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        errors = [{**e, "loc": loc + tuple(e["loc"])} for e in exc.errors()]
        raise RequestValidationError(errors) from None
