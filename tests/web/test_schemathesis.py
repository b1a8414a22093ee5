"""Schemathesis against the service's own ``/openapi.json`` (docs/api.md, API reference).

The real service runs as ``uptrio serve --no-engine`` in a subprocess, on a loopback port
chosen by the OS, with its embedded Postgres in a temporary data directory (schemathesis
is synchronous and speaks HTTP through ``requests``, so a live server is the robust
path). Two tests, bounded to a few examples each:

- every operation with schemathesis's default checks: no 5xx, status codes, content
  types, headers and bodies as documented, negative (schema-invalid) data rejected with
  a 4xx, a request without ``Authorization`` refused with 401. The one default check left
  out, ``positive_data_acceptance``, is replaced by a stricter-where-it-can version: a
  schema-valid request may be refused only for a rule the schema cannot state (a url
  that does not fit the monitor's type, an unknown cursor, both cursors at once, a
  timeout above the interval, an incident already resolved...), each named by its code;
- a stateful run following the document's OpenAPI links: create, then get, update,
  pause, resume, resolve and delete the created objects.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.web.helpers import CLI, ROOT, serve_command, service_env
from web.http.params import holds_nul

SEMANTIC_REFUSALS = frozenset(
    {
        "invalid_url",  # url must fit the monitor's type
        "invalid_value",  # method / expected_status_code on a non-http monitor
        "timeout_exceeds_interval",
        "target_not_allowed",
        "metadata_too_many_keys",  # counted after the merge of a PATCH
        "cursor_not_found",  # a well-formed id that names no object
        "cursor_conflict",  # both cursors at once
        "incident_not_open",  # resolve on a resolved incident
        "unknown_monitor",  # an incident's monitors, a monitor's depends_on: the account's own
        "dependency_cycle",  # a monitor's depends_on may not lead back to it
        "slug_taken",  # a status page's slug is unique over the service
        "endpoint_limit_reached",  # at most 16 webhook endpoints an account
        "request_header_not_allowed",  # Host, Content-Length, ... in any case
        "invalid_request_header",  # a header name twice in different cases
        "invalid_assertion",  # property, comparison and target must fit the source
        "invalid_jsonpath",  # a JSONPath jsonpath-ng accepts
        "invalid_ca_bundle",  # PEM text whose certificates parse
        "invalid_time_zone",  # an IANA name zoneinfo knows
        "invalid_email",  # an address email-validator accepts
        "invalid_channel_config",  # the keys and values a channel type takes
        "smtp_not_configured",  # an email channel on a server without an SMTP relay
        "unknown_channel",  # a member's or a policy's channels must be the account's own
        "unknown_member",  # a policy's members must be the account's own
        "unknown_schedule",  # a policy's schedules must be the account's own
        "unknown_escalation_policy",  # a monitor's or heartbeat's policy, the account's own
        "policy_in_use",  # a policy a monitor, a heartbeat or an open alert uses
        "member_in_use",  # the only member of a schedule's layer
        "schedule_in_use",  # a schedule a policy's step targets
    }
)
"""Codes a schema-valid request may get: rules OpenAPI cannot express."""


def _serve(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``uptrio serve --no-engine`` on port 0; return the process and its base URL."""
    command = serve_command(
        data_dir,
        "--token-requests-per-minute",
        "1000000",
        "--token-requests-per-hour",
        "1000000",
        "--account-requests-per-minute",
        "1000000",
        # schemathesis sends every example once more with a made-up token (ignored_auth):
        # with 60 operations that passes the default 60 failed logins a minute
        "--auth-failures-per-minute",
        "1000000",
    )
    command.insert(len(CLI), "--log-level=warning")  # a global option, before ``serve``
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=service_env(), cwd=ROOT
    )
    assert process.stdout is not None
    output = b""
    deadline = time.monotonic() + 40
    while (found := re.search(rb"listening on (http://127\.0\.0\.1:\d+)", output)) is None:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"the service did not start: {output!r}"
        ready, _, _ = select.select([process.stdout], [], [], remaining)
        if ready:
            chunk = os.read(process.stdout.fileno(), 4096)
            assert chunk, f"the service exited: {output!r}"
            output += chunk
    return process, found.group(1).decode()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``(base URL, token)`` of a live service for this module's tests."""
    data_dir = tmp_path_factory.mktemp("schemathesis") / "data"
    process, base = _serve(data_dir)
    try:
        token = (data_dir / "first-token").read_text().strip()
        yield base, token
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def api_schema(service: tuple[str, str]) -> Any:
    """The service's OpenAPI document as a schemathesis schema, with the token sent on
    every request. Generated strings may hold NUL, which Postgres cannot store: the API
    refuses it (:func:`semantic_refusals_only`), never with a 5xx."""
    base, _ = service
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
    schema.config.update(base_url=base)
    return schema


