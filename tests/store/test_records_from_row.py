"""Records built from rows (``store.records._FromRow.from_row``): the slots path that a
frozen, slotted record takes gives the record its ``__init__`` would, for every record
class of the store; extra columns are ignored and a missing one is an error, as before.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, fields
from typing import Any

import pytest

import store
from store.records import MonitorRecord, _FromRow


def _record_classes() -> list[type[_FromRow]]:
    for module in pkgutil.iter_modules(store.__path__):
        importlib.import_module(f"store.{module.name}")
    found: list[type[_FromRow]] = []
    pending = list(_FromRow.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "__dataclass_fields__" in cls.__dict__ and cls.__module__.startswith("store."):
            found.append(cls)
    return sorted(set(found), key=lambda c: c.__qualname__)


def test_every_record_from_a_row_is_the_record_its_init_makes() -> None:
    classes = _record_classes()
    assert MonitorRecord in classes and len(classes) >= 20
    for cls in classes:
        row: dict[str, Any] = {f.name: object() for f in fields(cls)}  # type: ignore[arg-type]
        row["not_a_field"] = object()  # a column the record does not hold: ignored
        record = cls.from_row(row)
        assert record == cls(**{k: v for k, v in row.items() if k != "not_a_field"}), cls
        for name in cls.__dataclass_fields__:  # type: ignore[attr-defined]
            assert getattr(record, name) is row[name], (cls, name)
        missing = dict(row)
        del missing[next(iter(cls.__dataclass_fields__))]  # type: ignore[attr-defined]
        with pytest.raises(KeyError):
            cls.from_row(missing)


def test_slotted_frozen_records_skip_init_and_others_keep_it() -> None:
    assert MonitorRecord._row_setters is not None  # a page of monitors takes the slots path

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Checked(_FromRow):
        value: int

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError("negative")

    @dataclass(frozen=True, kw_only=True)
    class Plain(_FromRow):
        value: int

    assert Checked._row_setters is None and Plain._row_setters is None
    with pytest.raises(ValueError):  # __post_init__ still runs
        Checked.from_row({"value": -1})
    assert Plain.from_row({"value": 3}) == Plain(value=3)
