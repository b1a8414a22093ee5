"""The probe types in one table (`engine.PROBE_TYPES`, engine/probes/_registry.py): each
type's parser, its http fields, the API's enums, and the database's CHECK on
``monitors.type`` held to the table (docs/development.md, "Adding a probe type")."""

from __future__ import annotations

import re
from typing import Any

import pytest
import trio
from asyncpg import Connection

from engine import PROBE_TYPES, InvalidTarget, http_fields_apply, parse_target
from store import Database
from tests.web.helpers import VALID_URLS
from web.api.monitors import MonitorCreate, MonitorObject


def test_every_type_has_an_example() -> None:
    """A type registered without a valid url in `VALID_URLS` fails here (the API tests
    create a monitor of every type from it)."""
    assert list(VALID_URLS) == list(PROBE_TYPES)


@pytest.mark.parametrize("name", list(PROBE_TYPES))
def test_each_type_is_registered_under_its_name_and_parses_its_urls(name: str) -> None:
    probe_type = PROBE_TYPES[name]
    assert probe_type.name == name
    assert re.fullmatch(r"[a-z][a-z0-9_]*", name)
    target = parse_target(name, VALID_URLS[name])
    assert target.type == name and target.url == VALID_URLS[name]
    assert probe_type.parse(VALID_URLS[name]) == target
    others = [url for other, url in VALID_URLS.items() if other != name]
    assert any(_refused(name, url) for url in others)  # the forms differ between types


def _refused(name: str, url: str) -> bool:
    try:
        parse_target(name, url)
    except InvalidTarget:
        return True
    return False


def test_an_unknown_type_is_refused_naming_every_type() -> None:
    with pytest.raises(InvalidTarget) as raised:
        parse_target("smtp", "example.com")
    assert str(raised.value) == f"type must be one of {', '.join(PROBE_TYPES)}"
    with pytest.raises(InvalidTarget, match="empty"):  # the url's own checks come first
        parse_target("smtp", "")


def test_the_http_fields_apply_to_http_alone() -> None:
    assert {name for name in PROBE_TYPES if http_fields_apply(name)} == {"http"}
    assert not http_fields_apply("smtp")
    assert not http_fields_apply("HTTP")


def test_only_dns_asks_the_nameserver() -> None:
    by_nameserver = {n for n, t in PROBE_TYPES.items() if t.resolves_with == "nameserver"}
    assert by_nameserver == {"dns"}


def test_the_api_models_enumerate_the_types_in_order() -> None:
    for model in (MonitorCreate, MonitorObject):
        schema = model.model_json_schema()["properties"]["type"]
        assert schema["enum"] == list(PROBE_TYPES)


# -- the database's CHECK --------------------------------------------------------------

_TYPE_CHECKS = """
SELECT c.conname, pg_get_constraintdef(c.oid) AS definition,
       pg_get_expr(c.conbin, c.conrelid) AS expression
FROM pg_constraint c
JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
WHERE c.conrelid = 'monitors'::regclass AND c.contype = 'c' AND a.attname = 'type'
"""


async def _check_of_monitors_type(
    connection: Connection, candidates: list[str]
) -> tuple[str, dict[str, bool]]:
    """The CHECK on ``monitors.type`` in the migrated database: its definition, and
    whether it allows each of ``candidates`` (its own expression evaluated on them)."""
    rows = await connection.fetch(_TYPE_CHECKS)
    assert len(rows) == 1, rows
    definition, expression = rows[0]["definition"], rows[0]["expression"]
    allowed: dict[str, bool] = {}
    for value in candidates:
        verdict: Any = await connection.fetchval(
            f"SELECT {expression} FROM (SELECT $1::text AS type) AS monitors", value
        )
        allowed[value] = verdict is True
    return definition, allowed


async def test_the_databases_check_allows_exactly_the_probe_types(db: Database) -> None:
    outsiders = ["smtp", "HTTP", "http ", "", "icmp"]
    with trio.fail_after(10):
        definition, allowed = await db.run(_check_of_monitors_type, [*PROBE_TYPES, *outsiders])
    in_check = set(re.findall(r"'([^']*)'", definition))
    assert in_check == set(PROBE_TYPES), (
        f"monitors.type's CHECK allows {sorted(in_check)}, the probe types are "
        f"{sorted(PROBE_TYPES)}: a probe type needs a migration changing the CHECK "
        f"(docs/development.md, 'Adding a probe type'); the CHECK: {definition}"
    )
    assert {value for value, ok in allowed.items() if ok} == set(PROBE_TYPES), allowed
