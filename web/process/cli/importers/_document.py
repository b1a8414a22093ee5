"""The apply document an importer builds (docs/import.md, "The apply format"), the
notes on what it could not map, and the rules both importers share (docs/import.md).

Limits applied here are the API's create rules (web.api.monitors, web.api.heartbeats,
web.api.escalation_policies; docs/api.md, "Conventions and decisions"): names 1 to 200
characters (100 for channels and policies), ``interval_seconds`` 1 to 86,400,
``timeout_seconds`` 1 to 60 and not above the interval, thresholds 1 to 10, a policy step
at most 10 targets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml

from engine import (
    MAX_ASSERTIONS,
    MAX_REQUEST_BODY_CHARS,
    MAX_REQUEST_HEADERS,
    InvalidAssertion,
    InvalidRequestHeaders,
    InvalidTarget,
    check_assertions,
    check_request_headers,
    parse_target,
)

__all__ = ["Conversion", "InvalidImport", "Note", "dump_yaml"]

T = TypeVar("T")

MAX_NAME = 200
MAX_CHANNEL_NAME = 100
MAX_STEP_TARGETS = 10
MAX_INTERVAL_SECONDS = 86_400
MAX_TIMEOUT_SECONDS = 60
DEFAULT_TIMEOUT_SECONDS = 30
MAX_THRESHOLD = 10
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""The http methods a monitor sends (web.api.monitors, ``HttpMethod``)."""
KINDS = ("notification_channels", "escalation_policies", "monitors", "heartbeats")
"""The apply format's keys an importer fills, in the order they are printed (what a
resource refers to comes before it)."""


class InvalidImport(Exception):
    """The input is not a document of the tool (not JSON or YAML, not an object, no
    monitor or endpoint list): ``uptrio import`` exits with status 2 and this message."""


