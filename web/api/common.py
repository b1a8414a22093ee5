"""What every API object and request body shares: the field types and limits, the
strictness of request bodies, metadata, the list wrapper, the error object (docs/api.md,
"Conventions and decisions" and "Error codes").

Request models are strict (no coercion: ``"60"`` is not an integer, ``60.0`` is not an
integer, ``true`` is not a number) and forbid unknown fields, which also refuses mass
assignment of ``id``, ``object``, ``status``, ``created`` or ``account``. Response models
describe the objects: the OpenAPI document is generated from them.

Limits (docs/api.md, "Conventions and decisions": lengths and bounds, metadata): name and
title 1-200 characters; description at most 10,000; url 1-2,048; metadata string values
only, keys 1-40 characters, values at most 500, at most 50 keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

MAX_METADATA_KEYS = 50
MAX_METADATA_KEY_LENGTH = 40
MAX_METADATA_VALUE_LENGTH = 500

Severity = Literal["critical", "major", "minor", "maintenance"]


def _is_text(value: str) -> bool:
    """False for a string holding a lone surrogate (JSON allows ``"\\ud800"``; Postgres
    and UTF-8 do not). Pydantic refuses them in plain string fields but not in dict keys."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_metadata(value: dict[str, str]) -> dict[str, str]:
    """The metadata rules on what a request sends (docs/api.md, "Conventions and
    decisions": at most 50 keys, checked again after a PATCH's merge; keys 1-40 and values
    at most 500 characters; valid Unicode)."""
    if len(value) > MAX_METADATA_KEYS:
        raise PydanticCustomError(
            "metadata_too_many_keys",
            f"metadata may have at most {MAX_METADATA_KEYS} keys, got {len(value)}",
        )
    for key, item in value.items():
        if not (_is_text(key) and _is_text(item)):
            raise PydanticCustomError(
                "metadata_invalid",
                "metadata keys and values must be valid Unicode text (a lone surrogate "
                "such as \\ud800 cannot be stored)",
            )
        if not 0 < len(key) <= MAX_METADATA_KEY_LENGTH:
            raise PydanticCustomError(
                "metadata_key_too_long",
                f"metadata keys must be 1 to {MAX_METADATA_KEY_LENGTH} characters: {key[:50]!r}",
            )
        if len(item) > MAX_METADATA_VALUE_LENGTH:
            raise PydanticCustomError(
                "metadata_value_too_long",
                f"metadata values may be at most {MAX_METADATA_VALUE_LENGTH} characters "
                f"(key {key!r})",
            )
    return value


Metadata = Annotated[
    dict[str, str],
    AfterValidator(_check_metadata),
    Field(
        json_schema_extra={
            "maxProperties": MAX_METADATA_KEYS,
            "propertyNames": {"minLength": 1, "maxLength": MAX_METADATA_KEY_LENGTH},
            "additionalProperties": {"type": "string", "maxLength": MAX_METADATA_VALUE_LENGTH},
        }
    ),
]
"""Metadata as a request sends it: string keys to string values; ``""`` removes a key.
The JSON schema states the metadata limits (the validator above enforces them)."""

Absent = SkipJsonSchema[None]
"""The default of a PATCH field that may be left out but not set to null: None stands for
"not sent" in the model, and the OpenAPI document does not offer null."""

Name = Annotated[str, Field(min_length=1, max_length=200)]
Url = Annotated[str, Field(min_length=1, max_length=2048)]
Description = Annotated[str, Field(max_length=10_000)]
MonitorId = Annotated[str, Field(pattern=r"^mon_[a-z0-9]{1,64}$")]
EscalationPolicyId = Annotated[
    str,
    Field(
        pattern=r"^esc_[a-z0-9]{1,64}$",
        description="The escalation policy of its alerts (esc_ id of the account), or null: "
        "the account's default policy, if any (docs/alerts.md).",
    ),
]

REQUEST = ConfigDict(strict=True, extra="forbid")


def _drop_absent_defaults(schema: dict[str, Any]) -> None:
    """JSON-schema hook of PATCH bodies: a field that may not be null has no ``default:
    null`` either (an :data:`Absent` default only means "not sent")."""
    for field in schema.get("properties", {}).values():
        if field.get("default", ...) is None and "anyOf" not in field:
            del field["default"]


PATCH = ConfigDict(strict=True, extra="forbid", json_schema_extra=_drop_absent_defaults)


class EmptyBody(BaseModel):
    """The body of pause and resume: none, or an empty object."""

    model_config = REQUEST


class ListObject(BaseModel):
    object: Literal["list"]
    has_more: bool
    url: str


R = TypeVar("R")


def list_object(
    url: str, items: Iterable[R], has_more: bool, shape: Callable[[R], dict[str, Any]]
) -> dict[str, Any]:
    """The list wrapper (docs/api.md, "Conventions and decisions"): ``{"object": "list",
    "data": [shape(item) for item in items], "has_more", "url"}``."""
    return {"object": "list", "data": [shape(i) for i in items], "has_more": has_more, "url": url}


class ErrorDetail(BaseModel):
    """The fields of an error: `code` is stable (each response lists those it may
    carry), `param` names the field or parameter at fault (or is null), `request_id`
    identifies the request for support."""

    type: Literal[
        "api_error",
        "authentication_error",
        "invalid_request_error",
        "rate_limit_error",
        "permission_error",
        "idempotency_error",
    ]
    code: str
    message: str
    param: str | None
    request_id: str


class ErrorResponse(BaseModel):
    """Every error response: `{"error": {...}}`."""

    error: ErrorDetail


def merge_metadata(current: dict[str, str], patch: dict[str, str]) -> dict[str, str]:
    """A PATCH's metadata merge (docs/api.md, "Conventions and decisions"): keys sent
    are set, others stay, ``""`` removes a key.

    Pure; the caller checks the 50-key limit on the result.
    """
    merged = dict(current)
    for key, value in patch.items():
        if value == "":
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


JsonObject = dict[str, Any]
