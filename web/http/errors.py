"""The API's one error type and its response shape (docs/api.md, Error codes).

Every failure a client can cause becomes an :class:`ApiError` somewhere in the web layer and
is turned into a response in one place (:func:`error_body`), in the shape::

    {"error": {"type": "invalid_request_error", "code": "parameter_missing",
               "message": "...", "param": "name", "request_id": "req_..."}}

``type`` is one of the types of docs/api.md, Error codes; ``code`` is a stable snake_case
value from :data:`CODES` (listed in docs/api.md, Error codes, with when each occurs);
``param`` names the offending field or query parameter, else None. Lower layers' errors are
translated at the boundary: ``store.CursorNotFound`` becomes ``cursor_not_found``,
``store.DatabaseUnavailable`` becomes ``database_unavailable``, ``store.TimelineFull``
``too_many_updates``, anything unexpected ``internal_error`` (500, logged).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TYPES_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    409: "idempotency_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    431: "invalid_request_error",
    500: "api_error",
    503: "api_error",
}

CODES: dict[str, tuple[int, str]] = {
    # 400: the request cannot be read
    "invalid_json": (
        400,
        "The body is not valid UTF-8 JSON (param names the field holding NaN, Infinity or "
        "a number beyond the double range or 4,300 digits).",
    ),
    "json_too_deep": (
        400,
        "The body nests objects and arrays more than 100 levels deep.",
    ),
    "duplicate_key": (
        400,
        "A JSON object in the body has the same key twice (param names the key, or the "
        "top-level field holding that object).",
    ),
    "body_too_large": (400, "The body is larger than the limit (default 1 MiB)."),
    "unsupported_content_type": (
        400,
        "A POST or PATCH with a body does not have Content-Type: application/json.",
    ),
    "unknown_parameter": (400, "A query parameter the endpoint does not take."),
    "invalid_parameter": (
        400,
        "A query parameter's value is malformed, out of range, or holds NUL.",
    ),
    "cursor_conflict": (400, "Both starting_after and ending_before were sent."),
    "cursor_not_found": (400, "The cursor id names no object of the account."),
    "invalid_version": (400, "Service-Version is not a date of the form YYYY-MM-DD."),
    "unknown_version": (400, "Service-Version names no version of this API."),
    "incident_not_open": (400, "Resolve was called on an incident that is already resolved."),
    "alert_not_open": (
        400,
        "Acknowledge or resolve was called on an alert that is already resolved.",
    ),
    "maintenance_not_in_progress": (
        400,
        "End was called on a maintenance window with no occurrence in progress.",
    ),
    "maintenance_not_cancelable": (
        400,
        "Cancel was called on a maintenance window already canceled, or with no occurrence "
        "starting later.",
    ),
    "too_many_updates": (
        400,
        "The incident's timeline already holds 1,000 entries: posting an update, or a "
        "status move other than into resolved, is refused (resolving is always taken).",
    ),
    "duplicate_header": (
        400,
        "A header the API reads (Authorization, Idempotency-Key, Service-Version) was sent "
        "more than once; param names it.",
    ),
    "idempotency_key_invalid": (
        400,
        "Idempotency-Key is empty, longer than 255 characters, or holds control characters.",
    ),
    "malformed_request": (
        400,
        "The request is not valid HTTP/1.1 (request line, a header holding NUL or another "
        "control character, a malformed or repeated Content-Length, an unknown "
        "Transfer-Encoding, bytes after a body that are no request): refused by the HTTP "
        "server before the API; the connection is closed. Also a header holding NUL that "
        "reached the API (param names it).",
    ),
    "invalid_method": (
        400,
        "The method is not in upper case: methods are case-sensitive (RFC 9110), send GET, "
        "not get. Over HTTP/1.1 the connection is closed; over HTTP/2 the stream.",
    ),
    # 401
    "missing_token": (401, "No Authorization: Bearer header."),
    "invalid_token": (401, "The token is malformed, forged, for another audience, or unknown."),
    "token_expired": (401, "The token's exp has passed."),
    "token_revoked": (401, "The token was revoked."),
    # 403
    "missing_permission": (
        403,
        "The token lacks the permission the endpoint requires, or (param enabled_events) "
        "the read permission of events a webhook endpoint would subscribe to.",
    ),
    # 404, 405
    "resource_missing": (404, "No such object in the account (or malformed id)."),
    "route_not_found": (404, "No endpoint at this path."),
    "method_not_allowed": (405, "The path exists but not with this method."),
    # 408
    "body_timeout": (
        408,
        "The body did not arrive within --body-timeout-seconds (default 10); the "
        "connection is closed.",
    ),
    # 409
    "idempotency_key_reused": (
        409,
        "The Idempotency-Key was used with a different request (method, path or body).",
    ),
    "idempotency_key_in_use": (
        409,
        "A request with this Idempotency-Key is still running; retry after Retry-After.",
    ),
    "policy_in_use": (
        409,
        "An escalation policy still used by a monitor, a heartbeat or an open alert cannot "
        "be deleted (type invalid_request_error).",
    ),
    "schedule_in_use": (
        409,
        "A schedule an escalation policy's step targets cannot be deleted (type "
        "invalid_request_error).",
    ),
    "member_in_use": (
        409,
        "A member who is the only member of a schedule's layer cannot be deleted (type "
        "invalid_request_error).",
    ),
    # 422: a readable body that fails validation
    "parameter_missing": (422, "A required field is missing."),
    "parameter_unknown": (422, "A field the endpoint does not take (or may not set)."),
    "parameter_immutable": (422, "A field that cannot change after creation (type)."),
    "invalid_type": (422, "A field has the wrong JSON type, or the body is not an object."),
    "invalid_value": (422, "A field's value is not one of the allowed values."),
    "value_out_of_range": (422, "A number is outside its bounds."),
    "value_too_long": (422, "A string (or an array) is longer than its limit."),
    "value_too_short": (
        422,
        "A string is empty where it may not be, or an array holds fewer items than it must.",
    ),
    "timeout_exceeds_interval": (422, "timeout_seconds is greater than interval_seconds."),
    "invalid_url": (
        422,
        "url does not fit the monitor's type (a webhook endpoint's: not an absolute http or "
        "https URL).",
    ),
    "unknown_event_type": (
        422,
        "enabled_events holds something that is no event type, family prefix (monitor.*) or *.",
    ),
    "unknown_monitor": (
        422,
        "monitors (an incident's or a maintenance window's), components (a status page's) "
        "or depends_on (a monitor's) names a monitor (or, for a window, a heartbeat) the "
        "account does not have (param names where: depends_on[1], monitors[0]).",
    ),
    "dependency_cycle": (
        422,
        "A monitor's depends_on would make it depend on itself, directly or through other "
        "monitors (param names the item: depends_on[0]).",
    ),
    "invalid_slug": (
        422,
        "A status page's slug is not 3 to 60 characters of a-z, 0-9 and -, or starts or "
        "ends with -.",
    ),
    "slug_taken": (
        422,
        "Another status page (of any account) already has this slug: slugs are unique over "
        "the service.",
    ),
    "endpoint_limit_reached": (
        422,
        "The account already has 16 webhook endpoints (enabled or disabled), the most it "
        "may have: delete one first.",
    ),
    "invalid_email": (422, "A member's email is not an email address."),
    "invalid_time_zone": (
        422,
        "A member's or a schedule's time_zone (or a maintenance window's "
        "recurrence.time_zone) is no IANA time zone name.",
    ),
    "unknown_channel": (
        422,
        "A member's contact_channels or a policy's channel target names a notification "
        "channel the account does not have (param names where).",
    ),
    "unknown_member": (
        422,
        "A policy's member target, a schedule layer's member or an override's member names "
        "a member the account does not have (param names where: steps[0].targets[1].id, "
        "layers[0].members[2], member).",
    ),
    "unknown_schedule": (
        422,
        "A policy's schedule target names a schedule the account does not have (param names "
        "where: steps[0].targets[1].id).",
    ),
    "unknown_escalation_policy": (
        422,
        "escalation_policy (a monitor's or heartbeat's) names a policy the account does not have.",
    ),
    "invalid_channel_config": (
        422,
        "A notification channel's config does not fit its type (param names the key: config.url).",
    ),
    "smtp_not_configured": (
        422,
        "An email notification channel where the server has no SMTP relay (--smtp-url).",
    ),
    "metadata_too_many_keys": (422, "metadata would have more than 50 keys."),
    "metadata_key_too_long": (422, "A metadata key is longer than 40 characters, or empty."),
    "metadata_value_too_long": (422, "A metadata value is longer than 500 characters."),
    "metadata_invalid": (422, "metadata is not an object of string values."),
    "invalid_request_header": (
        422,
        "request_headers holds a name that is no RFC 9110 token, a name twice (any case), or a "
        "value that is not visible ASCII, spaces and tabs (a CR or LF, a control character, "
        "leading or trailing whitespace, more than 4,096 characters).",
    ),
    "request_header_not_allowed": (
        422,
        "request_headers sets Host, Content-Length, Transfer-Encoding or Connection (any "
        "case): the probe owns them.",
    ),
    "invalid_assertion": (
        422,
        "An assertion breaks a rule: its property, comparison or target does not fit its "
        "source (the message names it: assertions[1]: ...), or there are more than 20.",
    ),
    "invalid_jsonpath": (
        422,
        "A json_body assertion's property is not a JSONPath (starting with $) that "
        "jsonpath-ng accepts.",
    ),
    "invalid_ca_bundle": (
        422,
        "tls_ca_bundle is not PEM text of one or more certificates that parse (the message "
        "says which one), or it holds a private key.",
    ),
    "target_not_allowed": (
        422,
        "url points at an address the target policy refuses (metadata, or private with "
        "--deny-private-targets).",
    ),
    # 429
    "rate_limited": (
        429,
        "A rate limit is exhausted (token, account, or failed logins from the address); "
        "wait Retry-After seconds.",
    ),
    # 431
    "headers_too_large": (
        431,
        "The request line and headers are larger than 16 KiB (counted as HTTP/1.1 writes "
        "them, over HTTP/2 too); over HTTP/1.1 the connection is closed.",
    ),
    # 500
    "internal_error": (500, "A bug: quote the Request-Id to support."),
    "database_unavailable": (500, "The database cannot be reached right now; retry later."),
    "ping_not_recorded": (
        500,
        "A ping could not be handed to its heartbeat in time (the engine is restarting or "
        "overloaded, or runs nowhere: --no-engine); it was not recorded: retry.",
    ),
    "engine_unavailable": (
        500,
        "The change was saved but the engine did not acknowledge it in time; it applies "
        "the stored state when it recovers.",
    ),
    # 503
    "status_page_unavailable": (
        503,
        "A public status page's summary.json cannot be read right now (the database is "
        "down) and no copy of it is cached; retry after Retry-After seconds.",
    ),
    "badge_unavailable": (
        503,
        "A public badge cannot be read right now (the database is down) and no copy of it "
        "is cached; retry after Retry-After seconds.",
    ),
}
"""Every error code: its HTTP status and when it occurs (copied into docs/api.md, Error codes)."""

TYPE_OVERRIDES = {
    "policy_in_use": "invalid_request_error",
    "member_in_use": "invalid_request_error",
    "schedule_in_use": "invalid_request_error",
}
"""Codes whose type is not their status's (a 409 is an ``idempotency_error`` but for
these: docs/alerts.md, a policy in use)."""


class ApiError(Exception):
    """An error response: ``status`` and ``type`` follow from ``code`` (see :data:`CODES`).

    Attributes:
        code: a key of :data:`CODES`.
        message: a human sentence for the developer reading the response.
        param: the offending field or query parameter, or None.
        headers: extra response headers (for example ``Allow`` on a 405).
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        if code not in CODES:
            raise ValueError(f"unknown error code {code!r}")
        self.code = code
        self.message = message
        self.param = param
        self.headers = dict(headers or {})

    @property
    def status(self) -> int:
        """The HTTP status of this error."""
        return CODES[self.code][0]

    @property
    def type(self) -> str:
        """The error type of this error (docs/api.md, Error codes)."""
        return TYPE_OVERRIDES.get(self.code) or TYPES_BY_STATUS[self.status]


def error_body(error: ApiError, request_id: str) -> dict[str, Any]:
    """The JSON body of an error response."""
    return {
        "error": {
            "type": error.type,
            "code": error.code,
            "message": error.message,
            "param": error.param,
            "request_id": request_id,
        }
    }
