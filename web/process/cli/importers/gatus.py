"""A Gatus ``config.yaml`` converted to the apply format (docs/import.md, "Gatus").

What maps:

* ``alerting`` providers Uptrio has (``slack``, ``discord``, ``teams``,
  ``teams-workflows``, ``telegram``, ``pagerduty``, ``opsgenie``, ``ntfy``, ``email``,
  ``custom``) → notification channels named after the provider; an endpoint's ``alerts``
  → an escalation policy telling those channels, and the largest ``failure-threshold``
  and ``success-threshold`` of its alerts → the monitor's thresholds;
* ``endpoints``: ``http(s)://`` → http (``method``, ``body``, ``headers``,
  ``client.insecure``, ``client.timeout``), ``tcp://host:port`` → tcp, ``icmp://host`` →
  ping, a ``dns:`` block with an A or AAAA ``query-type`` → dns of its ``query-name``;
  ``interval`` (a Go duration, ``30s``, ``5m``, ``1h``; default 60 s);
* conditions: ``[STATUS]`` (``==`` alone → ``expected_status_code``, else
  ``status_code`` assertions), ``[RESPONSE_TIME]`` → ``response_time_ms``, ``[BODY]`` →
  ``body`` (``== pat(*text*)`` → contains), ``[BODY].path`` → ``json_body`` ``$.path``,
  ``has([BODY].path) == true`` → ``is_not_empty``, ``[CERTIFICATE_EXPIRATION] > 48h`` →
  ``tls_expiry_days``; ``[CONNECTED] == true`` and ``[DNS_RCODE] == NOERROR`` are what a
  tcp, ping or dns check checks anyway;
* ``external-endpoints`` with a ``heartbeat.interval`` → heartbeats.

Everything else is a note naming the line of the file it came from.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ._document import (
    MAX_THRESHOLD,
    METHODS,
    Conversion,
    InvalidImport,
    clamp,
    timing,
)

__all__ = ["convert_gatus"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
_CONDITION = re.compile(r"^\s*(.+?)\s*(==|!=|<=|>=|<|>)\s*(.*?)\s*$")
_JSON_PATH = re.compile(r"^\[BODY\]((?:\.[A-Za-z_][\w-]*|\[\d+\])+)$")
_HAS = re.compile(r"^has\((\[BODY\](?:\.[A-Za-z_][\w-]*|\[\d+\])+)\)$")
_COMPARISONS = {"==": "equals", "!=": "not_equals", "<": "less_than", ">": "greater_than"}
_INCLUSIVE = {"<=": ("less_than", 1), ">=": ("greater_than", -1)}
"""``<=`` and ``>=`` on integers as ``less_than n+1`` and ``greater_than n-1``."""


class _Lines(yaml.SafeLoader):
    """A safe loader whose mappings and sequences remember their lines (1-based):
    :class:`_Map` ``.line`` and ``.lines`` (per key), :class:`_Seq` ``.lines`` (per item)."""


class _Map(dict[str, Any]):
    line: int = 0
    lines: dict[str, int]


class _Seq(list[Any]):
    lines: list[int]


def _construct_map(loader: _Lines, node: yaml.MappingNode) -> _Map:
    out = _Map({str(k): v for k, v in loader.construct_mapping(node, deep=True).items()})
    out.line = node.start_mark.line + 1
    out.lines = {str(key.value): key.start_mark.line + 1 for key, _ in node.value}
    return out


def _construct_seq(loader: _Lines, node: yaml.SequenceNode) -> _Seq:
    out = _Seq(loader.construct_sequence(node, deep=True))
    out.lines = [item.start_mark.line + 1 for item in node.value]
    return out


_Lines.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_map)
_Lines.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_seq)


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if isinstance(value, dict) else {}


def _at(line: int) -> str:
    """Where a note comes from: ``line N`` of the file."""
    return f"line {line}"


def _line(mapping: Any, key: str) -> int:
    """The line of ``key`` in ``mapping``, else of the mapping, else 0."""
    if isinstance(mapping, _Map):
        return mapping.lines.get(key, mapping.line)
    return 0


def _seconds(value: Any) -> float | None:
    """A Go duration (``90s``, ``5m``, ``1h30m``, ``500ms``) in seconds, or None."""
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def _channel(provider: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """Uptrio's channel type and config for a Gatus ``alerting.<provider>`` block (field
    names of Gatus's README, "Alerting"), or None when Uptrio has no such type."""
    match provider:
        case "slack" | "discord" | "teams" | "teams-workflows":
            kind = "teams" if provider.startswith("teams") else provider
            return kind, {"webhook_url": config.get("webhook-url")}
        case "telegram":
            return "telegram", {"bot_token": config.get("token"), "chat_id": config.get("id")}
        case "pagerduty":
            return "pagerduty", {"routing_key": config.get("integration-key")}
        case "opsgenie":
            region = "eu" if "eu.opsgenie" in str(config.get("api-url", "")) else "us"
            return "opsgenie", {"api_key": config.get("api-key"), "region": region}
        case "ntfy":
            base = str(config.get("url") or "https://ntfy.sh").rstrip("/")
            out = {"topic_url": f"{base}/{config.get('topic') or ''}"}
            if config.get("token"):
                out["access_token"] = config["token"]
            return "ntfy", out
        case "email":
            return "email", {"address": str(config.get("to") or "").split(",")[0].strip()}
        case "custom":
            return "webhook", {"url": config.get("url")}
    return None


