"""The http monitor fields of docs/checks.md (Assertions and TLS expiry, Private certificate
authorities) through the API: ``request_headers``, ``request_body``, ``assertions``,
``tls_expiry_days``, ``tls_verify`` and ``tls_ca_bundle`` (defaults, null on other types,
the 422s of docs/api.md, Error codes, PATCH rules), ``tls_expires_at`` on checks, and the
migration that gives existing monitors the defaults. (Null on the other types:
tests/web/test_monitors.py.)
"""

from __future__ import annotations

from typing import Any

import trio
import trustme

from engine.kinds.monitors import same_settings
from store import CheckRecord, Database, apply_migrations, checks, monitors, new_id, open_database
from tests.api import Api
from tests.web.helpers import assert_error, create_monitor, expect
from web.api.history import CheckList
from web.api.monitors import MonitorObject

HTTPS = {"name": "api", "type": "http", "url": "https://example.com/health"}
PLAIN = {"name": "api", "type": "http", "url": "http://example.com/health"}
DEGRADED = {
    "source": "json_body",
    "property": "$.status",
    "comparison": "equals",
    "target": "ok",
}


async def test_http_defaults_and_round_trip(api: Api) -> None:
    with trio.fail_after(10):
        https = await create_monitor(api, **HTTPS)
        assert https["request_headers"] == {} and https["request_body"] is None
        assert https["assertions"] == [] and https["tls_expiry_days"] == 14
        plain = await create_monitor(api, **PLAIN)
        assert plain["tls_expiry_days"] is None
        full = await create_monitor(
            api,
            **HTTPS,
            method="POST",
            request_headers={"Content-Type": "application/json", "X-Api-Key": "k"},
            request_body='{"ping": true}',
            assertions=[
                DEGRADED,
                {"source": "status_code", "comparison": "less_than", "target": 400},
                {"source": "header", "property": "ETag", "comparison": "is_not_empty"},
            ],
            tls_expiry_days=30,
        )
        assert full["request_headers"] == {"Content-Type": "application/json", "X-Api-Key": "k"}
        assert full["request_body"] == '{"ping": true}'
        assert full["assertions"] == [
            DEGRADED,
            {"source": "status_code", "property": None, "comparison": "less_than", "target": 400},
            {"source": "header", "property": "ETag", "comparison": "is_not_empty", "target": None},
        ]
        assert full["tls_expiry_days"] == 30
        assert expect(await api.get(f"/monitors/{full['id']}")) == full
        explicit_null = await create_monitor(api, **HTTPS, tls_expiry_days=None)
        assert explicit_null["tls_expiry_days"] is None


