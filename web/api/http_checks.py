"""The http monitor fields (docs/checks.md) as request and response models:
``request_headers``, ``request_body``, ``assertions``, ``tls_expiry_days``,
``tls_verify`` and ``tls_ca_bundle``.

The rules are the engine's (``engine.check_request_headers``, ``engine.check_assertions``:
the probe runs what they accept), applied here as validators so that a request breaking
one gets a 422 with the engine's code (``invalid_request_header``,
``request_header_not_allowed``, ``invalid_assertion``, ``invalid_jsonpath``,
``invalid_ca_bundle``) naming the field. The JSON schemas state what OpenAPI can (counts,
lengths, header name and value patterns, the enums); docs/checks.md ("Assertions and TLS
expiry", "Private certificate authorities") states the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from engine import (
    MAX_ASSERTIONS,
    MAX_CA_BUNDLE_BYTES,
    MAX_REQUEST_BODY_CHARS,
    MAX_REQUEST_HEADERS,
    Comparison,
    InvalidAssertion,
    InvalidCaBundle,
    InvalidRequestHeaders,
    Source,
    check_assertions,
    check_ca_bundle,
    check_request_headers,
)

__all__ = [
    "AssertionIn",
    "AssertionObject",
    "Assertions",
    "RequestBody",
    "RequestHeaders",
    "TlsCaBundle",
    "TlsExpiryDays",
    "TlsVerify",
    "stored_assertions",
]

_TARGET_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "maxLength": 1000},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
    ],
    "description": "What the value is compared with; null (or left out) for is_empty and "
    "is_not_empty, a number for less_than and greater_than and for status_code and "
    "response_time_ms.",
}


V = TypeVar("V")


def _engine_rule(
    check: Callable[[V], object],
    error: type[InvalidRequestHeaders | InvalidAssertion | InvalidCaBundle],
) -> Callable[[V], V]:
    """A pydantic after-validator applying the engine's rule ``check``: its ``error``
    becomes a `PydanticCustomError` with the engine's code and message (a 422 naming
    the field, web.http.validation.validate)."""

    def validate(value: V) -> V:
        try:
            check(value)
        except error as exc:
            raise PydanticCustomError(exc.code, exc.message) from None
        return value

    return validate


RequestHeaders = Annotated[
    dict[str, str],
    AfterValidator(_engine_rule(check_request_headers, InvalidRequestHeaders)),
    Field(
        description="Headers added to every request (http only; default {}). Host, "
        "Content-Length, Transfer-Encoding and Connection are refused.",
        json_schema_extra={
            "maxProperties": MAX_REQUEST_HEADERS,
            "propertyNames": {"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$"},
            "additionalProperties": {
                "type": "string",
                "maxLength": 4096,
                "pattern": "^(?:[\\x21-\\x7e](?:[\\x20\\x09]*[\\x21-\\x7e])*)?$",
            },
        },
    ),
]
"""``request_headers`` as a request sends it (rules: ``engine.probes._request``)."""

RequestBody = Annotated[
    str,
    Field(
        max_length=MAX_REQUEST_BODY_CHARS,
        description="The request's body, sent as UTF-8 with its Content-Length (http only).",
    ),
]


class AssertionIn(BaseModel):
    """One assertion: `source` says what is compared (`status_code`,
    `response_time_ms`, `header`, `body`, `json_body`), `property` which header or
    JSONPath, `comparison` how, and `target` with what."""

    model_config = ConfigDict(strict=True, extra="forbid")

    source: Source
    property: Annotated[str, Field(min_length=1, max_length=1000)] | None = Field(
        default=None, description="header: a header name; json_body: a JSONPath ($.status)."
    )
    comparison: Comparison
    target: Any = Field(default=None, json_schema_extra=_TARGET_SCHEMA)


def stored_assertions(value: list[AssertionIn] | None) -> list[dict[str, Any]]:
    """Assertions as stored and shown: every key present (``property`` and ``target``
    null when not sent); None (a PATCH clearing them) is ``[]``."""
    return [a.model_dump() for a in value or ()]


Assertions = Annotated[
    list[AssertionIn],
    Field(
        max_length=MAX_ASSERTIONS,
        description="When not empty, every assertion must hold, instead of the "
        "expected_status_code rule (http only; default []).",
    ),
    AfterValidator(
        _engine_rule(lambda value: check_assertions(stored_assertions(value)), InvalidAssertion)
    ),
]

TlsExpiryDays = Annotated[
    int,
    Field(
        ge=0,
        le=365,
        description="Fail with tls_expiring when the certificate expires within this many "
        "days (http only; default 14 for https urls, null for http).",
    ),
]


TlsCaBundle = Annotated[
    str,
    Field(
        max_length=MAX_CA_BUNDLE_BYTES,
        description="PEM text of one or more CA certificates (at most 64 KB): https targets "
        "are verified against these instead of the system's CAs, for a target behind a "
        "private certificate authority; null (the default) uses the system's. http only.",
    ),
    AfterValidator(_engine_rule(check_ca_bundle, InvalidCaBundle)),
]
"""``tls_ca_bundle`` as a request sends it (rules: ``engine.probes._tls``)."""

TlsVerify = Annotated[
    bool,
    Field(
        description="Verify the certificates of https targets (http only; default true). "
        "false accepts any certificate, self-signed or expired, and still records "
        "tls_expires_at and applies tls_expiry_days."
    ),
]


class AssertionObject(BaseModel):
    """One assertion of a monitor as the API shows it."""

    source: Source
    property: str | None
    comparison: Comparison
    target: str | float | bool | None
