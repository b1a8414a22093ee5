"""Assertions, request headers and body, and TLS certificate expiry on the http probe
(docs/checks.md, Assertions and TLS expiry), against real local targets that serve the
bodies, headers and certificates each test wants (tests/targets.py; certificates made by
trustme).

Every source and comparison is run through a real probe; the pure rules (what the API
refuses) are checked on the shared validation functions, which the API tests
(tests/web/test_http_check_fields.py) check again through the app.
"""

from __future__ import annotations

import datetime
import json
import ssl
import time
from typing import Any

import pytest
import trio

from engine.probes import (
    ASSERTION_BODY_BYTES,
    InvalidAssertion,
    InvalidRequestHeaders,
    Prober,
    ProbeResult,
    ProbeSpec,
    check_assertions,
    check_request_headers,
    compile_assertions,
)
from engine.probes._assertions import BODY, HEAD_ONLY, HEADERS, needs
from tests.targets import HttpTarget, TlsPair

LIMIT_SECONDS = 5.0

HEALTH = {
    "status": "ok",
    "version": "1.2.0",
    "items": [{"name": "db", "ok": True, "lag": 3}, {"name": "cache", "ok": True, "lag": 12}],
    "empty": "",
    "nothing": None,
    "list": [],
    "count": "42",
}
"""The JSON body of ``/health`` in these tests."""


def spec(url: str, assertions: list[dict[str, Any]] | None = None, **fields: Any) -> ProbeSpec:
    options: dict[str, Any] = {"timeout_seconds": 3.0, "method": "GET"}
    options.update(fields)
    return ProbeSpec(
        type="http",
        url=url,
        assertions=compile_assertions(assertions or []),
        **options,
    )


def rule(
    source: str, comparison: str, target: Any = None, prop: str | None = None
) -> dict[str, Any]:
    return {"source": source, "property": prop, "comparison": comparison, "target": target}


def serve_health(target: HttpTarget, document: Any = HEALTH) -> None:
    target.responses["/health"] = (
        200,
        [("Content-Type", "application/json; charset=utf-8"), ("X-Version", "1.2.0")],
        json.dumps(document).encode(),
    )


async def probe(prober: Prober, probe_spec: ProbeSpec) -> ProbeResult:
    with trio.fail_after(LIMIT_SECONDS):
        return await prober.probe(probe_spec)