def _channels(alerting: Any, conversion: Conversion) -> dict[str, str]:
    """Add the alerting providers Uptrio can send as channels; provider → channel name."""
    names: dict[str, str] = {}
    if not isinstance(alerting, dict):
        return names
    for provider, config in alerting.items():
        where = _at(_line(alerting, provider))
        config = _mapping(config)
        if provider == "custom" and config.get("body"):
            conversion.note(where, "custom alert body not kept: Uptrio sends the alert object")
        if config.get("overrides"):
            conversion.note(_at(_line(config, "overrides")), "per-group overrides not imported")
        what = f"alerting provider {provider!r}"
        name = conversion.add_channel(where, provider, what, _channel(provider, config))
        if name is None:
            continue
        names[provider] = name
    return names


def _target(text: str, numeric: bool) -> Any:
    """A condition's right side: a number when ``numeric`` (or when it reads as one),
    else the text, quotes removed."""
    text = text.strip().strip('"')
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        if numeric:
            raise
        return text


def _assertion(source: str, prop: str | None, op: str, value: str) -> dict[str, Any]:
    """One assertion for ``<source> <op> <value>``.

    Raises:
        ValueError: an operator or target the assertion cannot take.
    """
    out: dict[str, Any] = {"source": source}
    if prop is not None:
        out["property"] = prop
    numeric = op not in ("==", "!=") or source in ("status_code", "response_time_ms")
    target = _target(value, numeric)
    if op in _INCLUSIVE:
        comparison, step = _INCLUSIVE[op]
        if not isinstance(target, int):
            raise ValueError(op)
        return {**out, "comparison": comparison, "target": target + step}
    return {**out, "comparison": _COMPARISONS[op], "target": target}


