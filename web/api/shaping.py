"""Shapers derived from the response models: an API object is defined once, by its
pydantic model (docs/architecture.md, "API resources"), and :func:`shaper` turns that
model into the function that builds the object from a store record on every read.

The function is plain dict construction, as fast as a hand-written one: its source is
generated once, at import, from the model's fields (as :mod:`dataclasses` generates
``__init__``), so no pydantic validation runs per object. The JSON's keys come in the
model's field order.

Where each field's value comes from:

- a field typed as a ``Literal`` of one value (``object: Literal["monitor"]``) is that
  constant;
- a field marked :class:`From` is the record attribute it names (``monitor`` from
  ``monitor_id``), optionally with a value for None and a conversion;
- a field marked :class:`Computed` is its function of the record (and of the keyword
  arguments it ``uses``, such as ``ping_base``, which the shaper then requires);
- a field marked :class:`Nested` whose type is a model is that model's object built from
  the same record (null when the attribute ``when`` names is None);
- a field typed ``list[Model]`` (or ``list[Model] | None``) is the record's list of
  stored dicts, each shaped by the model's fields in their order (``d["k"]`` for a field
  that may not be null, ``d.get("k")`` for one that may): jsonb keeps its own key order,
  the API shows the documented one;
- any other field is the record attribute of the same name.

A field also marked :class:`OmitNull` is left out of the object when its value is None
(the availability's ``series`` without a ``granularity``).

Every attribute named must exist on the record class: a model field without a source
fails at import (:class:`ShapeError`), not on the first request.
"""

from __future__ import annotations

import dataclasses
import keyword
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = [
    "Computed",
    "From",
    "Nested",
    "OmitNull",
    "ShapeError",
    "Shaper",
    "shaped_model",
    "shaper",
]

Shaper = Callable[..., dict[str, Any]]
"""A derived shaper: ``shape(record, **uses) -> dict`` (the keyword arguments are those
its :class:`Computed` fields use; none for most objects)."""


class ShapeError(TypeError):
    """A model whose shaper cannot be derived: a field names an attribute the record
    class lacks, or a marker is used where it has no meaning."""


@dataclass(frozen=True, slots=True)
class From:
    """The field is the record's attribute ``attr``; a None value becomes ``null_as``,
    any other value goes through ``convert`` when given (``math.ceil`` for a fractional
    epoch shown as whole seconds)."""

    attr: str
    null_as: Any = None
    convert: Callable[[Any], Any] | None = None


@dataclass(frozen=True, slots=True)
class Computed:
    """The field is ``fn(record, **{name: value for name in uses})``: a value no single
    attribute holds. The names in ``uses`` become keyword-only arguments of the shaper."""

    fn: Callable[..., Any]
    uses: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Nested:
    """The field (typed as a model, or a model or None) is that model's object built from
    the same record; null when the record's attribute ``when`` is None."""

    when: str | None = None


@dataclass(frozen=True, slots=True)
class OmitNull:
    """The field's key is left out of the object when its value is None."""


def shaper(model: type[BaseModel], record: type[Any]) -> Shaper:
    """The shaper of ``model`` for records of class ``record`` (a dataclass of
    :mod:`store`, or any class whose attributes the fields name): ``shape(record,
    **uses) -> dict`` with the model's fields as keys, in their order.

    Raises:
        ShapeError: a field's source is not an attribute of ``record``, or a marker is
            misused (see the module's docstring).
    """
    builder = _Builder(record)
    expression = builder.object_of(model, "r")
    uses = sorted(builder.uses)
    parameters = "".join(f", {name}" for name in uses)
    star = ", *" if uses else ""
    source = f"def shape(r{star}{parameters}):\n    return {expression}\n"
    namespace = dict(builder.names)
    exec(compile(source, f"<shaper of {model.__name__}>", "exec"), namespace)
    shape: Any = namespace["shape"]
    shape.__name__ = shape.__qualname__ = _snake(model.__name__)
    shape.__doc__ = f"A {record.__name__} as the API's {model.__name__} (derived: web.api.shaping)."
    shape.__shaped_model__ = model
    shape.__shaper_source__ = source
    return shape  # type: ignore[no-any-return]


def shaped_model(shape: object) -> type[BaseModel] | None:
    """The model ``shape`` was derived from by :func:`shaper`, or None for anything else."""
    return getattr(shape, "__shaped_model__", None)


