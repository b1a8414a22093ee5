"""``uptrio bench history``: how fast availability is answered over long histories, and what
history costs on disk (docs/history.md; bench/RESULTS.md, History).

It makes a data directory, lets ``uptrio tokens create`` start the embedded Postgres and
migrate it (and mint the token the queries use), bulk-loads a synthetic history with SQL
as an operator would: ``--monitors`` monitors, ``--days`` days of hourly rollups (sparse
histograms of a few buckets around 0.3 ms, a 2 % share of failed checks, one down period
of 10 minutes a day in the log of status moves and in the rollups' seconds) and
``--raw-days`` days of raw checks every ``--raw-interval`` seconds, then starts
``uptrio serve --no-engine`` on it and times, from the client, ``GET
/monitors/:id/availability`` over 1, 30, 90 and 400 days, with and without
``granularity=day`` (``--requests`` per case, random monitors, one at a time). With
``--maintenance``, every monitor is also covered by a daily one-hour maintenance window
with ``exclude_from_availability`` (02:30 to 03:30 UTC, over the daily down period; one
window per 1,000 monitors, its occurrences as rows over the whole history and 35 days
ahead), so each answer takes its ``maintenance_seconds`` apart (docs/history.md,
Maintenance); the report then gives a 90-day answer's figures as proof. Last, it
reports bytes on disk per raw check and per rollup row (table and indexes,
``pg_total_relation_size``) and times the drop of one day's partition as the maintenance
actor drops it (``DETACH PARTITION ... CONCURRENTLY``, then ``DROP TABLE``).

Black-box: the ``uptrio`` command, HTTP and SQL only.
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import trio
import trio_asyncio

from .service import (
    BenchDatabase,
    mint_tokens,
    open_bench_database,
    run_service_process,
    serve_command,
)

__all__ = ["load_history", "load_maintenance", "print_history", "run_history_bench"]

DAY = 86_400
_LOAD_SECONDS = 3600.0
"""The bound of one bulk-load statement, seconds (tens of millions of rows)."""
RANGES_DAYS = (1, 30, 90, 400)
WINDOW_MONITORS = 1000
"""Monitors per maintenance window (the API's most)."""
_HORIZON_SECONDS = 35 * DAY
"""How far ahead the service keeps occurrences as rows (docs/maintenance.md)."""


async def load_history(
    bench_db: BenchDatabase, monitors: int, days: int, raw_days: int, raw_interval: int, now: int
) -> dict[str, float]:
    """Bulk-load the synthetic history of the module docstring (``monitors`` paused
    monitors ``mon_hist…`` named ``history <k>``); returns the seconds each part took."""
    took: dict[str, float] = {}
    first_hour = now - now % 3600 - days * DAY
    start = first_hour - 3600

    async def step(name: str, sql: str, *args: Any) -> None:
        began = time.perf_counter()

        async def run(connection: Any) -> None:
            await connection.execute(sql, *args)

        await bench_db.run(run, timeout_seconds=_LOAD_SECONDS)
        took[name] = round(time.perf_counter() - began, 2)

    await step(
        "monitors",
        "INSERT INTO monitors (id, account_id, name, url, type, status, interval_seconds, "
        "timeout_seconds, failure_threshold, success_threshold, created, updated, metadata, "
        "status_since) SELECT 'mon_hist' || lpad(k::text, 20, '0'), "
        "(SELECT id FROM accounts WHERE name = 'bench'), 'history ' || k, '127.0.0.1:1', "
        "'tcp', 'paused', 60, 5, 2, 1, $1, $1, '{}', $2 FROM generate_series(1, $3) AS k",
        start,
        now,
        monitors,
    )
    # One rollup row per monitor-hour: 60 checks, 2 % failed, 10 minutes down at 03:00.
    await step(
        "rollups",
        "INSERT INTO check_rollups (monitor_id, hour, checks, failed_checks, up_seconds, "
        "down_seconds, paused_seconds, response_time_sum_ms, histogram) "
        "SELECT m.id, h, 60, (random() < 0.5)::int * 2, "
        "CASE WHEN h % 86400 = 10800 THEN 3000 ELSE 3600 END, "
        "CASE WHEN h % 86400 = 10800 THEN 600 ELSE 0 END, 0, 18.0, "
        "ARRAY[148 * 65536 + 5, 150 * 65536 + 20, 152 * 65536 + 25, 154 * 65536 + 8, "
        "160 * 65536 + 2] FROM monitors m, "
        "generate_series($1::bigint, $2::bigint - 3600, 3600) AS h "
        "WHERE m.id LIKE 'mon_hist%'",
        first_hour,
        now - now % 3600,
    )
    await step(  # what the store's writes keep beside the hourly rows (store.rollups)
        "daily rollups",
        "INSERT INTO daily_rollups (monitor_id, day, up_seconds, down_seconds, "
        "paused_seconds) SELECT monitor_id, hour - hour % 86400, sum(up_seconds)::int, "
        "sum(down_seconds)::int, sum(paused_seconds)::int FROM check_rollups "
        "WHERE monitor_id LIKE 'mon_hist%' GROUP BY 1, 2",
    )
    await step(
        "status moves",
        "INSERT INTO status_changes (monitor_id, check_id, from_status, to_status, created) "
        "SELECT m.id, NULL, s.f, s.t, d + s.o FROM monitors m, "
        "generate_series($1::bigint, $2::bigint, 86400) AS d, "
        "(VALUES ('up', 'down', 10800), ('down', 'up', 11400)) AS s(f, t, o) "
        "WHERE m.id LIKE 'mon_hist%' ORDER BY 5",
        first_hour - first_hour % DAY,
        now,
    )
    raw_from = now - raw_days * DAY

    async def partitions(connection: Any) -> None:
        await connection.execute(
            "SELECT ensure_check_partitions($1, $2, 86400)", raw_from, now + DAY
        )

    await bench_db.run(partitions)
    await step(
        "raw checks",
        "INSERT INTO checks (created, response_time_ms, status_code, monitor_id, id, status) "
        "SELECT t, 0.25 + random() * 0.2, NULL, m.id, "
        "'chk_' || substr(md5(m.id || t), 1, 24), 'up' FROM monitors m, "
        "generate_series($1::bigint, $2::bigint, $3::bigint) AS t WHERE m.id LIKE 'mon_hist%'",
        raw_from,
        now - 1,
        raw_interval,
    )
    await step("analyze", "ANALYZE")
    return took


async def load_maintenance(bench_db: BenchDatabase, monitors: int, days: int, now: int) -> float:
    """Cover the ``monitors`` of :func:`load_history` with daily one-hour windows with
    ``exclude_from_availability`` (02:30 to 03:30 UTC, recurring from the first day of the
    history), their occurrences as rows up to 35 days after ``now``, the past ones marked
    handled; returns the seconds it took."""
    first_day = now - now % DAY - (days + 1) * DAY
    start = datetime.fromtimestamp(first_day + 9000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    recurrence = {
        "rrule": "FREQ=DAILY",
        "time_zone": "UTC",
        "start": start,
        "duration_seconds": 3600,
    }
    window = "'mnt_hist' || lpad(((k - 1) / $1 + 1)::text, 20, '0')"
    began = time.perf_counter()

    async def load(connection: Any) -> None:
        await connection.execute(
            "INSERT INTO maintenance_windows (id, account_id, title, recurrence, "
            "materialized_until, created, updated) "
            f"SELECT {window}, (SELECT id FROM accounts WHERE name = 'bench'), "
            "'nightly ' || k, $2::jsonb, $3, $4, $4 "
            "FROM generate_series(1, $5, $1) AS k",
            WINDOW_MONITORS,
            json.dumps(recurrence),
            now + _HORIZON_SECONDS,
            first_day,
            monitors,
        )
        await connection.execute(
            "INSERT INTO maintenance_window_resources (window_id, resource_id, position) "
            f"SELECT {window}, 'mon_hist' || lpad(k::text, 20, '0'), (k - 1) % $1 + 1 "
            "FROM generate_series(1, $2) AS k",
            WINDOW_MONITORS,
            monitors,
        )
        await connection.execute(
            "INSERT INTO maintenance_occurrences (window_id, starts_at, ends_at, "
            "start_handled, end_handled) SELECT w.id, d + 9000, d + 12600, d + 9000 <= $3, "
            "d + 12600 <= $3 FROM maintenance_windows w, "
            "generate_series($1::bigint, $2::bigint, 86400) AS d WHERE w.id LIKE 'mnt_hist%'",
            first_day,
            now + _HORIZON_SECONDS - 12600,
            now,
        )
        await connection.execute(
            "ANALYZE maintenance_windows, maintenance_window_resources, maintenance_occurrences"
        )

    await bench_db.run(load, timeout_seconds=_LOAD_SECONDS)
    return round(time.perf_counter() - began, 2)


async def _maintenance_check(base_url: str, token: str, now: int) -> dict[str, int]:
    """One 90-day answer's seconds: proof that the windows were read (docs/history.md)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as client:
        response = await client.get(
            f"/monitors/mon_hist{'1'.zfill(20)}/availability",
            params={"start": now - 90 * DAY, "end": now},
        )
    if response.status_code != 200:
        raise RuntimeError(f"availability answered {response.status_code}: {response.text[:300]}")
    body = response.json()
    names = ("up_seconds", "down_seconds", "paused_seconds", "unknown_seconds")
    found = {name: int(body[name]) for name in (*names, "maintenance_seconds")}
    if found["maintenance_seconds"] <= 0 or sum(found.values()) != 90 * DAY:
        raise RuntimeError(f"the 90-day answer does not take maintenance apart: {found}")
    return found


async def _sizes(bench_db: BenchDatabase) -> dict[str, float]:
    async def query(connection: Any) -> Any:
        return await connection.fetchrow(
            "SELECT (SELECT sum(pg_total_relation_size(name::regclass)) "
            "FROM check_partition_bounds()) AS checks_bytes, "
            "(SELECT count(*) FROM checks) AS checks_rows, "
            "pg_total_relation_size('check_rollups') AS rollup_bytes, "
            "(SELECT count(*) FROM check_rollups) AS rollup_rows"
        )

    row = await bench_db.run(query, timeout_seconds=_LOAD_SECONDS)
    checks_rows, rollup_rows = max(1, int(row["checks_rows"])), max(1, int(row["rollup_rows"]))
    return {
        "raw_check_rows": int(row["checks_rows"]),
        "bytes_per_raw_check": round(int(row["checks_bytes"]) / checks_rows, 1),
        "rollup_rows": int(row["rollup_rows"]),
        "bytes_per_rollup_row": round(int(row["rollup_bytes"]) / rollup_rows, 1),
    }


async def _drop_one_partition(bench_db: BenchDatabase) -> dict[str, Any]:
    async def oldest(connection: Any) -> Any:
        return await connection.fetchrow(
            "SELECT name, (SELECT count(*) FROM checks WHERE created >= range_from "
            "AND created < range_to) AS n FROM check_partition_bounds() "
            "ORDER BY range_from LIMIT 1"
        )

    row = await bench_db.run(oldest)
    began = time.perf_counter()

    async def drop(connection: Any) -> None:
        await connection.execute(
            f'ALTER TABLE checks DETACH PARTITION "{row["name"]}" CONCURRENTLY'
        )
        await connection.execute(f'DROP TABLE "{row["name"]}"')

    await bench_db.run(drop, timeout_seconds=_LOAD_SECONDS)
    return {
        "partition": row["name"],
        "rows": int(row["n"]),
        "seconds": round(time.perf_counter() - began, 3),
    }


async def _time_queries(
    base_url: str, token: str, monitors: int, requests: int, now: int, seed: int
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as client:
        for days in RANGES_DAYS:
            for granularity in (None, "day"):
                latencies = []
                for _ in range(requests):
                    mid = "mon_hist" + str(rng.randint(1, monitors)).zfill(20)
                    query: dict[str, Any] = {"start": now - days * DAY, "end": now}
                    if granularity:
                        query["granularity"] = granularity
                    began = time.perf_counter()
                    response = await client.get(f"/monitors/{mid}/availability", params=query)
                    latencies.append((time.perf_counter() - began) * 1000)
                    if response.status_code != 200:
                        raise RuntimeError(
                            f"availability answered {response.status_code}: {response.text[:300]}"
                        )
                latencies.sort()
                rows.append(
                    {
                        "days": days,
                        "granularity": granularity or "-",
                        "p50_ms": round(statistics.median(latencies), 2),
                        "p99_ms": round(latencies[max(0, int(len(latencies) * 0.99) - 1)], 2),
                        "max_ms": round(latencies[-1], 2),
                    }
                )
    return rows


async def run_history_bench(
    monitors: int,
    days: int,
    raw_days: int,
    raw_interval: int,
    requests: int,
    output: Path,
    seed: int,
    maintenance: bool = False,
) -> dict[str, Any]:
    """The whole history benchmark (module docstring; ``maintenance``: with the daily
    windows); returns the report, also written to ``output/history.json``."""
    await trio.Path(output).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="uptrio-history-") as tmp:
        data_dir = Path(tmp)
        now = int(time.time())
        async with trio_asyncio.open_loop(), open_bench_database(data_dir, None) as bench_db:
            (token,) = await mint_tokens(data_dir, None, "bench", 1)  # migrates, too
            took = await load_history(bench_db, monitors, days, raw_days, raw_interval, now)
            if maintenance:
                took["maintenance windows"] = await load_maintenance(bench_db, monitors, days, now)
            sizes = await _sizes(bench_db)
            command = serve_command(data_dir, "--no-engine", log_level="warning")
            async with run_service_process(command, output / "service.log") as service:
                queries = await _time_queries(
                    service.base_url, token, monitors, requests, int(time.time()), seed
                )
                check = (
                    await _maintenance_check(service.base_url, token, int(time.time()))
                    if maintenance
                    else None
                )
                service.terminate()
                await service.wait_stopped()
            dropped = await _drop_one_partition(bench_db)
    report = {
        "load": {
            "monitors": monitors,
            "rollup_days": days,
            "raw_days": raw_days,
            "raw_interval_seconds": raw_interval,
            "maintenance": maintenance,
            "seconds": took,
        },
        "maintenance_check": check,
        "sizes": sizes,
        "availability": queries,
        "drop_partition": dropped,
    }
    await trio.Path(output / "history.json").write_text(json.dumps(report, indent=2))
    return report


def print_history(report: dict[str, Any]) -> None:
    """The report as plain text tables on stdout."""
    load, sizes = report["load"], report["sizes"]
    print(
        f"history: {load['monitors']:,} monitors, {load['rollup_days']} days of hourly "
        f"rollups, {load['raw_days']} days of raw checks every {load['raw_interval_seconds']} s"
    )
    print(f"loaded in {load['seconds']} s")
    if report.get("maintenance_check"):
        print(
            "with a daily 1-hour maintenance window over every monitor; one 90-day answer: "
            f"{report['maintenance_check']}"
        )
    print(
        f"bytes per raw check {sizes['bytes_per_raw_check']} ({sizes['raw_check_rows']:,} "
        f"rows); per rollup row {sizes['bytes_per_rollup_row']} ({sizes['rollup_rows']:,} rows)"
    )
    print("availability, one monitor: range days | granularity | p50 ms | p99 ms | max ms")
    for row in report["availability"]:
        print(
            f"  {row['days']:>4} | {row['granularity']:>5} | {row['p50_ms']:>7} | "
            f"{row['p99_ms']:>7} | {row['max_ms']:>7}"
        )
    drop = report["drop_partition"]
    print(f"drop one day's partition ({drop['rows']:,} rows): {drop['seconds']} s")
