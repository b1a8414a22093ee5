"""What the store actor batches, and who writes it (docs/design-notes.md, "Writes";
docs/operations.md, "A database outage"): the store actor (:mod:`store.actor`), its
buffer (:mod:`store.buffer`), its producers' handle (:mod:`store.writer`) and the fence
(:mod:`store.fencing`) know rows only through the protocols here. Each kind of row the
engine hands over is a *family*, defined in its own module, which registers itself with
one line (:func:`register`).

* An **item** (:class:`Item`) is one row a producer hands over: it names its family
  (``family``, a class attribute: the family's name), the resource it belongs to
  (``resource_id``: the fence's bucket), the lease epoch its actor ran under
  (``lease_epoch``; None: not fenced) and the pool of that lease (``lease_region``; None:
  the any-region pool), the status move it caused (``change``, or None),
  and when it was handed over (``queued_at``, trio clock seconds: the store measures
  each item's delay to its commit from it). The buffer counts items; when its bound
  drops one, the item's move is kept (an *orphan*) and written with a later batch.
* A **move** (:class:`Move`) is a resource's status moving: it names its family, its
  resource and its lease epoch, and is fenced on its own (an item the fence keeps may
  carry a move it refuses).
* A **family** (:class:`Family`) writes its part of a batch (:class:`Part`: its items
  and moves, orphans first) on the batch's connection: ``write(connection, items,
  moves)``, asyncio side, returning the rows it inserted. Its contract: a retry after a
  lost commit acknowledgement writes nothing twice (the items carry their ids); without
  moves the write is one statement, atomic by itself (the store actor then runs a batch
  of that family alone outside BEGIN and COMMIT); with moves it runs in the batch's
  transaction, with everything the moves cause. A family whose rows go to a table
  partitioned by time names it (:class:`Partitions`), and the store actor makes the
  partitions a batch needs before writing it.

The parts of one batch are written in the order the families registered (a fixed order
for every node, so two nodes' batches take their locks in the same order). The registry
is filled when the families' modules are imported and only read afterwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from .database import Connection

__all__ = ["Family", "Fenced", "Item", "Move", "Part", "Partitions", "register", "split"]

ItemT = TypeVar("ItemT")
MoveT = TypeVar("MoveT")


class Fenced(Protocol):
    """What the fence reads of an item or a move (:mod:`store.fencing`)."""

    @property
    def resource_id(self) -> str:
        """The id of the resource it belongs to (its bucket: ``store.leases.bucket_of``)."""

    @property
    def lease_epoch(self) -> int | None:
        """The lease epoch its actor ran under; None: not fenced."""

    @property
    def lease_region(self) -> str | None:
        """The pool of the lease its actor ran under: a region's name, or None: the
        any-region pool (docs/several-nodes.md, Regions)."""


class Move(Fenced, Protocol):
    """A resource's status move (module docstring)."""

    family: ClassVar[str]
    """The name of the family that writes it."""


class Item(Fenced, Protocol):
    """One row handed to the store actor (module docstring)."""

    family: ClassVar[str]
    """The name of the family that writes it."""

    @property
    def change(self) -> Move | None:
        """The status move it caused, or None."""

    @property
    def queued_at(self) -> float:
        """When it was handed over, trio clock seconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Partitions(Generic[ItemT]):
    """A family's rows go to a table partitioned by time: ``row_time(item)`` is an item's
    row time (epoch seconds), and ``ensure(connection, lo, hi, width)`` (asyncio side)
    makes the partitions, ``width`` seconds each, that rows of ``[lo, hi]`` need."""

    row_time: Callable[[ItemT], int]
    ensure: Callable[[Connection, int, int, int], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Family(Generic[ItemT, MoveT]):
    """One family of rows (module docstring): its ``name`` (the items' and moves'
    ``family``), its ``write`` and, for a table partitioned by time, its
    ``partitions``."""

    name: str
    write: Callable[[Connection, Sequence[ItemT], Sequence[MoveT]], Awaitable[int]]
    partitions: Partitions[ItemT] | None = None


_FAMILIES: dict[str, Family[Any, Any]] = {}
"""Every registered family by name (filled at import, in whatever order the modules are
imported: nothing depends on it)."""


def register(family: Family[ItemT, MoveT]) -> Family[ItemT, MoveT]:
    """Register ``family`` (once, when its module is imported) and return it.

    Raises:
        ValueError: a family of that name is registered already.
    """
    if family.name in _FAMILIES:
        raise ValueError(f"a store family named {family.name!r} is registered already")
    _FAMILIES[family.name] = family
    return family


@dataclass(slots=True)
class Part:
    """One family's part of a batch: its items in arrival order, and its moves (orphans
    first, then the items' own)."""

    family: Family[Any, Any]
    items: list[Item] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)

    def __len__(self) -> int:
        """Rows of the part: items and moves."""
        return len(self.items) + len(self.moves)


def split(items: Iterable[Item], moves: Iterable[Move]) -> list[Part]:
    """``items`` and ``moves`` grouped by family, the parts in the order of the families'
    names (one pass), so every batch of every node writes its families in one order
    whatever order their modules were imported in.

    Raises:
        KeyError: an item or a move of a family never registered (a bug).
    """
    parts: dict[str, Part] = {}
    for item in items:
        _part(parts, item.family).items.append(item)
    for move in moves:
        _part(parts, move.family).moves.append(move)
    if len(parts) < 2:
        return list(parts.values())
    return sorted(parts.values(), key=lambda part: part.family.name)


def _part(parts: dict[str, Part], name: str) -> Part:
    part = parts.get(name)
    if part is None:
        part = parts[name] = Part(_FAMILIES[name])
    return part