class _Builder:
    """Writes the expressions of one shaper; values the generated code needs (constants,
    functions, nested shapers) go into ``names`` under generated identifiers."""

    def __init__(self, record: type[Any]) -> None:
        self.record = record
        self.attributes = _attributes(record)
        self.names: dict[str, Any] = {}
        self.uses: set[str] = set()

    def name(self, value: Any) -> str:
        key = f"_v{len(self.names)}"
        self.names[key] = value
        return key

    def attribute(self, model: type[BaseModel], field: str, attr: str) -> str:
        if attr not in self.attributes:
            raise ShapeError(
                f"{model.__name__}.{field}: {self.record.__name__} has no attribute {attr!r} "
                "(name its source with From, Computed or Nested)"
            )
        return attr

    def object_of(self, model: type[BaseModel], r: str) -> str:
        """The dict display building ``model`` from the record named ``r``."""
        items = []
        for field, info in model.model_fields.items():
            value = self.value(model, field, info.annotation, info.metadata, r)
            if any(isinstance(m, OmitNull) for m in info.metadata):
                items.append(f"**({{}} if (_o := {value}) is None else {{{field!r}: _o}})")
            else:
                items.append(f"{field!r}: {value}")
        return "{" + ", ".join(items) + "}"

    def value(
        self, model: type[BaseModel], field: str, annotation: Any, metadata: list[Any], r: str
    ) -> str:
        markers = [m for m in metadata if isinstance(m, From | Computed | Nested)]
        if len(markers) > 1:
            raise ShapeError(f"{model.__name__}.{field}: one source marker at most")
        marker = markers[0] if markers else None
        if isinstance(marker, Computed):
            for name in marker.uses:
                if not _argument(name):
                    raise ShapeError(f"{model.__name__}.{field}: {name!r} cannot be an argument")
            self.uses.update(marker.uses)
            arguments = "".join(f", {name}={name}" for name in marker.uses)
            return f"{self.name(marker.fn)}({r}{arguments})"
        if isinstance(marker, Nested):
            nested = _model_in(annotation)
            if nested is None:
                raise ShapeError(f"{model.__name__}.{field}: Nested needs a model type")
            built = self.object_of(nested, r)
            if marker.when is None:
                return built
            when = self.attribute(model, field, marker.when)
            return f"(None if {r}.{when} is None else {built})"
        if isinstance(marker, From):
            attr = self.attribute(model, field, marker.attr)
            if marker.null_as is None and marker.convert is None:
                return f"{r}.{attr}"
            converted = "_x" if marker.convert is None else f"{self.name(marker.convert)}(_x)"
            return f"({self.name(marker.null_as)} if (_x := {r}.{attr}) is None else {converted})"
        constant = _single_literal(annotation)
        if constant is not None:
            value = constant[0]
            return repr(value) if isinstance(value, str | int | bool) else self.name(value)
        items = _list_of_models(annotation)
        if items is not None:
            attr = self.attribute(model, field, field)
            each = self.name(_dict_shaper(items))
            listed = f"[{each}(_d) for _d in {r}.{attr}]"
            if _nullable(annotation):
                return f"(None if {r}.{attr} is None else {listed})"
            return listed
        return f"{r}.{self.attribute(model, field, field)}"


def _dict_shaper(model: type[BaseModel]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``model`` built from a stored dict (a jsonb list's item): its fields in order,
    ``d[k]`` for the fields that may not be null, ``d.get(k)`` for those that may."""
    parts = []
    for field, info in model.model_fields.items():
        if any(isinstance(m, From | Computed | Nested | OmitNull) for m in info.metadata):
            raise ShapeError(f"{model.__name__}.{field}: a stored dict's item takes no marker")
        if _nullable(info.annotation):
            parts.append(f"{field!r}: d.get({field!r})")
        else:
            parts.append(f"{field!r}: d[{field!r}]")
    namespace: dict[str, Any] = {}
    source = "def shape(d):\n    return {" + ", ".join(parts) + "}\n"
    exec(compile(source, f"<shaper of {model.__name__}>", "exec"), namespace)
    return namespace["shape"]  # type: ignore[no-any-return]


def _argument(name: str) -> bool:
    """Whether ``name`` can be a keyword argument of a generated shaper: an identifier,
    no keyword, neither ``r`` (the record) nor private (the generated names)."""
    return name.isidentifier() and not keyword.iskeyword(name) and name != "r" and name[0] != "_"


def _attributes(record: type[Any]) -> frozenset[str]:
    """The attributes a record of class ``record`` has: its dataclass fields (defaulted
    or not) and what the class itself defines (properties)."""
    names = set(dir(record))
    if dataclasses.is_dataclass(record):
        names.update(f.name for f in dataclasses.fields(record))
    return frozenset(names)


def _union_args(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _nullable(annotation: Any) -> bool:
    return annotation is Any or type(None) in _union_args(annotation)


def _non_null(annotation: Any) -> list[Any]:
    return [a for a in _union_args(annotation) if a is not type(None)]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model of ``Model`` or ``Model | None``, else None."""
    kept = _non_null(annotation)
    only = kept[0] if len(kept) == 1 else None
    if isinstance(only, type) and issubclass(only, BaseModel):
        return only
    return None


def _list_of_models(annotation: Any) -> type[BaseModel] | None:
    """The item model of ``list[Model]`` or ``list[Model] | None``, else None."""
    kept = _non_null(annotation)
    if len(kept) != 1 or get_origin(kept[0]) is not list:
        return None
    (item,) = get_args(kept[0])
    if isinstance(item, type) and issubclass(item, BaseModel):
        return item
    return None


def _single_literal(annotation: Any) -> tuple[Any] | None:
    """``(value,)`` of ``Literal[value]``, else None."""
    if get_origin(annotation) is Literal and len(get_args(annotation)) == 1:
        return (get_args(annotation)[0],)
    return None


def _snake(name: str) -> str:
    """``MonitorObject`` -> ``monitor_object``."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
