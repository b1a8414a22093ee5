"""Migration 0015 on a database written before it: the timeline entries the engine wrote
for incidents a monitor or a heartbeat opened (the opening entry, the recovery) are
marked with their opener in ``generated_by``; entries people wrote are not."""

from __future__ import annotations

from typing import Any

import asyncpg
import trio
import trio_asyncio

from store import apply_migrations

T0 = 1_790_000_000

_BEFORE = """
INSERT INTO accounts (id, name, created) VALUES ('acct_1', 'acme', {t0});
INSERT INTO incidents (id, account_id, title, description, status, severity, created,
                       updated, resolved_at, resolution_message, monitor_id, monitors)
VALUES ('inc_auto', 'acct_1', 'db-7 is down', 'Check chk_1 failed: timeout', 'resolved',
        'major', {t0}, {t0} + 312, {t0} + 312, 'db-7 is up again after 5m 12s', 'mon_1',
        ARRAY['mon_1']),
       ('inc_hand', 'acct_1', 'Slow', 'secret', 'resolved', 'minor', {t0}, {t0} + 312,
        {t0} + 312, 'db-7 is up again after 5m 12s', NULL, ARRAY['mon_1']);
INSERT INTO incident_updates (id, account_id, incident_id, status, message, created)
VALUES ('inu_1', 'acct_1', 'inc_auto', 'investigating', 'Check chk_1 failed: timeout', {t0}),
       ('inu_2', 'acct_1', 'inc_auto', 'investigating', 'We are on it.', {t0} + 60),
       ('inu_3', 'acct_1', 'inc_auto', 'resolved', 'db-7 is up again after 5m 12s', {t0} + 312),
       ('inu_4', 'acct_1', 'inc_auto', 'resolved', 'db-7 is up again after 1h 0m', {t0} + 400),
       ('inu_5', 'acct_1', 'inc_hand', 'investigating', 'secret', {t0}),
       ('inu_6', 'acct_1', 'inc_hand', 'resolved', 'db-7 is up again after 5m 12s', {t0} + 312);
"""


async def test_0015_marks_the_engines_entries_with_their_opener(
    empty_database_url: str,
) -> None:
    async def on_asyncio() -> list[Any]:
        conn = await asyncpg.connect(empty_database_url)
        try:
            await apply_migrations(conn, up_to=14)
            await conn.execute(_BEFORE.format(t0=T0))
            assert await apply_migrations(conn, up_to=15) == ["0015_incident_openers.sql"]
            return list(
                await conn.fetch("SELECT id, generated_by FROM incident_updates ORDER BY id")
            )
        finally:
            await conn.close()

    with trio.fail_after(30):
        rows = await trio_asyncio.aio_as_trio(on_asyncio)()
    assert [(r["id"], r["generated_by"]) for r in rows] == [
        ("inu_1", "mon_1"),
        ("inu_2", None),
        ("inu_3", "mon_1"),
        ("inu_4", None),  # its duration is not the incident's: a person wrote it
        ("inu_5", None),
        ("inu_6", None),
    ]