# Every source and comparison: (assertion, holds?) against /health above.
CASES = [
    # status_code
    (rule("status_code", "equals", 200), True),
    (rule("status_code", "equals", 201), False),
    (rule("status_code", "not_equals", 500), True),
    (rule("status_code", "less_than", 300), True),
    (rule("status_code", "greater_than", 299), False),
    # response_time_ms (loopback answers within a few ms)
    (rule("response_time_ms", "less_than", 2000), True),
    (rule("response_time_ms", "greater_than", 2000), False),
    (rule("response_time_ms", "less_than", 0.0001), False),
    # header: any case, first value; numbers compared as numbers
    (rule("header", "equals", "1.2.0", "x-version"), True),
    (rule("header", "equals", "1.2.0", "X-VERSION"), True),
    (rule("header", "not_equals", "1.3.0", "X-Version"), True),
    (rule("header", "contains", "json", "Content-Type"), True),
    (rule("header", "not_contains", "xml", "Content-Type"), True),
    (rule("header", "equals", 1.2, "X-Version"), False),  # "1.2.0" is no number
    (rule("header", "greater_than", 100, "Content-Length"), True),
    (rule("header", "less_than", 10, "Content-Length"), False),
    (rule("header", "is_not_empty", None, "X-Version"), True),
    (rule("header", "is_empty", None, "X-Missing"), True),
    (rule("header", "is_not_empty", None, "X-Missing"), False),
    (rule("header", "equals", "x", "X-Missing"), False),
    (rule("header", "not_equals", "x", "X-Missing"), True),
    # body: the text
    (rule("body", "contains", '"status": "ok"'), True),
    (rule("body", "not_contains", "degraded"), True),
    (rule("body", "contains", "degraded"), False),
    (rule("body", "is_not_empty"), True),
    (rule("body", "is_empty"), False),
    (rule("body", "equals", json.dumps(HEALTH)), True),
    (rule("body", "not_equals", json.dumps(HEALTH)), False),
    (rule("body", "less_than", 5), False),  # the body is no number
    (rule("body", "greater_than", 5), False),
    # json_body: JSONPath (jsonpath-ng, its filters too)
    (rule("json_body", "equals", "ok", "$.status"), True),
    (rule("json_body", "not_equals", "ok", "$.status"), False),
    (rule("json_body", "equals", True, "$.items[0].ok"), True),
    (rule("json_body", "equals", "true", "$.items[0].ok"), True),
    (rule("json_body", "equals", 3, "$.items[0].lag"), True),
    (rule("json_body", "equals", "3.0", "$.items[0].lag"), True),
    (rule("json_body", "less_than", 10, "$.items[0].lag"), True),
    (rule("json_body", "greater_than", 10, "$.items[1].lag"), True),
    (rule("json_body", "greater_than", 40, "$.count"), True),  # "42" reads as a number
    (rule("json_body", "contains", "1.2", "$.version"), True),
    (rule("json_body", "contains", "cache", "$.items[*].name"), True),  # array: an item
    (rule("json_body", "contains", "cach", "$.items[*].name"), False),
    (rule("json_body", "not_contains", "queue", "$.items[*].name"), True),
    (rule("json_body", "equals", 12, '$.items[?(@.name == "cache")].lag'), True),
    (rule("json_body", "is_empty", None, "$.empty"), True),
    (rule("json_body", "is_empty", None, "$.nothing"), True),
    (rule("json_body", "is_empty", None, "$.list"), True),
    (rule("json_body", "is_empty", None, "$.absent"), True),
    (rule("json_body", "is_not_empty", None, "$.items"), True),
    (rule("json_body", "is_not_empty", None, "$.absent"), False),
    (rule("json_body", "equals", "ok", "$.absent"), False),
    (rule("json_body", "less_than", 5, "$.status"), False),
]


async def test_every_source_and_comparison(http_target: HttpTarget) -> None:
    serve_health(http_target)
    prober = Prober()
    for assertion, holds in CASES:
        result = await probe(prober, spec(http_target.url("/health"), [assertion]))
        assert result.ok == holds, (assertion, result)
        assert result.status_code == 200
        if not holds:
            assert result.error_code == "assertion_failed", result
            assert result.error_message and result.error_message.startswith("assertions[0]: ")


async def test_messages_name_the_assertion_and_what_was_found(http_target: HttpTarget) -> None:
    serve_health(http_target, {**HEALTH, "status": "degraded"})
    prober = Prober()
    url = http_target.url("/health")
    cases = [
        (
            [rule("status_code", "equals", 200), rule("json_body", "equals", "ok", "$.status")],
            'assertions[1]: json_body $.status equals "ok", found "degraded"',
        ),
        ([rule("status_code", "equals", 204)], "assertions[0]: status_code equals 204, found 200"),
        (
            [rule("header", "equals", "x", "X-Trace")],
            'assertions[0]: header X-Trace equals "x", found no X-Trace header',
        ),
        (
            [rule("json_body", "is_not_empty", None, "$.gone")],
            "assertions[0]: json_body $.gone is_not_empty, found nothing at $.gone",
        ),
        (
            [rule("body", "contains", "Welcome"), rule("body", "contains", "Hello")],
            'assertions[0]: body contains "Welcome", found "{\\"status\\":',
        ),
    ]
    for assertions, message in cases:
        result = await probe(prober, spec(url, assertions))
        assert result.error_code == "assertion_failed"
        assert result.error_message is not None
        assert result.error_message.startswith(message), result.error_message
    result = await probe(prober, spec(url, cases[-1][0]))
    assert (result.error_message or "").endswith("(and 1 more assertion failed)")
    slow = await probe(prober, spec(url, [rule("response_time_ms", "less_than", 0.0001)]))
    assert slow.error_code == "assertion_failed"
    assert (slow.error_message or "").startswith("assertions[0]: response_time_ms less_than 0.0001")


