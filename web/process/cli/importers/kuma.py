"""An Uptime Kuma 1.x JSON backup (Settings → Backup → Export: ``{"version",
"notificationList", "monitorList"}``) converted to the apply format (docs/import.md,
"Uptime Kuma").

What maps:

* notifications of the types Uptrio has (``slack``, ``discord``, ``teams``, ``telegram``,
  ``PagerDuty``, ``Opsgenie``, ``ntfy``, ``webhook``, ``smtp``) → notification channels;
  a monitor's ``notificationIDList`` → an escalation policy telling those channels at
  once (one per distinct set), named in the monitor's ``escalation_policy``;
* ``http``, ``keyword`` and ``json-query`` monitors → http monitors: ``method``,
  ``body``, ``headers`` (a JSON string), basic auth (an ``Authorization`` header),
  ``accepted_statuscodes`` (``expected_status_code``, or ``status_code`` assertions for a
  range), the keyword (a ``body`` assertion, ``not_contains`` when inverted), the JSON
  query (a ``json_body`` assertion when the expression is a plain path), ``ignoreTls``
  (``tls_verify: false``), ``expiryNotification`` off (``tls_expiry_days: 0``);
* ``port`` → tcp, ``ping`` → ping, ``dns`` (A and AAAA) → dns; ``push`` → a heartbeat;
* ``interval`` and ``timeout`` (seconds), ``maxretries`` → ``failure_threshold``
  (retries + 1: Kuma marks a monitor down after its retries).

Everything else (other monitor types, proxies, inverted monitors, other DNS record types,
other authentication methods, a ``retryInterval`` of its own, paused monitors) is a note.
"""

from __future__ import annotations

import base64
import json
import math
import re
from typing import Any

from ._document import (
    MAX_THRESHOLD,
    METHODS,
    Conversion,
    InvalidImport,
    clamp,
    status_range_assertions,
    timing,
)

__all__ = ["convert_kuma"]

HTTP_TYPES = {"http", "keyword", "json-query"}
_PLAIN_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*$")
_STATUS = re.compile(r"^\s*(\d{3})\s*(?:-\s*(\d{3})\s*)?$")
_OPERATORS = {
    "==": "equals",
    "!=": "not_equals",
    "<": "less_than",
    ">": "greater_than",
    "contains": "contains",
}
"""Kuma 2's ``jsonPathOperator`` values Uptrio's comparisons express (1.x compares with
``==``)."""


