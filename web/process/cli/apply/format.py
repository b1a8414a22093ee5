"""The apply format (docs/apply.md, "Files"): its kinds, the
references between them, and its JSON Schema.

A file of the format is a YAML mapping whose top-level keys are kinds (:data:`KINDS`), each
a list of objects with the API's create fields (the pydantic create models of ``web.api``),
except that a reference names the other resource by its ``name`` instead of its id
(:class:`Reference`). The JSON Schema (``uptrio-apply.schema.json``, shipped in this
package) is generated from those models by :func:`build_schema` (run ``python -m
web.process.cli.apply.format`` to write it again after a create model changes; a test holds
the shipped file to the generated one).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ....api.escalation_policies import PolicyCreate, TargetIn
from ....api.heartbeats import HeartbeatCreate
from ....api.maintenance_windows import WindowCreate
from ....api.members import MemberCreate
from ....api.monitors import MonitorCreate
from ....api.notification_channels import ChannelCreate
from ....api.schedules import LayerIn, ScheduleCreate
from ....api.status_pages import ComponentIn, StatusPageCreate

__all__ = [
    "KINDS",
    "MANAGED_BY",
    "NAME_FIELDS",
    "SCHEMA_FILE",
    "TARGET_PATHS",
    "Kind",
    "Reference",
    "build_schema",
    "kind_named",
    "load_schema",
]

MANAGED_BY = "uptrio-apply"
"""The value of ``metadata.managed_by`` on the resources ``uptrio apply`` creates; only those
are ever deleted by ``--prune`` (docs/apply.md)."""

SCHEMA_FILE = "uptrio-apply.schema.json"
"""The JSON Schema's file name in this package."""


@dataclass(frozen=True)
class Reference:
    """A field of a kind that names another resource: ``field`` on the object (or, with
    ``item``, the key ``item`` of each element of the list ``field``, a list of names with
    ``item_many``), ``many`` when the field is a list of names, ``target``: the API path of
    the resource named (``also``: a second one, tried when the first has no such name)."""

    field: str
    target: str
    many: bool = False
    item: str | None = None
    item_many: bool = False
    also: str | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        """Where a name is looked for: ``target``, then ``also`` (a window's ``monitors``
        name monitors, else heartbeats)."""
        return (self.target,) if self.also is None else (self.target, self.also)

    def names(self, value: Any) -> list[Any]:
        """The names ``value`` (the field's value in a file) holds."""
        if self.item is None:
            return list(value) if self.many else [value]
        held = [element.get(self.item) for element in value]
        if self.item_many:
            return [name for names in held for name in names or []]
        return held


TARGET_PATHS = {"member": "/members", "schedule": "/schedules", "channel": "/notification-channels"}
"""The API path of each type of an escalation step's target. A file writes a target as
``{channel: ops hook}`` (one key, the type, naming the resource); the API as ``{"type":
"channel", "id": "nch_..."}`` (docs/apply.md, "Files")."""

STEPS = "steps"
"""The field of an escalation policy whose steps' ``targets`` name members, schedules and
channels (:data:`TARGET_PATHS`)."""


@dataclass(frozen=True)
class Kind:
    """One top-level key of the format: ``key`` (``monitors``), ``singular`` (what the
    output lines call it: ``monitor``), the API ``path`` (``/monitors``), the ``model`` of
    its create body, its ``references``, and the field that names it (``name``; a
    maintenance window's ``title``)."""

    key: str
    singular: str
    path: str
    model: type[BaseModel]
    references: tuple[Reference, ...] = ()
    name_field: str = "name"

    def defaults(self) -> dict[str, Any]:
        """The create model's defaults by field (fields with none are left out)."""
        out: dict[str, Any] = {}
        for name, info in self.model.model_fields.items():
            if info.is_required():
                continue
            out[name] = info.get_default(call_default_factory=True)
        return out


_POLICY = Reference("escalation_policy", "/escalation-policies")

