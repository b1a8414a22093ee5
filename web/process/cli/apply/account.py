"""What the account holds, as apply and export see it: every object of each kind read
through the API (:class:`.client.ApiClient`), with maps between names and ids for the
references (docs/apply.md: references name the other resource by its ``name``)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .client import ApiClient, ApiError
from .format import KINDS, NAME_FIELDS, STEPS, TARGET_PATHS, Kind, Reference

__all__ = ["Account", "read_account"]


@dataclass
class Account:
    """The objects by API path, and for each path the ids by name and names by id."""

    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    ids: dict[str, dict[str, list[str]]] = field(default_factory=lambda: defaultdict(dict))
    names: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))

    def add(self, path: str, name: str, id: str) -> None:
        """Record that the object ``id`` at ``path`` is named ``name``."""
        self.ids[path].setdefault(name, []).append(id)
        self.names[path][id] = name

    def id_of(self, path: str, name: str) -> str:
        """The id of the one object named ``name`` at ``path``; ApiError for none, or for
        several (a name must say which one)."""
        found = self.ids[path].get(name, [])
        if len(found) != 1:
            what = "no object" if not found else f"{len(found)} objects"
            raise ApiError(f"{path}: {what} named {name!r} in the account")
        return found[0]

    def has(self, ref: Reference, name: str) -> bool:
        """Whether an object of one of ``ref``'s paths is named ``name``."""
        return any(self.ids[path].get(name) for path in ref.paths)

    def _id(self, ref: Reference, name: str) -> str:
        """The id ``name`` stands for in ``ref``: at its first path that has the name."""
        path = next((p for p in ref.paths if self.ids[p].get(name)), ref.target)
        return self.id_of(path, name)

    def _name(self, ref: Reference, id: str) -> str:
        """The name of the object ``id`` of one of ``ref``'s paths (the id for none)."""
        return next((self.names[p][id] for p in ref.paths if id in self.names[p]), id)

    def by_name(self, kind: Kind, name: str) -> dict[str, Any] | None:
        """The object of ``kind`` named ``name``; None for none; ApiError for several."""
        found = [o for o in self.objects.get(kind.path, []) if o.get(kind.name_field) == name]
        if len(found) > 1:
            raise ApiError(
                f"{len(found)} {kind.key} are named {name!r} in the account: rename all but one"
            )
        return found[0] if found else None

    def to_names(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` with each reference's id replaced by the name it has (an id the account
        does not know stays as it is)."""
        out = _swap(kind.references, obj, self._name)
        if isinstance(out.get(STEPS), list):
            out[STEPS] = [
                {
                    **step,
                    "targets": [
                        {t["type"]: self.names[TARGET_PATHS[t["type"]]].get(t["id"], t["id"])}
                        for t in step.get("targets", [])
                    ],
                }
                for step in out[STEPS]
            ]
        return out

    def to_ids(self, kind: Kind, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` with each reference's name replaced by the id; ApiError for a name
        the account does not have (once or more than once)."""
        out = _swap(kind.references, fields, self._id)
        if kind.key == "escalation_policies" and isinstance(out.get(STEPS), list):
            out[STEPS] = [
                {
                    **step,
                    "targets": [
                        {"type": type_, "id": self.id_of(TARGET_PATHS[type_], name)}
                        for target in step["targets"]
                        for type_, name in target.items()
                    ],
                }
                for step in out[STEPS]
            ]
        return out


def _swap(references: tuple[Reference, ...], obj: dict[str, Any], swap: Any) -> dict[str, Any]:
    """A copy of ``obj`` with ``swap(reference, value)`` applied to each reference's
    values."""
    out = dict(obj)
    for ref in references:
        value = out.get(ref.field)
        if value is None:
            continue
        if ref.item is not None:
            key = ref.item

            def one(value: Any, ref: Reference = ref) -> Any:
                return [swap(ref, v) for v in value] if ref.item_many else swap(ref, value)

            out[ref.field] = [
                {**item, key: one(item[key])} if item.get(key) is not None else item
                for item in value
            ]
        elif ref.many:
            out[ref.field] = [swap(ref, item) for item in value]
        else:
            out[ref.field] = swap(ref, value)
    return out


async def read_account(api: ApiClient) -> Account:
    """Every object of each kind of :data:`.format.KINDS` and of each path they reference;
    ApiError when a list fails."""
    account = Account()
    paths = {kind.path for kind in KINDS} | {r.target for k in KINDS for r in k.references}
    paths |= set(TARGET_PATHS.values())
    for path in sorted(paths):
        account.objects[path] = await api.list_all(path)
        for obj in account.objects[path]:
            account.add(path, str(obj.get(NAME_FIELDS.get(path, "name"))), obj["id"])
    return account