@pytest.fixture(scope="module")
def auth(service: tuple[str, str]) -> dict[str, str]:
    """The token as explicit headers: schemathesis's ``ignored_auth`` check then also
    sends each request without them, and with a made-up token, expecting 401."""
    return {"Authorization": f"Bearer {service[1]}"}


def _sent(case: Any, param: str | None) -> Any:
    """What ``case`` sent as ``param``: a body field, query parameter, path parameter or
    header (None when it sent none)."""
    for where in (case.body, case.query, case.path_parameters, case.headers):
        if isinstance(where, dict) and param in where:
            return where[param]
    return None


def _at_path(body: Any, path: str, default: Any) -> Any:
    """The value at ``path`` (``steps[0].delay_seconds``) of ``body``, or ``default``
    when the path does not lead into it."""
    value = body
    for part in re.findall(r"[^.\[\]]+", path):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return default
    return value


def semantic_refusals_only(ctx: Any, response: Any, case: Any) -> bool | None:
    """Check: a schema-valid request refused with 400 or 422 names a rule the schema
    cannot state (:data:`SEMANTIC_REFUSALS`), or a value holding NUL (U+0000, which
    Postgres cannot store: refused wherever it is sent, docs/api.md, Hostile input)."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    if response.status_code in (400, 422):
        error = response.json()["error"]
        code = error["code"]
        sent = _sent(case, error["param"])
        if code in ("invalid_parameter", "invalid_value") and holds_nul(sent):
            return None
        if code == "invalid_type":  # a nested field's message names its path
            sent = _at_path(case.body, error["message"].split(" ", 1)[0], sent)
        if code == "invalid_type" and isinstance(sent, float) and sent.is_integer():
            # JSON Schema's integer admits 8.0; the API's integers are strict (web/api/)
            return None
        assert code in SEMANTIC_REFUSALS, (
            f"schema-valid data refused with {response.status_code} {code}: {response.text[:300]}"
        )
    return None


SETTINGS = settings(
    max_examples=8,  # of each mode per operation: 81 operations give 1,296 requests
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)


def test_every_operation_conforms_to_the_document(api_schema: Any, auth: dict[str, str]) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    # monitors 9 (checks and availability included), incidents 8 (updates included),
    # heartbeats 8, webhook endpoints 7, status pages 5, alerts 5, events 2, members 5,
    # notification channels 6 (the test send included), escalation policies 5,
    # maintenance windows 7 (end and cancel included), schedules 11 (CRUD, the calendar
    # key, overrides 3, who is on call, shifts), regions 1
    assert len(operations) == 81
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @SETTINGS
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                case.call_and_validate(
                    headers=auth,
                    excluded_checks=[positive_data_acceptance],
                    additional_checks=[semantic_refusals_only],
                    timeout=10,
                )

            run()


def test_stateful_create_get_update_delete(api_schema: Any, auth: dict[str, str]) -> None:
    # Status pages are left to the test above: their slug is unique over the service, so
    # on this one live server a replayed create can fail where it first succeeded, and
    # their rules alone change which paths hypothesis explores here.
    # Only the document's own links (create -> retrieve, update, delete, ...): the links
    # schemathesis infers by dependency analysis include list -> item, whose ids depend on
    # whatever earlier examples left on this live server, so hypothesis's replays of an
    # example drew differently ("FlakyStrategyDefinition").
    schema = api_schema.exclude(path_regex="^/status-pages")
    schema.config.phases.stateful.inference.algorithms = []
    machine = schema.as_state_machine()
    assert len(machine.setup_state().rules) > 10  # the document's links (19 today)

    class Machine(machine):  # type: ignore[misc, valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": auth, "timeout": 10}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            case.validate_response(
                response,
                headers=auth,
                excluded_checks=[positive_data_acceptance],
                additional_checks=[semantic_refusals_only],
                transport_kwargs={"headers": auth},
            )

    Machine.run(settings=settings(SETTINGS, max_examples=30, stateful_step_count=8))