async def test_a_health_endpoint_turning_degraded_fails_the_check(http_target: HttpTarget) -> None:
    serve_health(http_target)
    prober = Prober()
    health = spec(http_target.url("/health"), [rule("json_body", "equals", "ok", "$.status")])
    assert (await probe(prober, health)).ok
    serve_health(http_target, {**HEALTH, "status": "degraded"})
    result = await probe(prober, health)
    assert not result.ok and result.status_code == 200
    assert result.error_code == "assertion_failed"
    assert result.error_message == 'assertions[0]: json_body $.status equals "ok", found "degraded"'
    http_target.responses["/health"] = (200, [], b"<html>maintenance</html>")
    result = await probe(prober, health)
    assert result.error_message == (
        'assertions[0]: json_body $.status equals "ok": the body is not valid JSON'
    )


async def test_assertions_replace_the_expected_status_rule(http_target: HttpTarget) -> None:
    prober = Prober()
    url = http_target.url("/status/503")
    plain = await probe(prober, spec(url, expected_status_code=200))
    assert plain.error_code == "unexpected_status"
    down_on_purpose = await probe(
        prober, spec(url, [rule("status_code", "equals", 503)], expected_status_code=200)
    )
    assert down_on_purpose.ok and down_on_purpose.status_code == 503


async def test_the_body_is_read_up_to_one_mebibyte(http_target: HttpTarget) -> None:
    head = b"a" * (ASSERTION_BODY_BYTES - 10)
    http_target.responses["/large"] = (200, [], head + b"needle" + b"b" * ASSERTION_BODY_BYTES)
    http_target.responses["/late"] = (200, [], head + b"0123456789" + b"needle")
    http_target.responses["/big.json"] = (200, [], json.dumps({"x": "y" * 2_000_000}).encode())
    prober = Prober()
    found = await probe(
        prober, spec(http_target.url("/large"), [rule("body", "contains", "needle")])
    )
    assert found.ok, found
    late = await probe(prober, spec(http_target.url("/late"), [rule("body", "contains", "needle")]))
    assert late.error_code == "assertion_failed"  # it starts one byte past the first MiB
    cut = await probe(
        prober, spec(http_target.url("/big.json"), [rule("json_body", "is_not_empty", None, "$.x")])
    )
    assert cut.error_code == "assertion_failed"
    assert "not valid JSON (it was cut at 1 MiB)" in (cut.error_message or "")
    # without body assertions the probe reads no more than before (64 KiB) and is up
    assert (await probe(prober, spec(http_target.url("/large")))).ok


def test_what_the_probe_reads_follows_the_sources() -> None:
    assert needs(compile_assertions([rule("status_code", "equals", 200)])) == HEAD_ONLY
    assert needs(compile_assertions([rule("response_time_ms", "less_than", 9)])) == HEAD_ONLY
    assert needs(compile_assertions([rule("header", "is_empty", None, "A")])) == HEADERS
    assert (
        needs(compile_assertions([rule("header", "is_empty", None, "A"), rule("body", "is_empty")]))
        == BODY
    )
    assert needs(compile_assertions([rule("json_body", "is_empty", None, "$.a")])) == BODY


async def test_request_headers_and_body_arrive_at_the_target(http_target: HttpTarget) -> None:
    prober = Prober()
    payload = json.dumps({"ping": "é"})
    result = await probe(
        prober,
        spec(
            http_target.url("/api"),
            method="POST",
            request_headers=(
                ("Content-Type", "application/json"),
                ("Authorization", "Bearer s3cret"),
                ("user-agent", "custom-agent/1"),
            ),
            request_body=payload,
        ),
    )
    assert result.ok, result
    [request] = http_target.requests
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["authorization"] == "Bearer s3cret"
    assert request.headers["user-agent"] == "custom-agent/1"  # replaces Uptrio's
    assert request.headers["content-length"] == str(len(payload.encode()))
    assert request.headers["connection"] == "close"
    assert bytes(request.body).decode() == payload
    # a GET may carry a body too; without one, no Content-Length
    assert (await probe(prober, spec(http_target.url("/q"), request_body="x=1"))).ok
    assert http_target.requests[1].body == b"x=1"
    assert (await probe(prober, spec(http_target.url("/q")))).ok
    assert "content-length" not in http_target.requests[2].headers