async def test_validation_errors(api: Api) -> None:
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"request_headers": {"Host": "evil.example"}}, "request_header_not_allowed", "Host"),
        ({"request_headers": {"transfer-encoding": "chunked"}}, "request_header_not_allowed", ""),
        ({"request_headers": {"X-A": "1\r\nX-B: 2"}}, "invalid_request_header", "X-A"),
        ({"request_headers": {"X A": "1"}}, "invalid_request_header", "X A"),
        ({"request_headers": {"X-A": "1", "x-a": "2"}}, "invalid_request_header", "twice"),
        ({"request_headers": {f"X-{i}": "1" for i in range(21)}}, "value_too_long", "20"),
        ({"request_headers": {"X-A": 1}}, "invalid_type", "request_headers.X-A"),
        ({"request_headers": ["X-A"]}, "invalid_type", "request_headers"),
        ({"request_body": "x" * 10_001}, "value_too_long", "10000"),
        ({"request_body": 5}, "invalid_type", "request_body"),
        ({"assertions": [DEGRADED] * 21}, "value_too_long", "20"),
        ({"assertions": [{**DEGRADED, "property": "$.a["}]}, "invalid_jsonpath", "assertions[0]"),
        ({"assertions": [{**DEGRADED, "property": "status"}]}, "invalid_jsonpath", "$"),
        (
            {"assertions": [DEGRADED, {**DEGRADED, "comparison": "matches"}]},
            "invalid_value",
            "assertions[1].comparison",
        ),
        ({"assertions": [{**DEGRADED, "source": "xml"}]}, "invalid_value", "assertions[0].source"),
        ({"assertions": [{**DEGRADED, "extra": 1}]}, "parameter_unknown", "assertions[0].extra"),
        ({"assertions": [{"source": "body", "target": "x"}]}, "parameter_missing", "comparison"),
        (
            {"assertions": [{"source": "body", "comparison": "equals"}]},
            "invalid_assertion",
            "assertions[0]: equals needs a target",
        ),
        (
            {"assertions": [{"source": "status_code", "comparison": "equals", "target": "200"}]},
            "invalid_assertion",
            "needs a number",
        ),
        (
            {"assertions": [{"source": "header", "comparison": "equals", "target": "x"}]},
            "invalid_assertion",
            "needs a property",
        ),
        ({"assertions": {"source": "body"}}, "invalid_type", "assertions"),
        ({"tls_expiry_days": 366}, "value_out_of_range", "365"),
        ({"tls_expiry_days": -1}, "value_out_of_range", "0"),
        ({"tls_expiry_days": 1.5}, "invalid_type", "tls_expiry_days"),
    ]
    with trio.fail_after(20):
        monitor = await create_monitor(api, **HTTPS)
        for fields, code, words in cases:
            param = next(iter(fields))
            error = assert_error(
                await api.post("/monitors", json={**HTTPS, **fields}), 422, code, param=param
            )
            assert words in error["message"], (fields, error)
            error = assert_error(
                await api.patch(f"/monitors/{monitor['id']}", json=fields), 422, code, param=param
            )
            assert words in error["message"], (fields, error)
        assert_error(
            await api.post("/monitors", json={**HTTPS, "request_body": "nul\u0000"}),
            422,
            "invalid_value",
            param="request_body",
        )


async def test_patch_rules(api: Api) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(
            api,
            **HTTPS,
            request_headers={"X-A": "1"},
            request_body="b",
            assertions=[DEGRADED],
        )
        mid = monitor["id"]
        # null empties the collections and clears the body and the expiry check
        cleared = expect(
            await api.patch(
                f"/monitors/{mid}",
                json={
                    "request_headers": None,
                    "request_body": None,
                    "assertions": None,
                    "tls_expiry_days": None,
                },
            )
        )
        MonitorObject.model_validate(cleared)
        assert cleared["request_headers"] == {} and cleared["assertions"] == []
        assert cleared["request_body"] is None and cleared["tls_expiry_days"] is None
        # the same values again change nothing (updated stays)
        again = expect(
            await api.patch(f"/monitors/{mid}", json={"assertions": [], "request_headers": {}})
        )
        assert again == cleared
        # url to the other scheme: that scheme's default, unless the PATCH sends one
        moved = expect(await api.patch(f"/monitors/{mid}", json={"url": "http://example.com/"}))
        assert moved["tls_expiry_days"] is None
        moved = expect(await api.patch(f"/monitors/{mid}", json={"url": "https://example.com/"}))
        assert moved["tls_expiry_days"] == 14
        kept = expect(
            await api.patch(
                f"/monitors/{mid}", json={"url": "http://example.com/", "tls_expiry_days": 7}
            )
        )
        assert kept["tls_expiry_days"] == 7
        same_scheme = expect(
            await api.patch(f"/monitors/{mid}", json={"url": "http://example.org/"})
        )
        assert same_scheme["tls_expiry_days"] == 7
        # events carry the change like any other field
        events = expect(await api.get("/events", query={"type": "monitor.updated", "limit": 1}))
        previous = events["data"][0]["data"]["previous_attributes"]
        assert previous == {"url": "http://example.com/"}


async def test_checks_show_tls_expires_at(api: Api, db: Database) -> None:
    with trio.fail_after(10):
        monitor = await create_monitor(api, **HTTPS)
        record = CheckRecord(
            id=new_id("chk"),
            monitor_id=monitor["id"],
            status="down",
            response_time_ms=3.5,
            status_code=200,
            error_code="tls_expiring",
            error_message="the TLS certificate of example.com expires on ...",
            created=1_000,
            tls_expires_at=1_000 + 3 * 86_400,
        )
        await db.run(checks.ensure_partitions, 1_000, 1_000, 86_400)
        await db.transaction(checks.write_check_batch, [record], [])
        page = expect(await api.get(f"/monitors/{monitor['id']}/checks"))
        CheckList.model_validate(page)
        [check] = page["data"]
        assert check["tls_expires_at"] == 1_000 + 3 * 86_400
        assert check["error"] == {"code": "tls_expiring", "message": record.error_message}