def _condition(
    text: str, kind: str, where: str, body: dict[str, Any], conversion: Conversion
) -> None:
    """Map one condition into ``body`` (its ``assertions``, ``tls_expiry_days`` or
    ``expected_status_code``), or note it."""
    found = _CONDITION.match(text)
    if found is None:
        conversion.note(where, f"condition {text!r} not understood; skipped")
        return
    left, op, right = found.groups()
    assertions = body.setdefault("assertions", [])
    try:
        if right.startswith("["):
            raise ValueError(right)  # a placeholder on the right ([CONTEXT], [STATUS])
        if left == "[CONNECTED]" and op == "==" and right == "true" and kind in ("tcp", "ping"):
            return
        if left == "[DNS_RCODE]" and op == "==" and right == "NOERROR" and kind == "dns":
            return
        if kind != "http":
            raise ValueError(left)
        if left == "[STATUS]" and "(" not in right:
            assertions.append(_assertion("status_code", None, op, right))
        elif left == "[RESPONSE_TIME]":
            assertions.append(_assertion("response_time_ms", None, op, right))
        elif left == "[CERTIFICATE_EXPIRATION]" and op in (">", ">="):
            seconds = _seconds(right)
            if seconds is None:
                raise ValueError(right)
            body["tls_expiry_days"] = clamp(-(-int(seconds) // 86_400), 0, 365)
        elif left == "[BODY]" and right.startswith("pat(") and op in ("==", "!="):
            inner = right[4:-1] if right.endswith(")") else ""
            if not (inner.startswith("*") and inner.endswith("*")) or "*" in inner[1:-1]:
                raise ValueError(right)
            comparison = "contains" if op == "==" else "not_contains"
            assertions.append({"source": "body", "comparison": comparison, "target": inner[1:-1]})
        elif left == "[BODY]" and "(" not in right:
            assertions.append(_assertion("body", None, op, right))
        elif (path := _JSON_PATH.match(left)) and "(" not in right:
            assertions.append(_assertion("json_body", "$" + path.group(1), op, right))
        elif (has := _HAS.match(left)) and op == "==" and right in ("true", "false"):
            comparison = "is_not_empty" if right == "true" else "is_empty"
            prop = "$" + has.group(1).removeprefix("[BODY]")
            assertions.append({"source": "json_body", "property": prop, "comparison": comparison})
        else:
            raise ValueError(left)
    except (ValueError, KeyError):
        conversion.note(where, f"condition {text!r} has no equivalent; skipped")


def _address(endpoint: dict[str, Any], where: str, conversion: Conversion) -> dict[str, Any] | None:
    """The monitor ``type`` and ``url`` of an endpoint, or None (noted)."""
    url = str(endpoint.get("url") or "").strip()
    dns = endpoint.get("dns")
    if isinstance(dns, dict):
        record = str(dns.get("query-type") or "A").upper()
        if record not in ("A", "AAAA"):
            conversion.note(where, f"DNS query type {record}: Uptrio resolves A and AAAA only")
            return None
        conversion.note(
            where, f"DNS server {url}: Uptrio asks the server's own nameserver (--dns-nameserver)"
        )
        return {"url": str(dns.get("query-name") or "").rstrip("."), "type": "dns"}
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("http", "https"):
        return {"url": url, "type": "http"}
    if scheme == "tcp":
        return {"url": url, "type": "tcp"}
    if scheme == "icmp":
        return {"url": url.split("://", 1)[1], "type": "ping"}
    what = "grpc" if endpoint.get("grpc") else (scheme or url)
    conversion.note(where, f"endpoint {url!r} ({what}) has no equivalent monitor type; skipped")
    return None


def _alerts(
    item: dict[str, Any], channels: dict[str, str], defaults: dict[str, Any], conversion: Conversion
) -> tuple[list[str], dict[str, int]]:
    """The channel names an endpoint's ``alerts`` tell, and the thresholds their largest
    ``failure-threshold`` (Gatus's default 3) and ``success-threshold`` (default 2) give."""
    names: list[str] = []
    thresholds: dict[str, int] = {}
    alerts = item.get("alerts") or []
    for index, alert in enumerate(alerts if isinstance(alerts, list) else []):
        if not isinstance(alert, dict):
            continue
        line = alerts.lines[index] if isinstance(alerts, _Seq) else 0
        provider = str(alert.get("type"))
        default = defaults.get(provider) or {}
        merged = {**(default if isinstance(default, dict) else {}), **alert}
        if merged.get("enabled") is False:
            continue
        if provider not in channels:
            conversion.note(_at(line), f"alert of type {provider!r}: no such channel; not told")
            continue
        names.append(channels[provider])
        for key, field, fallback in (
            ("failure-threshold", "failure_threshold", 3),
            ("success-threshold", "success_threshold", 2),
        ):
            value = merged.get(key, fallback)
            if isinstance(value, int):
                wanted = clamp(value, 1, MAX_THRESHOLD)
                if wanted != value:
                    conversion.note(_at(line), f"{key} {value} imported as {wanted}")
                thresholds[field] = max(thresholds.get(field, 1), wanted)
    return names, thresholds


def _endpoint(
    item: dict[str, Any], channels: dict[str, str], defaults: dict[str, Any], conversion: Conversion
) -> None:
    """Add one Gatus endpoint as a monitor, or note why it is skipped."""
    start = _at(_line(item, "name"))
    if item.get("enabled") is False:
        conversion.note(start, "disabled endpoint; skipped")
        return
    address = _address(item, start, conversion)
    if address is None:
        return
    kind = address["type"]
    seconds = _seconds(item.get("interval", "60s"))
    if seconds is None:
        conversion.note(
            _at(_line(item, "interval")), f"interval {item.get('interval')!r}: 60 s used"
        )
        seconds = 60
    client = _mapping(item.get("client"))
    timeout = _seconds(client.get("timeout", "10s")) or 10
    group = item.get("group")
    name = str(item.get("name") or "")
    body: dict[str, Any] = {
        "name": conversion.unique_name(
            "monitors", f"{group}/{name}" if group and _taken(conversion, name) else name, start
        ),
        **address,
        **timing(seconds, timeout, conversion, start),
    }
    if kind == "http":
        _http_fields(item, client, body, conversion)
    conditions = item.get("conditions") or []
    for index, text in enumerate(conditions if isinstance(conditions, list) else []):
        line = conditions.lines[index] if isinstance(conditions, _Seq) else 0
        _condition(str(text), kind, _at(line), body, conversion)
    _status_field(body)
    names, thresholds = _alerts(item, channels, defaults, conversion)
    body.update(thresholds)
    policy = conversion.policy_for(names, start)
    if policy:
        body["escalation_policy"] = policy
    if group:
        body["metadata"] = {"group": str(group)[:500]}
    conversion.add_monitor(body, start)


def _taken(conversion: Conversion, name: str) -> bool:
    return any(m["name"] == name for m in conversion.resources["monitors"])


def _http_fields(
    item: dict[str, Any], client: dict[str, Any], body: dict[str, Any], conversion: Conversion
) -> None:
    """``method``, ``request_body``, ``request_headers``, ``tls_verify`` of an http endpoint."""
    method = str(item.get("method") or "GET").upper()
    if method not in METHODS:
        conversion.note(_at(_line(item, "method")), f"method {method} is not one Uptrio sends; GET")
    elif method != "GET":
        body["method"] = method
    if isinstance(item.get("body"), str) and item["body"]:
        body["request_body"] = item["body"]
    headers = item.get("headers")
    if isinstance(headers, dict) and headers:
        body["request_headers"] = {str(k): str(v) for k, v in headers.items()}
    if client.get("insecure"):
        body["tls_verify"] = False
    extra = sorted(set(client) - {"insecure", "timeout"})
    if extra:
        conversion.note(
            _at(_line(item, "client")), f"client settings {', '.join(extra)} have no equivalent"
        )
    if item.get("graphql"):
        conversion.note(_at(_line(item, "graphql")), "graphql: the body is sent as it is")


def _status_field(body: dict[str, Any]) -> None:
    """A lone ``status_code equals N`` becomes ``expected_status_code: N`` (the plain form);
    no assertions at all leaves none."""
    assertions = body.pop("assertions", [])
    if (
        len(assertions) == 1
        and assertions[0]["source"] == "status_code"
        and assertions[0]["comparison"] == "equals"
        and isinstance(assertions[0]["target"], int)
    ):
        body["expected_status_code"] = assertions[0]["target"]
    elif assertions:
        body["assertions"] = assertions


def _heartbeat(
    item: dict[str, Any], channels: dict[str, str], defaults: dict[str, Any], conversion: Conversion
) -> None:
    """Add one Gatus external endpoint with a ``heartbeat.interval`` as a heartbeat."""
    start = _at(_line(item, "name"))
    beat = _mapping(item.get("heartbeat"))
    seconds = _seconds(beat.get("interval", ""))
    if seconds is None:
        conversion.note(
            start, "external endpoint without heartbeat.interval: no equivalent; skipped"
        )
        return
    period = clamp(round(seconds), 30, 2_592_000)
    if period != seconds:
        conversion.note(start, f"heartbeat interval {seconds:g} s imported as {period} s")
    out: dict[str, Any] = {
        "name": conversion.unique_name("heartbeats", str(item.get("name") or ""), start),
        "period_seconds": period,
    }
    conversion.note(start, "token not kept: the job must call the heartbeat's ping_url")
    names, _ = _alerts(item, channels, defaults, conversion)
    policy = conversion.policy_for(names, start)
    if policy:
        out["escalation_policy"] = policy
    if item.get("group"):
        out["metadata"] = {"group": str(item["group"])[:500]}
    conversion.add("heartbeats", out)


def convert_gatus(text: str) -> Conversion:
    """Convert a Gatus configuration (the text of ``config.yaml``).

    Raises:
        InvalidImport: not YAML (the message names the line), not a mapping, or neither
            ``endpoints`` nor ``external-endpoints`` is a list.
    """
    try:
        data = yaml.load(text, Loader=_Lines)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InvalidImport(f"not YAML{where}: {problem}") from None
    if not isinstance(data, dict) or not (
        isinstance(data.get("endpoints"), list) or isinstance(data.get("external-endpoints"), list)
    ):
        raise InvalidImport(
            'not a Gatus configuration: expected a mapping with an "endpoints" list'
        )
    conversion = Conversion("gatus")
    alerting = data.get("alerting") or {}
    channels = _channels(alerting, conversion)
    defaults = {
        provider: config.get("default-alert")
        for provider, config in (alerting.items() if isinstance(alerting, dict) else [])
        if isinstance(config, dict)
    }
    for item in data.get("endpoints") or []:
        if isinstance(item, dict):
            _endpoint(item, channels, defaults, conversion)
    for item in data.get("external-endpoints") or []:
        if isinstance(item, dict):
            _heartbeat(item, channels, defaults, conversion)
    for key in data:
        if key not in ("endpoints", "external-endpoints", "alerting"):
            conversion.note(_at(_line(data, key)), f"top-level {key!r} not imported")
    return conversion