async def test_redirects_drop_credentials_across_origins_and_the_body_on_303(
    http_target: HttpTarget,
) -> None:
    prober = Prober()
    http_target.redirects["/same"] = (307, "/landing")
    http_target.redirects["/other"] = (307, f"http://localhost:{http_target.port}/landing")
    http_target.redirects["/see-other"] = (303, "/landing")
    headers = (("Authorization", "Bearer s3cret"), ("X-Team", "ops"))
    for path in ("/same", "/other", "/see-other"):
        result = await probe(
            prober,
            spec(http_target.url(path), method="POST", request_headers=headers, request_body="b"),
        )
        assert result.ok, result
    same, other, see_other = (
        http_target.requests[1],
        http_target.requests[3],
        http_target.requests[5],
    )
    assert same.method == "POST" and same.body == b"b"
    assert same.headers["authorization"] == "Bearer s3cret"
    assert other.method == "POST" and "authorization" not in other.headers
    assert other.headers["x-team"] == "ops"
    assert see_other.method == "GET" and see_other.body == b""
    assert "content-length" not in see_other.headers


# -- the shared validation (the API's 422s) ----------------------------------------------


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"Host": "evil"}, "request_header_not_allowed"),
        ({"content-LENGTH": "5"}, "request_header_not_allowed"),
        ({"Transfer-Encoding": "chunked"}, "request_header_not_allowed"),
        ({"connection": "keep-alive"}, "request_header_not_allowed"),
        ({"X-A": "1\r\nX-Injected: yes"}, "invalid_request_header"),
        ({"X-A": "line\nbreak"}, "invalid_request_header"),
        ({"X-A": "nul\x00"}, "invalid_request_header"),
        ({"X-A": " padded"}, "invalid_request_header"),
        ({"X-A": "é"}, "invalid_request_header"),
        ({"X-A": "x" * 4097}, "invalid_request_header"),
        ({"Bad Name": "1"}, "invalid_request_header"),
        ({"X-A:": "1"}, "invalid_request_header"),
        ({"": "1"}, "invalid_request_header"),
        ({"X-A": "1", "x-a": "2"}, "invalid_request_header"),
        ({f"X-{i}": "1" for i in range(21)}, "value_too_long"),
    ],
)
def test_request_headers_refused(headers: dict[str, str], code: str) -> None:
    with pytest.raises(InvalidRequestHeaders) as refused:
        check_request_headers(headers)
    assert refused.value.code == code


def test_request_headers_accepted() -> None:
    check_request_headers({f"X-{i}": "v a\tl" for i in range(20)})
    check_request_headers({"Authorization": "Bearer x", "Accept": "", "user-agent": "me/1"})


@pytest.mark.parametrize(
    ("assertion", "code", "words"),
    [
        (rule("status", "equals", 200), "invalid_assertion", "source must be one of"),
        (rule("body", "matches", "x"), "invalid_assertion", "comparison must be one of"),
        (rule("header", "equals", "x"), "invalid_assertion", "needs a property"),
        (rule("header", "equals", "x", "Bad Name"), "invalid_assertion", "not a header name"),
        (rule("json_body", "equals", "x"), "invalid_assertion", "needs a property"),
        (rule("json_body", "equals", "x", "status"), "invalid_jsonpath", "starting with $"),
        (rule("json_body", "equals", "x", "$.a["), "invalid_jsonpath", "not a JSONPath"),
        (rule("json_body", "equals", "x", "$.a b"), "invalid_jsonpath", "not a JSONPath"),
        (rule("body", "equals", "x", "$.a"), "invalid_assertion", "takes no property"),
        (rule("status_code", "contains", 2), "invalid_assertion", "takes equals"),
        (rule("status_code", "is_empty"), "invalid_assertion", "takes equals"),
        (rule("status_code", "equals", "200"), "invalid_assertion", "needs a number"),
        (rule("body", "less_than", "5"), "invalid_assertion", "needs a number"),
        (rule("body", "greater_than", True), "invalid_assertion", "needs a number"),
        (rule("body", "equals"), "invalid_assertion", "needs a target"),
        (rule("body", "is_empty", "x"), "invalid_assertion", "takes no target"),
        (rule("body", "equals", ["x"]), "invalid_assertion", "a string, a number or a boolean"),
        (rule("body", "equals", {"a": 1}), "invalid_assertion", "a string, a number or a boolean"),
        (rule("body", "contains", "x" * 1001), "invalid_assertion", "at most 1000"),
    ],
)
def test_assertions_refused(assertion: dict[str, Any], code: str, words: str) -> None:
    with pytest.raises(InvalidAssertion) as refused:
        check_assertions([rule("status_code", "equals", 200), assertion])
    assert refused.value.code == code
    assert refused.value.message.startswith("assertions[1]: ")
    assert words in refused.value.message


