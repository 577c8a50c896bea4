"""Field types of request bodies that take exactly what their JSON schema promises, so that
the OpenAPI document and the server agree: an integer is a JSON integer (``5``, or ``5.0`` as
JSON Schema allows), never ``true``; a boolean is ``true`` or ``false``, never ``1`` or
``"yes"`` (pydantic's lax mode would take both)."""

from __future__ import annotations

from typing import Any

from pydantic import BeforeValidator, StrictBool


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("Input should be a valid integer, not a boolean")
    return value


NotBool = BeforeValidator(_not_a_bool)
"""Last in ``Annotated[int, Field(...), NotBool]``, so that the Field's bounds stay in the
JSON schema."""
Bool = StrictBool
