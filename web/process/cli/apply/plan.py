"""What ``uptrio apply`` will do (docs/apply.md, "What apply does"): one :class:`Action` per
resource, ``create``, ``update`` (only the fields that differ), ``unchanged`` or (with
``--prune``) ``delete``, in the order they run.

Only the fields a file sets are compared (a field it leaves out is left alone); ``metadata``
and a channel's ``config`` are compared key by key, as the API merges them; a secret of a
channel's config, which the API shows masked, is the same when its mask is. Kinds are
created in :data:`.format.KINDS` order, a kind's resources after those they name (a
monitor's ``depends_on``); deletes come last, in the reverse order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import TypeAdapter, ValidationError

from engine import mask_config

from .account import Account
from .format import KINDS, MANAGED_BY, STEPS, TARGET_PATHS, Kind
from .loader import Desired, InvalidFiles, Resource

__all__ = ["Action", "make_plan"]


@dataclass(frozen=True)
class Action:
    """One line of the plan: ``verb`` (create, update, delete, unchanged) on the resource
    ``name`` of ``kind``; ``id`` of the object (None for a create); ``fields``: for a
    create every field of the file, for an update those that differ (references as
    names)."""

    verb: str
    kind: Kind
    name: str
    id: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        """The line printed for it (docs/apply.md): ``update monitor api
        (interval_seconds)``."""
        text = f"{self.verb} {self.kind.singular} {self.name}"
        if self.verb == "update":
            text += f" ({', '.join(self.fields)})"
        return text


def _matches(desired: Any, current: Any) -> bool:
    """Whether ``current`` has what ``desired`` says: lists item by item and of the same
    length, objects on the keys ``desired`` has (the service fills in the others)."""
    if isinstance(desired, list):
        return (
            isinstance(current, list)
            and len(desired) == len(current)
            and all(_matches(d, c) for d, c in zip(desired, current, strict=True))
        )
    if isinstance(desired, dict):
        return isinstance(current, dict) and all(
            _matches(v, current.get(k)) for k, v in desired.items()
        )
    return bool(type(desired) is type(current) and desired == current)


def _as_stored(kind: Kind, key: str, value: Any) -> Any:
    """``value`` of the text field ``key`` as the create model stores it (a member's email
    address normalized, as web/api/members.py does); the value itself for other fields, for
    references, and for a value the model refuses (the API will say why)."""
    info = kind.model.model_fields.get(key)
    if info is None or not isinstance(value, str) or any(r.field == key for r in kind.references):
        return value
    form: Any = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
    try:
        return TypeAdapter(form).validate_python(value)
    except ValidationError:
        return value


def _changed(kind: Kind, fields: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``fields`` (the file's, name left out) that ``current`` (the
    account's object, references as names) does not have; merged objects keep only the
    keys that differ."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        have = current.get(key)
        if _as_stored(kind, key, value) == have and have is not None:
            continue
        if key == "metadata" or (kind.key == "notification_channels" and key == "config"):
            if key == "config":
                value_seen = mask_config(str(current.get("type")), value)
                differ = {
                    k: v
                    for k, v in value.items()
                    if not _matches(value_seen[k], (have or {}).get(k))
                }
            else:
                differ = {k: v for k, v in value.items() if (have or {}).get(k) != v}
            if differ:
                out[key] = differ
        elif kind.key == "status_pages" and key == "components":
            full = [{"group": None, **item} for item in value]
            if not _matches(full, have):
                out[key] = value
        elif not _matches(value, have):
            out[key] = value
    return out


def _ordered(kind: Kind, resources: list[Resource]) -> list[Resource]:
    """``resources`` with each after those of the same kind it names (depth first, file
    order otherwise); InvalidFiles for a cycle."""
    own = [r for r in kind.references if r.target == kind.path and r.item is None]
    if not own:
        return resources
    by_name = {r.name: r for r in resources}
    out: list[Resource] = []
    state: dict[str, str] = {}

    def visit(resource: Resource) -> None:
        if state.get(resource.name) == "done":
            return
        if state.get(resource.name) == "visiting":
            raise InvalidFiles([f"{resource.at(own[0].field)}: a cycle of references"])
        state[resource.name] = "visiting"
        for ref in own:
            for name in resource.fields.get(ref.field) or []:
                if name in by_name:
                    visit(by_name[name])
        state[resource.name] = "done"
        out.append(resource)

    for resource in resources:
        visit(resource)
    return out


def _check_references(desired: Desired, account: Account) -> None:
    """InvalidFiles for a reference to a name neither the files nor the account have."""
    problems: list[str] = []

    def check(resource: Resource, field_name: str, paths: tuple[str, ...], name: str) -> None:
        if not any(name in in_files.get(p, set()) or account.ids[p].get(name) for p in paths):
            what = " or ".join(p.strip("/") for p in paths)
            problems.append(
                f"{resource.at(field_name)}: no {what} named {name!r} in the files or the account"
            )

    in_files = {k.path: {r.name for r in desired.of(k.key)} for k in KINDS}
    for kind in KINDS:
        for resource in desired.of(kind.key):
            for ref in kind.references:
                value = resource.fields.get(ref.field)
                if value is None:
                    continue
                for name in ref.names(value):
                    check(resource, ref.field, ref.paths, name)
            for step in (
                resource.fields.get(STEPS) or [] if kind.key == "escalation_policies" else []
            ):
                for target in step["targets"]:
                    for type_, name in target.items():
                        check(resource, STEPS, (TARGET_PATHS[type_],), name)
    if problems:
        raise InvalidFiles(problems)


def make_plan(desired: Desired, account: Account, prune: bool) -> list[Action]:
    """The actions that make ``account`` what ``desired`` says, in the order they run.

    Raises:
        InvalidFiles: a reference to a name nobody has, or a cycle of references.
        ApiError: a name the files use is borne by several objects of the account.
    """
    _check_references(desired, account)
    actions: list[Action] = []
    for kind in KINDS:
        for resource in _ordered(kind, desired.of(kind.key)):
            fields = {k: v for k, v in resource.fields.items() if k != kind.name_field}
            current = account.by_name(kind, resource.name)
            if current is None:
                actions.append(Action("create", kind, resource.name, None, fields))
                continue
            changed = _changed(kind, fields, account.to_names(kind, current))
            verb = "update" if changed else "unchanged"
            actions.append(Action(verb, kind, resource.name, current["id"], changed))
    if prune:
        for kind in reversed(KINDS):
            wanted = {r.name for r in desired.of(kind.key)}
            for obj in account.objects.get(kind.path, []):
                managed = (obj.get("metadata") or {}).get("managed_by") == MANAGED_BY
                name = str(obj.get(kind.name_field))
                if managed and name not in wanted:
                    actions.append(Action("delete", kind, name, obj["id"]))
    return actions
