"""The importers' mapping rules one by one (docs/import.md, "Uptime Kuma" and "Gatus"):
conditions, status codes, JSON queries, channel types, names, the API's limits; and, on
random inputs (hypothesis), that whatever they print is what the API accepts
(``assert_api_accepts``, tests/web/import_helpers.py). Pure converters: no database, no
network.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.web.import_helpers import assert_api_accepts
from web.api.notification_channels import ChannelCreate
from web.process.cli.importers import convert_gatus, convert_kuma


@pytest.mark.parametrize(
    ("condition", "assertion"),
    [
        ("[STATUS] < 300", {"source": "status_code", "comparison": "less_than", "target": 300}),
        ("[STATUS] >= 200", {"source": "status_code", "comparison": "greater_than", "target": 199}),
        ("[BODY] == pat(*ok*)", {"source": "body", "comparison": "contains", "target": "ok"}),
        (
            "[BODY] != pat(*error*)",
            {"source": "body", "comparison": "not_contains", "target": "error"},
        ),
        (
            "[BODY].data[0].id == 42",
            {
                "source": "json_body",
                "property": "$.data[0].id",
                "comparison": "equals",
                "target": 42,
            },
        ),
        (
            "has([BODY].errors) == false",
            {"source": "json_body", "property": "$.errors", "comparison": "is_empty"},
        ),
    ],
)
def test_gatus_conditions_that_map(condition: str, assertion: dict[str, Any]) -> None:
    text = (
        f"endpoints:\n  - name: a\n    url: https://example.org\n    conditions:\n"
        f'      - {json.dumps(condition)}\n      - "[STATUS] == 201"\n'
    )
    conversion = convert_gatus(text)
    assert conversion.notes == []
    [monitor] = conversion.document()["monitors"]
    assert assertion in monitor["assertions"]
    assert_api_accepts(conversion.document())


@pytest.mark.parametrize(
    "condition",
    [
        "[STATUS] == any(200, 201)",
        "len([BODY].data) > 0",
        "[BODY].id == [CONTEXT].user_id",
        "[BODY] == pat(1.*)",
        "[RESPONSE_TIME] < fast",
        "[IP] == 127.0.0.1",
    ],
)
def test_gatus_conditions_without_equivalent_are_noted(condition: str) -> None:
    text = (
        f"endpoints:\n  - name: a\n    url: https://example.org\n    conditions:\n"
        f"      - {json.dumps(condition)}\n"
    )
    conversion = convert_gatus(text)
    assert [str(n) for n in conversion.notes] == [
        f"line 5: condition {condition!r} has no equivalent; skipped"
    ]
    [monitor] = conversion.document()["monitors"]
    assert "assertions" not in monitor
    assert_api_accepts(conversion.document())


def _kuma(**monitor: Any) -> dict[str, Any]:
    base = {"id": 9, "name": "m", "type": "http", "url": "https://example.org", "interval": 60}
    document = convert_kuma(json.dumps({"monitorList": [{**base, **monitor}]}))
    assert_api_accepts(document.document())
    return {
        "monitor": document.document()["monitors"][0],
        "notes": [str(n) for n in document.notes],
    }


def test_kuma_status_codes_one_code_ranges_and_gaps() -> None:
    assert _kuma(accepted_statuscodes=["204"])["monitor"]["expected_status_code"] == 204
    joined = _kuma(accepted_statuscodes=["300-399", "200-299"])["monitor"]["assertions"]
    assert [a["target"] for a in joined] == [199, 400]
    apart = _kuma(accepted_statuscodes=["200-299", "404"])
    assert [a["target"] for a in apart["monitor"]["assertions"]] == [199, 300]
    assert apart["notes"] == [
        "monitor \"m\" (id 9): accepted status codes ['200-299', '404'] are not one range; "
        "kept 200-299"
    ]


def test_kuma_json_queries_beyond_a_plain_path_are_noted() -> None:
    plain = _kuma(
        type="json-query",
        jsonPath="items[0].ok",
        expectedValue="true",
        accepted_statuscodes=["200"],
    )
    assert plain["monitor"]["assertions"][-1]["property"] == "$.items[0].ok"
    jsonata = _kuma(type="json-query", jsonPath="$count(items)", expectedValue="3")
    assert len(jsonata["notes"]) == 1 and "has no equivalent" in jsonata["notes"][0]
    assert all(a["source"] == "status_code" for a in jsonata["monitor"]["assertions"])


def test_kuma_short_interval_keeps_the_timeout_within_it() -> None:
    monitor = _kuma(interval=20, maxretries=12)
    assert (monitor["monitor"]["timeout_seconds"], monitor["monitor"]["failure_threshold"]) == (
        20,
        10,
    )
    assert monitor["notes"] == ['monitor "m" (id 9): 12 retries imported as failure_threshold 10']


def test_duplicate_names_are_made_unique_and_noted() -> None:
    conversion = convert_kuma(
        json.dumps(
            {
                "monitorList": [
                    {"id": 1, "name": "api", "type": "ping", "hostname": "a.example"},
                    {"id": 2, "name": "api", "type": "ping", "hostname": "b.example"},
                ]
            }
        )
    )
    assert [m["name"] for m in conversion.document()["monitors"]] == ["api", "api (2)"]
    assert [str(n) for n in conversion.notes] == [
        "monitor \"api\" (id 2): name 'api' imported as 'api (2)' (names are unique per kind)"
    ]


KUMA_NOTIFICATIONS = {
    "slack": {"slackwebhookURL": "https://hooks.slack.com/services/T0/B0/x"},
    "discord": {"discordWebhookUrl": "https://discord.com/api/webhooks/1/x"},
    "teams": {"webhookUrl": "https://example.webhook.office.com/webhookb2/x"},
    "telegram": {"telegramBotToken": "123:abc-DEF", "telegramChatID": "-100123"},
    "PagerDuty": {"pagerdutyIntegrationKey": "0123456789abcdef0123456789abcdef"},
    "Opsgenie": {"opsgenieApiKey": "key-1234", "opsgenieRegion": "eu"},
    "ntfy": {
        "ntfyserverurl": "https://ntfy.example.com/",
        "ntfytopic": "alerts",
        "ntfyAuthenticationMethod": "accessToken",
        "ntfyaccesstoken": "tk_abc",
    },
    "webhook": {"webhookURL": "https://hooks.example.com/kuma"},
    "smtp": {"smtpTo": "ops@example.com, cto@example.com"},
}


def test_kuma_notifications_of_every_uptrio_channel_type() -> None:
    notifications = [
        {"id": i, "name": kind, "config": json.dumps({"type": kind, **config}), "active": 1}
        for i, (kind, config) in enumerate(KUMA_NOTIFICATIONS.items())
    ]
    conversion = convert_kuma(json.dumps({"notificationList": notifications, "monitorList": []}))
    document = conversion.document()
    assert_api_accepts(document)
    configs = {c["type"]: c["config"] for c in document["notification_channels"]}
    assert set(configs) == set(ChannelCreate.model_fields["type"].annotation.__args__)  # type: ignore[union-attr]
    assert configs["opsgenie"] == {"api_key": "key-1234", "region": "eu"}
    assert configs["ntfy"] == {
        "topic_url": "https://ntfy.example.com/alerts",
        "access_token": "tk_abc",
    }
    assert configs["email"] == {"address": "ops@example.com"}
    assert [str(n) for n in conversion.notes] == [
        'notification "smtp" (id 8): several addresses; only ops@example.com is kept'
    ]


def test_gatus_alerting_providers_of_every_uptrio_channel_type() -> None:
    alerting = {
        "slack": {"webhook-url": "https://hooks.slack.com/services/T0/B0/x"},
        "discord": {"webhook-url": "https://discord.com/api/webhooks/1/x"},
        "teams-workflows": {"webhook-url": "https://example.logic.azure.com/workflows/x"},
        "telegram": {"token": "123:abc-DEF", "id": "-100123"},
        "pagerduty": {"integration-key": "0123456789abcdef0123456789abcdef"},
        "opsgenie": {"api-key": "key-1234"},
        "ntfy": {"topic": "alerts", "token": "tk_abc"},
        "email": {"from": "gatus@example.com", "host": "smtp.example.com", "to": "ops@example.com"},
        "custom": {"url": "https://hooks.example.com/gatus", "body": "[ENDPOINT_NAME]"},
        "pushover": {"application-token": "x", "user-key": "y"},
    }
    text = yaml.safe_dump({"alerting": alerting, "endpoints": []})
    conversion = convert_gatus(text)
    document = conversion.document()
    assert_api_accepts(document)
    configs = {c["name"]: (c["type"], c["config"]) for c in document["notification_channels"]}
    assert configs["teams-workflows"][0] == "teams"
    assert configs["ntfy"] == (
        "ntfy",
        {"topic_url": "https://ntfy.sh/alerts", "access_token": "tk_abc"},
    )
    assert configs["custom"] == ("webhook", {"url": "https://hooks.example.com/gatus"})
    assert len(configs) == 9
    notes = [n.message for n in conversion.notes]
    assert "custom alert body not kept: Uptrio sends the alert object" in notes
    assert "alerting provider 'pushover' has no Uptrio channel type; skipped" in notes


def test_channels_missing_a_required_value_are_noted() -> None:
    notifications = [
        {"id": 1, "name": "x", "config": json.dumps({"type": "slack"})},
        {
            "id": 2,
            "name": "y",
            "config": json.dumps({"type": "ntfy", "ntfyserverurl": "https://n"}),
        },
        {"id": 3, "name": "z", "config": "not json"},
    ]
    conversion = convert_kuma(json.dumps({"notificationList": notifications, "monitorList": []}))
    assert conversion.document() == {}
    assert [str(n) for n in conversion.notes] == [
        "notification \"x\" (id 1): type 'slack': no webhook_url in its config; skipped",
        "notification \"y\" (id 2): type 'ntfy': no topic in its config; skipped",
        'notification "z" (id 3): its config is not JSON; skipped',
    ]


def test_what_the_api_refuses_is_left_out_by_the_engine_rules() -> None:
    monitor = _kuma(
        type="keyword",
        keyword="x" * 1001,
        headers=json.dumps({"X-Ok": "1", "Bad Name": "2", "X-Crlf": "a\r\nInjected: 1"}),
        body="b" * 10_001,
        accepted_statuscodes=["200"],
    )
    assert monitor["monitor"]["request_headers"] == {"X-Ok": "1"}
    assert "request_body" not in monitor["monitor"]
    assert monitor["monitor"]["assertions"] == [
        {"source": "status_code", "comparison": "equals", "target": 200}
    ]
    notes = monitor["notes"]
    assert len(notes) == 4
    assert all(n.startswith('monitor "m" (id 9): ') for n in notes)
    assert sum("header not imported" in n for n in notes) == 2
    assert any("request body over 10000 characters" in n for n in notes)
    assert any("1000" in n and n.endswith("; assertion not imported") for n in notes)


def test_an_endpoint_without_an_address_is_skipped() -> None:
    conversion = convert_gatus(
        "endpoints:\n  - name: q\n    url: 1.1.1.1\n    dns:\n      query-type: A\n"
        "  - name: m\n    url: https://example.org\n    method: TRACE\n"
    )
    [monitor] = conversion.document()["monitors"]
    assert monitor["name"] == "m" and "method" not in monitor
    notes = [str(n) for n in conversion.notes]
    assert "line 2: no address to check; skipped" in notes
    assert "line 8: method TRACE is not one Uptrio sends; GET" in notes


def test_at_most_20_headers_and_20_assertions() -> None:
    headers = {f"X-H{i}": str(i) for i in range(22)}
    conditions = "".join(f'      - "[RESPONSE_TIME] < {300 + i}"\n' for i in range(21))
    conversion = convert_gatus(
        "endpoints:\n  - name: m\n    url: https://example.org\n"
        f"    headers: {json.dumps(headers)}\n    conditions:\n{conditions}"
    )
    [monitor] = conversion.document()["monitors"]
    assert list(monitor["request_headers"]) == [f"X-H{i}" for i in range(20)]
    assert len(monitor["assertions"]) == 20
    assert len(conversion.notes) == 3
    assert all(n.message.startswith("more than 20 of them; ") for n in conversion.notes)
    assert_api_accepts(conversion.document())


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 100_000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["http", "keyword", "json-query", "port", "ping", "dns", "push", "docker"]),
    st.sampled_from(["https://example.org", "example.org", "200-299", "data.x", "$x", "==", ""]),
    st.text(max_size=30),
    st.lists(st.sampled_from(["200", "300-399", "x", "204"]), max_size=3),
    st.dictionaries(st.sampled_from(["1", "2"]), st.booleans(), max_size=2),
)
_KUMA_MONITOR = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["http", "keyword", "json-query", "port", "ping", "dns", "push"]),
        "url": st.sampled_from(["https://example.org/x", "example.org", "ftp://x", "", "https://"]),
        "hostname": st.sampled_from(["db.example.com", "1.2.3.4", "::1", "", "a b"]),
        "port": st.one_of(st.integers(-1, 70_000), st.sampled_from(["53", "x"])),
    },
    optional={
        key: _VALUES
        for key in (
            "id", "name", "method", "interval", "timeout", "maxretries", "retryInterval",
            "accepted_statuscodes", "headers", "body", "keyword", "invertKeyword", "jsonPath",
            "jsonPathOperator", "expectedValue", "ignoreTls", "notificationIDList",
            "authMethod", "basic_auth_user", "dns_resolve_type", "active",
        )
    },
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_KUMA_MONITOR, max_size=4))
def test_any_kuma_monitor_list_converts_to_what_the_api_accepts(
    monitors: list[dict[str, Any]],
) -> None:
    notification = {"id": 1, "name": "s", "config": json.dumps(KUMA_NOTIFICATIONS_SLACK)}
    backup = {"notificationList": [notification], "monitorList": monitors}
    assert_api_accepts(convert_kuma(json.dumps(backup)).document())


KUMA_NOTIFICATIONS_SLACK = {"type": "slack", **KUMA_NOTIFICATIONS["slack"]}


_GATUS_ENDPOINT = st.fixed_dictionaries(
    {
        "name": st.text(max_size=10),
        "url": st.sampled_from(
            ["https://example.org", "tcp://db:5432", "tcp://db", "icmp://h", "8.8.8.8", "x"]
        ),
        "conditions": st.lists(
            st.one_of(
                st.sampled_from(
                    [
                        "[STATUS] == 200", "[STATUS] <= 299", "[STATUS] >= x", "[BODY] == ok",
                        "[BODY].a.b == 1", "[BODY].a > 2.5", "[RESPONSE_TIME] < 300",
                        "[CERTIFICATE_EXPIRATION] > 9999h", "[CONNECTED] == true",
                        "[BODY] == pat(*x*)", "has([BODY].x) == true", "[DNS_RCODE] == NOERROR",
                    ]
                ),
                st.text(max_size=20),
            ),
            max_size=5,
        ),
    },
    optional={
        "interval": st.sampled_from(["30s", "1h30m", "0s", "500ms", "48h", 60, "x"]),
        "method": st.sampled_from(["post", "TRACE", "GET"]),
        "headers": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
        "body": st.text(max_size=5),
        "client": st.fixed_dictionaries({}, optional={"timeout": st.sampled_from(["5s", "2m"])}),
        "dns": st.fixed_dictionaries(
            {"query-name": st.sampled_from(["example.com", "", "1.2.3.4"])},
            optional={"query-type": st.sampled_from(["A", "AAAA", "MX"])},
        ),
        "alerts": st.lists(st.fixed_dictionaries({"type": st.sampled_from(["slack", "x"])})),
    },
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_GATUS_ENDPOINT, max_size=4))
def test_any_gatus_endpoint_list_converts_to_what_the_api_accepts(
    endpoints: list[dict[str, Any]],
) -> None:
    alerting = {"slack": {"webhook-url": "https://hooks.slack.com/services/T0/B0/x"}}
    text = yaml.safe_dump({"alerting": alerting, "endpoints": endpoints})
    assert_api_accepts(convert_gatus(text).document())


def test_a_skipped_monitor_leaves_no_policy_behind() -> None:
    notification = {"id": 1, "name": "s", "config": json.dumps(KUMA_NOTIFICATIONS_SLACK)}
    monitor = {"id": 2, "name": "d", "type": "dns", "hostname": "1.2.3.4"}
    monitor["notificationIDList"] = {"1": True}
    backup = {"notificationList": [notification], "monitorList": [monitor], "x": float("nan")}
    conversion = convert_kuma(json.dumps(backup))
    assert list(conversion.document()) == ["notification_channels"]
    [note] = conversion.notes
    assert note.message.startswith("dns url '1.2.3.4': a dns monitor checks that a host name")


def test_numbers_that_are_not_finite_take_the_defaults() -> None:
    text = '{"monitorList": [{"id": 1, "name": "p", "type": "ping", "hostname": "h.example",'
    text += ' "interval": Infinity, "timeout": NaN, "maxretries": -Infinity}]}'
    [monitor] = convert_kuma(text).document()["monitors"]
    assert (monitor["interval_seconds"], monitor["failure_threshold"]) == (60, 1)
    assert "timeout_seconds" not in monitor  # the API's default, 30 s, not NaN
