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
from ._gatus_conditions import condition, duration_seconds, status_field

__all__ = ["convert_gatus"]


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
    seconds = duration_seconds(item.get("interval", "60s"))
    if seconds is None:
        conversion.note(
            _at(_line(item, "interval")), f"interval {item.get('interval')!r}: 60 s used"
        )
        seconds = 60
    client = _mapping(item.get("client"))
    timeout = duration_seconds(client.get("timeout", "10s")) or 10
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
        condition(str(text), kind, _at(line), body, conversion)
    status_field(body)
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


def _heartbeat(
    item: dict[str, Any], channels: dict[str, str], defaults: dict[str, Any], conversion: Conversion
) -> None:
    """Add one Gatus external endpoint with a ``heartbeat.interval`` as a heartbeat."""
    start = _at(_line(item, "name"))
    beat = _mapping(item.get("heartbeat"))
    seconds = duration_seconds(beat.get("interval", ""))
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