@dataclass(frozen=True, slots=True)
class Note:
    """One thing an importer could not map: ``where`` it came from (Kuma: ``monitor
    "API" (id 3)``; Gatus: ``line 14``) and what happened to it."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(slots=True)
class Conversion:
    """An apply document being built, and its notes.

    ``resources`` maps each of :data:`KINDS` to its list of create bodies; names are made
    unique per kind (:meth:`unique_name`), as the apply format requires.
    """

    source: str
    """The tool's name, stored in every resource's ``metadata.imported_from``."""
    resources: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {kind: [] for kind in KINDS}
    )
    notes: list[Note] = field(default_factory=list)
    _policies: dict[tuple[str, ...], str] = field(default_factory=dict)

    def note(self, where: str, message: str) -> None:
        """Record one thing that could not be mapped."""
        self.notes.append(Note(where, message))

    def unique_name(self, kind: str, name: str, where: str, *, limit: int = MAX_NAME) -> str:
        """``name`` cut to ``limit`` characters and made unique among ``kind``'s names
        (``"name (2)"``, ``"name (3)"``...), with a note when it changed."""
        base = (name.strip() or "unnamed")[:limit]
        taken = {item["name"] for item in self.resources[kind]}
        candidate, n = base, 1
        while candidate in taken:
            n += 1
            suffix = f" ({n})"
            candidate = base[: limit - len(suffix)] + suffix
        if candidate != name:
            self.note(where, f"name {name!r} imported as {candidate!r} (names are unique per kind)")
        return candidate

    def add(self, kind: str, body: dict[str, Any]) -> None:
        """Append a create body of ``kind``, marking it ``metadata.imported_from``."""
        body.setdefault("metadata", {})["imported_from"] = self.source
        self.resources[kind].append(body)

    def add_channel(
        self,
        where: str,
        name: str,
        what: str,
        mapped: tuple[str, dict[str, Any]] | None,
        *,
        enabled: bool = True,
    ) -> str | None:
        """Add a notification channel of ``mapped`` (Uptrio's type and config; None: the
        tool's ``what`` has no Uptrio type) named ``name``; its name, or None with a note
        when it has no type or a required value is missing (an ntfy topic included)."""
        if mapped is None:
            self.note(where, f"{what} has no Uptrio channel type; skipped")
            return None
        kind, config = mapped
        missing = [key for key, value in config.items() if not value or value == "/"]
        if missing or str(config.get("topic_url", "")).endswith("/"):
            self.note(where, f"{what}: no {', '.join(missing) or 'topic'} in its config; skipped")
            return None
        unique = self.unique_name("notification_channels", name, where, limit=MAX_CHANNEL_NAME)
        body: dict[str, Any] = {"name": unique, "type": kind, "config": config}
        if not enabled:
            body["enabled"] = False
        self.add("notification_channels", body)
        return unique

    def add_monitor(self, body: dict[str, Any], where: str) -> None:
        """Add a monitor's create body; one without a ``url``, or whose ``url`` does not
        fit its ``type`` (``engine.parse_target``, the API's own check), is skipped; an http
        monitor's ``request_headers``, ``request_body`` and ``assertions`` keep only what
        the API accepts, by the engine's own rules (``engine.check_request_headers``,
        ``engine.check_assertions``; docs/checks.md, "Assertions and TLS expiry"), each
        thing left out noted."""
        if not body.get("url"):
            self.note(where, "no address to check; skipped")
            return
        try:
            parse_target(body["type"], body["url"])
        except InvalidTarget as exc:
            self.note(where, f"{body['type']} url {body['url']!r}: {exc}; skipped")
            return
        headers = self._kept(
            where,
            list((body.pop("request_headers", None) or {}).items()),
            lambda kept, pair: check_request_headers(dict([*kept, pair])),
            MAX_REQUEST_HEADERS,
            "header",
        )
        if headers:
            body["request_headers"] = dict(headers)
        if len(body.get("request_body") or "") > MAX_REQUEST_BODY_CHARS:
            self.note(where, f"request body over {MAX_REQUEST_BODY_CHARS} characters; not imported")
            del body["request_body"]
        assertions = self._kept(
            where,
            body.pop("assertions", None) or [],
            lambda kept, assertion: check_assertions([assertion]),
            MAX_ASSERTIONS,
            "assertion",
        )
        if assertions:
            body["assertions"] = assertions
        self.add("monitors", body)

    def _kept(
        self,
        where: str,
        items: list[T],
        check: Callable[[list[T], T], object],
        limit: int,
        what: str,
    ) -> list[T]:
        """The first ``limit`` of ``items`` that ``check`` (given those kept before)
        accepts; each one left out is a note with the engine's reason."""
        kept: list[T] = []
        for item in items:
            if len(kept) == limit:
                self.note(where, f"more than {limit} of them; {what} {item} not imported")
                continue
            try:
                check(kept, item)
            except (InvalidRequestHeaders, InvalidAssertion) as exc:
                reason = exc.message.removeprefix("assertions[0]: ")
                self.note(where, f"{reason}; {what} not imported")
                continue
            kept.append(item)
        return kept

    def policy_for(self, channels: list[str], where: str) -> str | None:
        """The name of an escalation policy telling ``channels`` (channel names) at once,
        created on first use: one policy per distinct set of channels, named after them.
        None for no channel. More than 10 channels are cut to 10 (one step's limit), with
        a note."""
        unique = tuple(sorted(set(channels)))
        if not unique:
            return None
        if len(unique) > MAX_STEP_TARGETS:
            self.note(where, f"{len(unique)} channels; the first {MAX_STEP_TARGETS} are kept")
            unique = unique[:MAX_STEP_TARGETS]
        if unique not in self._policies:
            wanted = "notify " + ", ".join(unique)
            if len(wanted) > MAX_CHANNEL_NAME:
                wanted = f"notify {len(unique)} channels"
            name = self.unique_name("escalation_policies", wanted, where, limit=MAX_CHANNEL_NAME)
            self.add(
                "escalation_policies",
                {
                    "name": name,
                    "steps": [{"delay_seconds": 0, "targets": [{"channel": c} for c in unique]}],
                },
            )
            self._policies[unique] = name
        return self._policies[unique]

    def document(self) -> dict[str, list[dict[str, Any]]]:
        """The apply document: the kinds that have resources, in :data:`KINDS` order,
        without the policies of monitors that were skipped after all."""
        used = {
            item.get("escalation_policy")
            for kind in ("monitors", "heartbeats")
            for item in self.resources[kind]
        }
        kept = dict(self.resources)
        kept["escalation_policies"] = [p for p in kept["escalation_policies"] if p["name"] in used]
        return {kind: items for kind, items in kept.items() if items}


def dump_yaml(document: dict[str, Any]) -> str:
    """``document`` as YAML (block style, keys in the order built, Unicode kept)."""
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, default_flow_style=False)


def clamp(value: int, low: int, high: int) -> int:
    """``value`` within ``[low, high]``."""
    return max(low, min(high, value))


def timing(
    interval: float, timeout: float | None, conversion: Conversion, where: str
) -> dict[str, int]:
    """``interval_seconds`` and ``timeout_seconds`` from another tool's seconds, rounded
    and brought within the API's bounds (the timeout at most 60 and at most the
    interval; without a timeout, the API's default 30 s, or the interval when shorter),
    with a note when either had to change."""
    interval_s = clamp(round(interval), 1, MAX_INTERVAL_SECONDS)
    if interval_s != interval:
        conversion.note(where, f"interval {interval:g} s imported as {interval_s} s")
    body = {"interval_seconds": interval_s}
    if timeout is None and interval_s < DEFAULT_TIMEOUT_SECONDS:
        body["timeout_seconds"] = interval_s  # the default 30 s may not exceed the interval
    elif timeout is not None:
        timeout_s = clamp(round(timeout), 1, min(MAX_TIMEOUT_SECONDS, interval_s))
        if abs(timeout_s - timeout) >= 1:
            conversion.note(where, f"timeout {timeout:g} s imported as {timeout_s} s")
        body["timeout_seconds"] = timeout_s
    return body


def status_range_assertions(low: int, high: int) -> list[dict[str, Any]]:
    """Assertions holding for a status code in ``[low, high]`` (docs/checks.md,
    "Assertions and TLS expiry": ``status_code`` compares numbers)."""
    return [
        {"source": "status_code", "comparison": "greater_than", "target": low - 1},
        {"source": "status_code", "comparison": "less_than", "target": high + 1},
    ]