KINDS: tuple[Kind, ...] = (
    Kind("notification_channels", "notification_channel", "/notification-channels", ChannelCreate),
    Kind(
        "members",
        "member",
        "/members",
        MemberCreate,
        (Reference("contact_channels", "/notification-channels", many=True),),
    ),
    Kind(
        "schedules",
        "schedule",
        "/schedules",
        ScheduleCreate,
        (Reference("layers", "/members", many=True, item="members", item_many=True),),
    ),
    Kind("escalation_policies", "escalation_policy", "/escalation-policies", PolicyCreate),
    Kind(
        "monitors",
        "monitor",
        "/monitors",
        MonitorCreate,
        (_POLICY, Reference("depends_on", "/monitors", many=True)),
    ),
    Kind("heartbeats", "heartbeat", "/heartbeats", HeartbeatCreate, (_POLICY,)),
    Kind(
        "status_pages",
        "status_page",
        "/status-pages",
        StatusPageCreate,
        (Reference("components", "/monitors", many=True, item="monitor"),),
    ),
    Kind(
        "maintenance_windows",
        "maintenance_window",
        "/maintenance-windows",
        WindowCreate,
        (Reference("monitors", "/monitors", many=True, also="/heartbeats"),),
        name_field="title",
    ),
)
"""The kinds ``uptrio apply`` knows, in the order it creates them (a kind only names kinds
before it, or itself); ``--prune`` deletes in the reverse order."""


NAME_FIELDS = {kind.path: kind.name_field for kind in KINDS}
"""The field naming the objects at each API path of :data:`KINDS` (``name`` elsewhere)."""


def kind_named(key: str) -> Kind:
    """The kind whose top-level key is ``key``; KeyError for none."""
    for kind in KINDS:
        if kind.key == key:
            return kind
    raise KeyError(key)


_NAME_REF: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "The name of the resource, in the files or already in the account.",
}


def _name_field(reference: Reference, original: dict[str, Any]) -> dict[str, Any]:
    """The schema of a reference field: a name, a list of names, or a name or null."""
    if reference.many:
        out: dict[str, Any] = {"type": "array", "items": _NAME_REF}
        if "maxItems" in original:
            out["maxItems"] = original["maxItems"]
        return out
    nullable = "anyOf" in original and {"type": "null"} in original["anyOf"]
    return {"anyOf": [_NAME_REF, {"type": "null"}]} if nullable else dict(_NAME_REF)


def build_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the format, from the create models of
    :data:`KINDS` with each reference field replaced by a name (or a list of names)."""
    keyed, top = models_json_schema([(kind.model, "validation") for kind in KINDS])
    defs: dict[str, Any] = top["$defs"]
    properties: dict[str, Any] = {}
    for kind in KINDS:
        ref = keyed[(kind.model, "validation")]["$ref"]
        body = defs[ref.rsplit("/", 1)[1]]
        for reference in kind.references:
            if reference.item is None:
                original = body["properties"][reference.field]
                body["properties"][reference.field] = {
                    **_name_field(reference, original),
                    "title": original.get("title", reference.field),
                }
        properties[kind.key] = {
            "type": "array",
            "description": f"The account's {kind.key.replace('_', ' ')}, unique by name.",
            "items": {"$ref": ref},
        }
    defs[TargetIn.__name__] = {
        "description": "Who a step tells: one key, the type, naming the resource.",
        "oneOf": [
            {
                "type": "object",
                "properties": {type_: _NAME_REF},
                "required": [type_],
                "additionalProperties": False,
            }
            for type_ in TARGET_PATHS
        ],
    }
    layer = defs[LayerIn.__name__]["properties"]
    layer["members"] = {**layer["members"], "items": _NAME_REF, "description": "Member names."}
    component = defs[ComponentIn.__name__]["properties"]
    component["monitor"] = {**_NAME_REF, "description": "The name of a monitor."}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://uptrio.dev/schemas/uptrio-apply.schema.json",
        "title": "uptrio apply",
        "description": "The files of `uptrio apply` and `uptrio export` (docs/apply.md).",
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "$defs": defs,
    }


@cache
def load_schema() -> dict[str, Any]:
    """The shipped JSON Schema, read with importlib.resources."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def render_schema() -> str:
    """:func:`build_schema` as the shipped file holds it (indented, sorted, final newline)."""
    return json.dumps(build_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    path = resources.files(__package__).joinpath(SCHEMA_FILE)
    with resources.as_file(path) as real:
        real.write_text(render_schema(), encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
