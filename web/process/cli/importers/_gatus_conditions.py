"""Gatus conditions (``[STATUS] == 200``, ``[BODY].status == UP``, ...) as Uptrio
assertions, and Go durations as seconds (docs/import.md, "Gatus"; Gatus's README,
"Conditions").
"""

from __future__ import annotations

import re
from typing import Any

from ._document import Conversion, clamp

__all__ = ["condition", "duration_seconds", "status_field"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
_CONDITION = re.compile(r"^\s*(.+?)\s*(==|!=|<=|>=|<|>)\s*(.*?)\s*$")
_JSON_PATH = re.compile(r"^\[BODY\]((?:\.[A-Za-z_][\w-]*|\[\d+\])+)$")
_HAS = re.compile(r"^has\((\[BODY\](?:\.[A-Za-z_][\w-]*|\[\d+\])+)\)$")
_COMPARISONS = {"==": "equals", "!=": "not_equals", "<": "less_than", ">": "greater_than"}
_INCLUSIVE = {"<=": ("less_than", 1), ">=": ("greater_than", -1)}
"""``<=`` and ``>=`` on integers as ``less_than n+1`` and ``greater_than n-1``."""


def duration_seconds(value: Any) -> float | None:
    """A Go duration (``90s``, ``5m``, ``1h30m``, ``500ms``) in seconds, or None."""
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


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


def condition(
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
            seconds = duration_seconds(right)
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


def status_field(body: dict[str, Any]) -> None:
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