async def insert_old_monitors(connection: Any, *monitors: tuple[str, str, str]) -> None:
    """An account and its ``monitors`` ``(id, type, url)``, inserted with the columns of
    the first schema only, as monitors stored before a migration are."""
    await connection.execute(
        "INSERT INTO accounts (id, name, created) VALUES ('acct_old', 'old', 1)"
    )
    for mid, kind, url in monitors:
        await connection.execute(
            "INSERT INTO monitors (id, account_id, name, url, type, status, "
            "interval_seconds, timeout_seconds, created, updated) VALUES ($1, "
            "'acct_old', 'm', $2, $3, 'pending', 60, 5, 1, 1)",
            mid,
            url,
            kind,
        )


async def test_the_migration_gives_existing_monitors_the_defaults(empty_database_url: str) -> None:
    with trio.fail_after(30):
        async with open_database(empty_database_url, min_size=1, max_size=2) as db:
            await db.run(apply_migrations, 5)
            await db.run(
                insert_old_monitors,
                ("mon_s", "http", "HTTPS://example.com/"),
                ("mon_p", "http", "http://example.com/"),
                ("mon_t", "tcp", "example.com:5432"),
            )
            assert await db.run(apply_migrations, 6) == ["0006_assertions_tls.sql"]

            async def fields(connection: Any) -> dict[str, tuple[Any, ...]]:
                rows = await connection.fetch(
                    "SELECT id, request_headers, request_body, assertions, tls_expiry_days "
                    "FROM monitors"
                )
                return {r["id"]: tuple(r.values())[1:] for r in rows}

            assert await db.run(fields) == {
                "mon_s": ({}, None, [], 14),
                "mon_p": ({}, None, [], None),
                "mon_t": (None, None, None, None),
            }


# -- private certificate authorities: tls_verify and tls_ca_bundle ------------------------


BUNDLE = trustme.CA().cert_pem.bytes().decode("ascii")
"""A CA certificate, as the PEM text a monitor's ``tls_ca_bundle`` holds."""


async def test_tls_verify_and_ca_bundle_defaults_and_round_trip(api: Api, db: Database) -> None:
    with trio.fail_after(10):
        plain = await create_monitor(api, **HTTPS)
        assert plain["tls_verify"] is True and plain["tls_ca_bundle"] is None
        own = await create_monitor(api, **HTTPS, tls_ca_bundle=BUNDLE)
        assert own["tls_verify"] is True and own["tls_ca_bundle"] == BUNDLE
        off = await create_monitor(api, **PLAIN, tls_verify=False)
        assert off["tls_verify"] is False and off["tls_ca_bundle"] is None
        assert (await create_monitor(api, **HTTPS, tls_verify=None))["tls_verify"] is True
        assert expect(await api.get(f"/monitors/{own['id']}")) == own
        # the bundle is public CA certificates: the events (and webhooks) show it
        events = expect(await api.get("/events", query={"type": "monitor.created", "limit": 3}))
        shown = {e["data"]["object"]["id"]: e["data"]["object"] for e in events["data"]}
        assert shown[own["id"]]["tls_ca_bundle"] == BUNDLE
        assert shown[off["id"]]["tls_verify"] is False
        # other types: null, and a value is refused
        tcp = await create_monitor(api, name="db", type="tcp", url="example.com:5432")
        assert tcp["tls_verify"] is None and tcp["tls_ca_bundle"] is None
        for field, value in (("tls_verify", True), ("tls_ca_bundle", BUNDLE)):
            sent = {"name": "db", "type": "tcp", "url": "example.com:5432", field: value}
            assert_error(await api.post("/monitors", json=sent), 422, "invalid_value", param=field)
            assert_error(
                await api.patch(f"/monitors/{tcp['id']}", json={field: value}),
                422,
                "invalid_value",
                param=field,
            )
        # the settings digest the engine reconciles by moves with each of them
        record = await db.run(monitors.get_monitor, None, own["id"])
        assert record is not None
        for change in ({"tls_verify": False}, {"tls_ca_bundle": None}):
            expect(await api.patch(f"/monitors/{own['id']}", json=change))
            changed = await db.run(monitors.get_monitor, None, own["id"])
            assert changed is not None and changed.settings_digest != record.settings_digest
            assert not same_settings(record, changed)
            record = changed