def test_assertions_accepted_and_counted() -> None:
    check_assertions([assertion for assertion, _ in CASES[:20]])
    with pytest.raises(InvalidAssertion, match="at most 20"):
        check_assertions([rule("status_code", "equals", 200)] * 21)


async def test_a_stored_assertion_the_rules_refuse_fails_its_checks(
    http_target: HttpTarget,
) -> None:
    """What was stored runs even when a later version refuses it: the check fails with
    the rule broken, the monitor keeps running."""
    [compiled] = compile_assertions([rule("json_body", "equals", "x", "$.a[")])
    assert compiled.problem is not None
    result = await probe(
        Prober(), spec(http_target.url(), [rule("json_body", "equals", "x", "$.a[")])
    )
    assert result.error_code == "assertion_failed"
    assert "not a JSONPath" in (result.error_message or "")


# -- TLS certificate expiry ---------------------------------------------------------------


def server_context(tls: TlsPair, days: float) -> ssl.SSLContext:
    """A server context with a certificate of the test CA that expires in ``days``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=days)
    tls.ca.issue_cert("127.0.0.1", not_after=expires).configure_cert(context)
    return context


async def test_a_certificate_expiring_within_tls_expiry_days_fails(
    nursery: trio.Nursery, tls: TlsPair
) -> None:
    soon, later = (
        HttpTarget(ssl_context=server_context(tls, 3)),
        HttpTarget(ssl_context=server_context(tls, 60)),
    )
    await nursery.start(soon.run)
    await nursery.start(later.run)
    prober = Prober(ssl_context=tls.client)
    now = time.time()

    fine = await probe(prober, spec(later.url(), tls_expiry_days=14))
    assert fine.ok, fine
    assert fine.tls_expires_at is not None
    assert abs(fine.tls_expires_at - (now + 60 * 86_400)) < 120

    expiring = await probe(prober, spec(soon.url(), tls_expiry_days=14))
    assert not expiring.ok and expiring.status_code == 200
    assert expiring.error_code == "tls_expiring"
    assert expiring.tls_expires_at is not None
    assert abs(expiring.tls_expires_at - (now + 3 * 86_400)) < 120
    when = time.strftime("%Y-%m-%d", time.gmtime(expiring.tls_expires_at))
    assert f"the TLS certificate of 127.0.0.1 expires on {when}" in (expiring.error_message or "")
    assert "in 3.0 days (tls_expiry_days is 14)" in (expiring.error_message or "")

    # null never fails for expiry, 0 neither (an expired certificate fails the handshake);
    # both still record tls_expires_at; a window wider than 60 days catches the later one
    for days in (None, 0, 2):
        result = await probe(prober, spec(soon.url(), tls_expiry_days=days))
        assert result.ok and result.tls_expires_at == expiring.tls_expires_at
    assert (await probe(prober, spec(later.url(), tls_expiry_days=61))).error_code == "tls_expiring"
    # a failing status or assertion is the reason given first
    failing = await probe(prober, spec(soon.url("/status/500"), tls_expiry_days=14))
    assert failing.error_code == "unexpected_status"
    assert failing.tls_expires_at == expiring.tls_expires_at


async def test_plain_http_records_no_certificate(http_target: HttpTarget) -> None:
    result = await probe(Prober(), spec(http_target.url(), tls_expiry_days=14))
    assert result.ok and result.tls_expires_at is None
