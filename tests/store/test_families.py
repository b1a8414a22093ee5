"""The store actor's batch path knows rows only as families (store.family): its generic
modules name no kind of row, and a family they have never heard of, registered with one
line, is batched, buffered and written beside the checks in one transaction."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, ClassVar

import pytest
import trio

from store import (
    CheckRecord,
    Connection,
    Database,
    HeartbeatChange,
    StatusChange,
    StoreSettings,
    WriteCheck,
    WritePing,
    checks,
    new_check_id,
    run_store_writer,
)
from store.family import Family, register, split
from tests.store.helpers import new_monitor

_GENERIC = ("actor.py", "buffer.py", "writer.py", "fencing.py", "family.py")
"""The store's batch path: the actor, its buffer, its producers' handle, the fence, the
protocol. Kinds live in the families' modules (store.checks, store.pings)."""

_KIND = re.compile(
    r"\b(heartbeats?|pings?|monitors?|checks?|checked|probes?)\b|\b(hbt|hbm|mon|chk|png)_",
    re.IGNORECASE,
)


def test_the_batch_path_names_no_kind_of_row() -> None:
    named = []
    for name in _GENERIC:
        source = resources.files("store").joinpath(name).read_text("utf-8")
        for number, line in enumerate(source.splitlines(), 1):
            if match := _KIND.search(line):
                named.append(f"store/{name}:{number}: {match.group(0)!r} in {line.strip()!r}")
    assert named == []


@dataclass(frozen=True, slots=True, kw_only=True)
class _Note:
    """An item of a family the store's batch path has never heard of."""

    resource_id: str
    text: str
    lease_epoch: int | None = None
    change: None = None
    queued_at: float = field(default_factory=trio.current_time)

    family: ClassVar[str] = "test-notes"


async def _write_notes(connection: Connection, items: Sequence[_Note], moves: Sequence[Any]) -> int:
    """One statement, as a family's write without moves must be."""
    status = await connection.execute(
        "INSERT INTO test_notes (resource_id, text) SELECT * FROM unnest($1::text[], $2::text[])",
        [n.resource_id for n in items],
        [n.text for n in items],
    )
    return int(status.rsplit(" ", 1)[-1])


NOTES = register(Family(name="test-notes", write=_write_notes))


def test_a_family_registers_once_and_parts_follow_the_families_names() -> None:
    with pytest.raises(ValueError, match="registered already"):
        register(Family(name="test-notes", write=_write_notes))
    note = _Note(resource_id="res_1", text="hello", queued_at=0.0)
    check = CheckRecord(
        id="chk_1",
        monitor_id="mon_1",
        status="up",
        response_time_ms=1.0,
        status_code=None,
        error_code=None,
        error_message=None,
        created=100,
    )
    move = HeartbeatChange(
        heartbeat_id="hbt_1",
        move_id="hbm_1",
        from_status="pending",
        to_status="up",
        run_epoch=0,
        created=100,
        detail="",
    )
    ping = WritePing(ping=None, change=move, queued_at=0.0)
    parts = split([note, WriteCheck(check=check, queued_at=0.0), ping], [move])
    assert [(p.family.name, len(p.items), len(p.moves)) for p in parts] == [
        ("checks", 1, 0),
        ("pings", 1, 1),
        ("test-notes", 1, 0),
    ]
    with pytest.raises(ValueError, match="a ping or a move"):
        WritePing(ping=None, queued_at=0.0)


async def test_the_store_actor_writes_a_new_family_beside_checks_in_one_batch(
    db: Database, nursery: trio.Nursery
) -> None:
    with trio.fail_after(10):

        async def create(connection: Connection) -> None:
            await connection.execute("CREATE TABLE test_notes (resource_id text, text text)")

        await db.run(create)
        now = int(time.time())
        monitor = await new_monitor(db, created=now - 60, status="pending")
        check = CheckRecord(
            id=new_check_id(now),
            monitor_id=monitor.id,
            status="up",
            response_time_ms=2.0,
            status_code=200,
            error_code=None,
            error_message=None,
            created=now,
        )
        change = StatusChange(
            monitor_id=monitor.id,
            check_id=check.id,
            from_status="pending",
            to_status="up",
            run_epoch=monitor.run_epoch,
            created=now,
        )
        writer = await nursery.start(run_store_writer, db, StoreSettings(batch_age_seconds=0.05))
        assert writer.write_nowait(_Note(resource_id=monitor.id, text="first"))
        await writer.write(WriteCheck(check=check, change=change))
        await writer.write(_Note(resource_id=monitor.id, text="second"))
        await writer.flush()
        stats = writer.statistics
        assert (stats.batches, stats.last_batch_size, stats.rows_written) == (1, 3, 3)

        async def read(connection: Connection) -> tuple[list[str], str]:
            notes = await connection.fetch("SELECT text FROM test_notes ORDER BY text")
            status = await connection.fetchval(
                "SELECT status FROM monitors WHERE id = $1", monitor.id
            )
            return [r["text"] for r in notes], str(status)

        assert await db.run(read) == (["first", "second"], "up")
        assert await db.run(checks.list_checks, monitor.id, limit=10) == ([check], False)
        writer.close()