def _channel_config(kind: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The Uptrio channel type and config of a Kuma notification's ``config`` (its
    provider's field names, server/notification-providers/*.js), or None when Uptrio has
    no such type."""
    text = {k: v.strip() if isinstance(v, str) else v for k, v in config.items()}
    match kind.lower():
        case "slack":
            return "slack", {"webhook_url": text.get("slackwebhookURL")}
        case "discord":
            return "discord", {"webhook_url": text.get("discordWebhookUrl")}
        case "teams":
            return "teams", {"webhook_url": text.get("webhookUrl")}
        case "telegram":
            return "telegram", {
                "bot_token": text.get("telegramBotToken"),
                "chat_id": text.get("telegramChatID"),
            }
        case "pagerduty":
            return "pagerduty", {"routing_key": text.get("pagerdutyIntegrationKey")}
        case "opsgenie":
            region = "eu" if str(text.get("opsgenieRegion", "us")).lower() == "eu" else "us"
            return "opsgenie", {"api_key": text.get("opsgenieApiKey"), "region": region}
        case "ntfy":
            server = str(text.get("ntfyserverurl") or "https://ntfy.sh").rstrip("/")
            out = {"topic_url": f"{server}/{text.get('ntfytopic') or ''}"}
            if text.get("ntfyAuthenticationMethod") == "accessToken" and text.get(
                "ntfyaccesstoken"
            ):
                out["access_token"] = text["ntfyaccesstoken"]
            return "ntfy", out
        case "webhook":
            return "webhook", {"url": text.get("webhookURL")}
        case "smtp":
            return "email", {"address": text.get("smtpTo")}
    return None


def _channels(items: list[Any], conversion: Conversion) -> dict[str, str]:
    """Add the notifications Uptrio can send as channels; their Kuma id → channel name."""
    names: dict[str, str] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        where = f"notification {json.dumps(item.get('name'))} (id {item.get('id')})"
        try:
            config = json.loads(item.get("config") or "{}")
        except (TypeError, ValueError):
            conversion.note(where, "its config is not JSON; skipped")
            continue
        config = config if isinstance(config, dict) else {}
        kind = str(config.get("type") or "")
        mapped = _channel_config(kind, config)
        if mapped is not None and mapped[0] == "email" and "," in str(mapped[1]["address"]):
            first = str(mapped[1]["address"]).split(",")[0].strip()
            conversion.note(where, f"several addresses; only {first} is kept")
            mapped[1]["address"] = first
        name = conversion.add_channel(
            where,
            str(item.get("name") or kind),
            f"type {kind!r}",
            mapped,
            enabled=item.get("active") not in (False, 0),
        )
        if name is None:
            continue
        names[str(item.get("id"))] = name
    return names


def _status_rule(codes: Any, where: str, conversion: Conversion) -> dict[str, Any]:
    """``expected_status_code`` or ``assertions`` for ``accepted_statuscodes`` (``["200-299"]``
    by default): one code is ``expected_status_code``; one range, or ranges that touch, two
    ``status_code`` assertions; ranges apart keep the first span, with a note."""
    spans: list[tuple[int, int]] = []
    for code in codes if isinstance(codes, list) and codes else ["200-299"]:
        found = _STATUS.match(str(code))
        if found is None:
            conversion.note(where, f"accepted status code {code!r} not understood; ignored")
            continue
        low = int(found.group(1))
        spans.append((low, int(found.group(2) or low)))
    if not spans:
        spans = [(200, 299)]
    spans.sort()
    merged = [spans[0]]
    for low, high in spans[1:]:
        if low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    if len(merged) > 1:
        kept = f"{merged[0][0]}-{merged[0][1]}"
        conversion.note(where, f"accepted status codes {codes} are not one range; kept {kept}")
    low, high = merged[0]
    if low == high:
        return {"expected_status_code": low}
    return {"assertions": status_range_assertions(low, high)}


def _headers(monitor: dict[str, Any], where: str, conversion: Conversion) -> dict[str, str]:
    """The request headers: Kuma's ``headers`` (a JSON object as text) and, for basic
    auth, an ``Authorization`` header (RFC 7617); `Conversion.add_monitor` drops, with a
    note, those the API refuses."""
    headers: dict[str, str] = {}
    raw = monitor.get("headers")
    if isinstance(raw, str) and raw.strip():
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            conversion.note(where, "headers are not a JSON object; not imported")
            parsed = {}
        for key, value in parsed.items():
            headers[str(key)] = value if isinstance(value, str) else json.dumps(value)
    auth = monitor.get("authMethod")
    if auth == "basic" or (not auth and monitor.get("basic_auth_user")):
        pair = f"{monitor.get('basic_auth_user') or ''}:{monitor.get('basic_auth_pass') or ''}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif auth:
        conversion.note(where, f"authentication {auth!r} has no equivalent; not imported")
    return headers


def _http(monitor: dict[str, Any], where: str, conversion: Conversion) -> dict[str, Any]:
    """The http fields of an ``http``, ``keyword`` or ``json-query`` monitor."""
    body: dict[str, Any] = {"url": str(monitor.get("url") or ""), "type": "http"}
    method = str(monitor.get("method") or "GET").upper()
    if method in METHODS:
        if method != "GET":
            body["method"] = method
    else:
        conversion.note(where, f"method {method} is not one Uptrio sends; GET is used")
    rule = _status_rule(monitor.get("accepted_statuscodes"), where, conversion)
    assertions: list[dict[str, Any]] = list(rule.get("assertions", []))
    kind = monitor.get("type")
    if kind == "keyword" and monitor.get("keyword"):
        comparison = "not_contains" if monitor.get("invertKeyword") else "contains"
        assertions.append(
            {"source": "body", "comparison": comparison, "target": monitor["keyword"]}
        )
    if kind == "json-query":
        assertions.extend(_json_query(monitor, where, conversion))
    if assertions:
        if "expected_status_code" in rule:
            code = rule["expected_status_code"]
            assertions.insert(0, {"source": "status_code", "comparison": "equals", "target": code})
        body["assertions"] = assertions
    else:
        body.update(rule)
    headers = _headers(monitor, where, conversion)
    if headers:
        body["request_headers"] = headers
    if isinstance(monitor.get("body"), str) and monitor["body"].strip():
        body["request_body"] = monitor["body"]
    if monitor.get("ignoreTls"):
        body["tls_verify"] = False
    if body["url"].lower().startswith("https:") and monitor.get("expiryNotification") is False:
        body["tls_expiry_days"] = 0
    if monitor.get("maxredirects") == 0:
        conversion.note(where, "maxredirects 0: Uptrio follows up to 10 redirects")
    return body


def _json_query(
    monitor: dict[str, Any], where: str, conversion: Conversion
) -> list[dict[str, Any]]:
    """A ``json_body`` assertion for a JSON query whose expression is a plain path
    (``data.status``, ``items[0].ok``: JSONata and JSONPath agree on those), else a note."""
    expression = str(monitor.get("jsonPath") or "").strip().removeprefix("$.")
    operator = str(monitor.get("jsonPathOperator") or "==")
    comparison = _OPERATORS.get(operator)
    if not _PLAIN_PATH.match(expression) or comparison is None:
        conversion.note(
            where,
            f"JSON query {monitor.get('jsonPath')!r} {operator} {monitor.get('expectedValue')!r} "
            "has no equivalent (only plain paths and ==, !=, <, >, contains); not imported",
        )
        return []
    target: Any = str(monitor.get("expectedValue") or "")
    if comparison in ("less_than", "greater_than"):
        try:
            target = float(target) if "." in target else int(target)
        except ValueError:
            conversion.note(where, f"JSON query target {target!r} is not a number; not imported")
            return []
    return [
        {
            "source": "json_body",
            "property": "$." + expression,
            "comparison": comparison,
            "target": target,
        }
    ]


def _address(monitor: dict[str, Any], where: str, conversion: Conversion) -> dict[str, Any] | None:
    """The ``type`` and ``url`` of a ``port``, ``ping`` or ``dns`` monitor, or None (noted)."""
    host = str(monitor.get("hostname") or "").strip()
    if not host:
        conversion.note(where, "no hostname; skipped")
        return None
    kind = monitor.get("type")
    if kind == "port":
        port = monitor.get("port")
        bracketed = f"[{host}]" if ":" in host else host
        return {"url": f"{bracketed}:{port}", "type": "tcp"}
    if kind == "ping":
        return {"url": host, "type": "ping"}
    record = str(monitor.get("dns_resolve_type") or "A")
    if record not in ("A", "AAAA"):
        conversion.note(where, f"DNS record type {record}: Uptrio resolves A and AAAA only")
    server = monitor.get("dns_resolve_server")
    if server:
        conversion.note(
            where,
            f"DNS server {server}: Uptrio asks the server's own nameserver (--dns-nameserver)",
        )
    return {"url": host, "type": "dns"}


def _monitor(
    monitor: dict[str, Any], channels: dict[str, str], group: str | None, conversion: Conversion
) -> None:
    """Add one Kuma monitor as a monitor or a heartbeat, or note why it is skipped; the
    name of its ``group`` monitor, if any, goes in ``metadata.group``."""
    where = f"monitor {json.dumps(monitor.get('name'))} (id {monitor.get('id')})"
    kind = str(monitor.get("type") or "")
    if kind in HTTP_TYPES:
        body: dict[str, Any] | None = _http(monitor, where, conversion)
    elif kind in ("port", "ping", "dns"):
        body = _address(monitor, where, conversion)
    elif kind == "push":
        body = None
    elif kind == "group":
        conversion.note(where, "group: its monitors carry its name in metadata.group")
        return
    else:
        conversion.note(where, f"type {kind!r} has no equivalent; skipped")
        return
    if kind != "push" and body is None:
        return
    ids = monitor.get("notificationIDList") or {}
    wanted = [str(key) for key, on in ids.items() if on] if isinstance(ids, dict) else []
    for key in wanted:
        if key not in channels:
            conversion.note(where, f"notification id {key} was not imported; not told")
    policy = conversion.policy_for([channels[k] for k in wanted if k in channels], where)
    interval = _number(monitor.get("interval"), 60)
    retries = int(_number(monitor.get("maxretries"), 0))
    retry_interval = _number(monitor.get("retryInterval"), interval)
    if monitor.get("upsideDown"):
        conversion.note(where, "upside-down mode has no equivalent; imported as a normal check")
    if monitor.get("proxyId"):
        conversion.note(where, f"proxy {monitor['proxyId']} has no equivalent; checked directly")
    if monitor.get("active") in (False, 0):
        conversion.note(where, "paused in Uptime Kuma; imported active (pause it after apply)")
    if kind == "push":
        name = conversion.unique_name("heartbeats", str(monitor.get("name") or ""), where)
        grace = clamp(round(retries * retry_interval), 0, 86_400)
        beat: dict[str, Any] = {
            "name": name,
            "period_seconds": clamp(round(interval), 30, 2_592_000),
            "grace_seconds": grace,
        }
        if beat["period_seconds"] != interval:
            conversion.note(
                where, f"interval {interval:g} s imported as {beat['period_seconds']} s"
            )
        conversion.note(where, "push token not kept: the job must call the heartbeat's ping_url")
        if policy:
            beat["escalation_policy"] = policy
        if group:
            beat["metadata"] = {"group": group}
        conversion.add("heartbeats", beat)
        return
    assert body is not None
    if retries and retry_interval != interval:
        conversion.note(where, f"retry interval {retry_interval:g} s: retries use the interval")
    threshold = clamp(retries + 1, 1, MAX_THRESHOLD)
    if threshold != retries + 1:
        conversion.note(where, f"{retries} retries imported as failure_threshold {threshold}")
    timeout = monitor.get("timeout")
    out: dict[str, Any] = {
        "name": conversion.unique_name("monitors", str(monitor.get("name") or ""), where),
        **body,
        **timing(interval, _number(timeout, 0) or None, conversion, where),
        "failure_threshold": threshold,
    }
    if policy:
        out["escalation_policy"] = policy
    metadata = {"description": str(monitor.get("description") or "")[:500], "group": group}
    if any(metadata.values()):
        out["metadata"] = {key: value for key, value in metadata.items() if value}
    conversion.add_monitor(out, where)


def _number(value: Any, default: float) -> float:
    """``value`` as a finite number (Kuma stores some as text), else ``default``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


def convert_kuma(text: str) -> Conversion:
    """Convert an Uptime Kuma JSON backup (the text of the file).

    Raises:
        InvalidImport: not JSON, not an object, or no ``monitorList`` list.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidImport(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("monitorList"), list):
        raise InvalidImport(
            'not an Uptime Kuma backup: expected an object with a "monitorList" array '
            "(Settings → Backup → Export in Uptime Kuma 1.x)"
        )
    conversion = Conversion("uptime-kuma")
    notifications = data.get("notificationList") or []
    channels = _channels(notifications if isinstance(notifications, list) else [], conversion)
    groups = {
        str(m.get("id")): str(m.get("name") or "")[:500]
        for m in data["monitorList"]
        if isinstance(m, dict) and m.get("type") == "group"
    }
    for monitor in data["monitorList"]:
        if isinstance(monitor, dict):
            _monitor(monitor, channels, groups.get(str(monitor.get("parent"))), conversion)
        else:
            conversion.note("monitorList", f"an entry that is not an object: {monitor!r:.60}")
    return conversion