async def test_a_ca_bundle_that_does_not_parse_is_a_422_naming_it(api: Api) -> None:
    lines = BUNDLE.splitlines()
    cases: list[tuple[Any, str, str]] = [
        ("", "invalid_ca_bundle", "holds no certificate"),
        ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----", "invalid_ca_bundle", "1"),
        ("\n".join([*lines[:2], "!" + lines[2][1:], *lines[3:]]), "invalid_ca_bundle", "parse"),
        (BUNDLE + "-----BEGIN PRIVATE KEY-----\n", "invalid_ca_bundle", "private key"),
        (BUNDLE + "#" * 65_536, "value_too_long", "65536"),
        (["a"], "invalid_type", "tls_ca_bundle"),
    ]
    with trio.fail_after(10):
        monitor = await create_monitor(api, **HTTPS)
        for value, code, words in cases:
            for response in (
                await api.post("/monitors", json={**HTTPS, "tls_ca_bundle": value}),
                await api.patch(f"/monitors/{monitor['id']}", json={"tls_ca_bundle": value}),
            ):
                error = assert_error(response, 422, code, param="tls_ca_bundle")
                assert words in error["message"] and "tls_ca_bundle" in error["message"], error
        for value in ("yes", 1, None):
            assert_error(
                await api.patch(f"/monitors/{monitor['id']}", json={"tls_verify": value}),
                422,
                "invalid_type",
                param="tls_verify",
            )
        assert expect(await api.get(f"/monitors/{monitor['id']}")) == monitor


async def test_tls_settings_survive_a_change_of_scheme(api: Api) -> None:
    """Unlike ``tls_expiry_days``: they apply to every https connection of a check, an
    http url's redirects to https included."""
    with trio.fail_after(10):
        monitor = await create_monitor(api, **HTTPS, tls_verify=False, tls_ca_bundle=BUNDLE)
        mid = monitor["id"]
        moved = expect(await api.patch(f"/monitors/{mid}", json={"url": "http://example.com/"}))
        assert moved["tls_expiry_days"] is None
        assert moved["tls_verify"] is False and moved["tls_ca_bundle"] == BUNDLE
        back = expect(await api.patch(f"/monitors/{mid}", json={"url": "https://example.com/"}))
        assert back["tls_verify"] is False and back["tls_ca_bundle"] == BUNDLE
        cleared = expect(
            await api.patch(f"/monitors/{mid}", json={"tls_verify": True, "tls_ca_bundle": None})
        )
        assert cleared["tls_verify"] is True and cleared["tls_ca_bundle"] is None
        events = expect(await api.get("/events", query={"type": "monitor.updated", "limit": 1}))
        previous = events["data"][0]["data"]["previous_attributes"]
        assert previous == {"tls_verify": False, "tls_ca_bundle": BUNDLE}


async def test_the_tls_migration_gives_existing_http_monitors_verification(
    empty_database_url: str,
) -> None:
    with trio.fail_after(30):
        async with open_database(empty_database_url, min_size=1, max_size=2) as db:
            await db.run(apply_migrations, 13)
            await db.run(
                insert_old_monitors,
                ("mon_s", "http", "https://example.com/"),
                ("mon_t", "tcp", "example.com:5432"),
            )
            assert await db.run(apply_migrations, 14) == ["0014_tls_verification.sql"]

            async def fields(connection: Any) -> dict[str, tuple[Any, ...]]:
                rows = await connection.fetch("SELECT id, tls_verify, tls_ca_bundle FROM monitors")
                return {r["id"]: (r["tls_verify"], r["tls_ca_bundle"]) for r in rows}

            assert await db.run(fields) == {"mon_s": (True, None), "mon_t": (None, None)}
