"""The pure rules of a public status page (:mod:`web.public.status_view`): component and
overall states, daily levels and percentages, generated incident texts, and the
template's colours against WCAG 2.1 AA. No database, no clock.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest

from store import IncidentRecord, page_maintenance, status_pages
from web.public.status_pages import summary_json
from web.public.status_view import (
    component_state,
    day_level,
    format_percent,
    overall_state,
    public_maintenance,
    public_message,
    public_title,
)


@pytest.mark.parametrize(
    ("status", "in_incident", "state"),
    [
        ("up", False, "operational"),
        ("up", True, "degraded"),
        ("pending", False, "unknown"),
        ("pending", True, "degraded"),
        ("down", False, "major_outage"),
        ("down", True, "major_outage"),
        ("paused", True, "paused"),
    ],
)
def test_component_state_follows_the_monitor_and_open_incidents(
    status: str, in_incident: bool, state: str
) -> None:
    assert component_state(status, in_incident) == state


@pytest.mark.parametrize("status", ["up", "down", "pending", "paused"])
@pytest.mark.parametrize("in_incident", [False, True])
def test_maintenance_wins_over_every_other_component_state(status: str, in_incident: bool) -> None:
    # a planned outage is not an outage (docs/status-pages.md, States)
    assert component_state(status, in_incident, True) == "under_maintenance"


@pytest.mark.parametrize(
    ("components", "severities", "state"),
    [
        ([], [], "operational"),
        (["operational", "paused", "unknown"], [], "operational"),
        (["operational", "degraded"], [], "degraded"),
        (["operational", "major_outage"], [], "partial_outage"),
        (["major_outage", "major_outage", "paused"], [], "major_outage"),
        (["paused", "unknown"], [], "operational"),
        (["operational"], ["minor"], "degraded"),
        (["operational"], ["maintenance"], "degraded"),
        (["operational"], ["major"], "partial_outage"),
        (["operational"], ["critical"], "major_outage"),
        (["major_outage", "operational"], ["minor"], "partial_outage"),
        # under maintenance: neither monitored nor broken; the page says so when nothing is
        (["under_maintenance", "operational", "paused"], [], "under_maintenance"),
        (["under_maintenance"], [], "under_maintenance"),
        (["under_maintenance", "degraded"], [], "degraded"),
        (["under_maintenance", "operational"], ["minor"], "degraded"),
        (["under_maintenance", "operational", "major_outage"], [], "partial_outage"),
        (["under_maintenance", "major_outage"], [], "major_outage"),
    ],
)
def test_overall_state_is_the_worst_of_components_and_open_incidents(
    components: list[str], severities: list[str], state: str
) -> None:
    assert overall_state(components, severities) == state


def test_day_levels_and_percentages_never_round_up_to_100() -> None:
    assert day_level(0, 0) == ("none", None)
    assert day_level(86_400, 0) == ("full", 100.0)
    assert day_level(86_399, 1)[0] == "partial"
    assert day_level(99, 1)[0] == "partial"
    assert day_level(98, 2)[0] == "low"
    assert format_percent(day_level(86_399, 1)[1]) == "99.99%"
    assert format_percent(100.0) == "100.00%"
    assert format_percent(99.0) == "99.00%"
    assert format_percent(None) == "no data"


def _incident(monitor_id: str | None, title: str = "db-7 is down") -> IncidentRecord:
    return IncidentRecord(
        id="inc_x",
        account_id="acct_x",
        title=title,
        description=None,
        status="investigating",
        severity="major",
        resolved_at=None,
        resolution_message=None,
        created=0,
        updated=0,
        metadata={},
        monitor_id=monitor_id,
    )


def _update(message: str | None, *, generated: bool = False, after: str | None = None) -> Any:
    return status_pages.PublicUpdate(
        status="resolved" if after else "identified",
        created=0,
        message=message,
        generated=generated,
        recovered_after=after,
    )


def test_incidents_the_engine_opened_are_told_from_the_opener_never_from_its_texts() -> None:
    names = {"mon_db": "Database"}
    # the stored title is never read: cut at 200 characters, renamed since, edited
    for title in ("n" * 200, "old-name is down", "db-7 flaps (ask on-call)"):
        assert public_title(_incident("mon_db", title), names) == "Database is down"
    assert public_title(_incident("mon_elsewhere"), names) == "A monitored service is down"
    beat = _incident("hbt_backup", "nightly-backup-secret is down")
    assert public_title(beat, names) == "A background job is down"
    manual = _incident(None, "Queue is down")
    assert public_title(manual, names) == "Queue is down"

    recovered = _update(None, generated=True, after="2h 5m")
    assert public_message(recovered, _incident("mon_db"), names) == (
        "Database is up again after 2h 5m"
    )
    assert public_message(recovered, beat, names) == "A background job is up again after 2h 5m"
    assert public_message(_update(None, generated=True), beat, names) is None
    # what a person wrote is shown as written, whatever it looks like
    for text in ("Restarted the primary.", "db-7 is up again after 5m 0s"):
        assert public_message(_update(text), _incident("mon_db"), names) == text


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[k : k + 2], 16) / 255 for k in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_state_colours_meet_wcag_aa_contrast_as_text_and_behind_white_text() -> None:
    css = resources.files("web.public").joinpath("templates/_base.html").read_text("utf-8")
    palette = dict(re.findall(r"--([a-z_]+):\s*(#[0-9a-f]{6})", css))
    assert {"operational", "degraded", "partial_outage", "major_outage", "none"} <= set(palette)
    for name, colour in palette.items():
        if name in ("bg", "border"):
            continue
        # as text on the page's background, and as the banner behind white text
        assert _contrast(colour, palette["bg"]) >= 4.5, name
        assert _contrast(colour, "#ffffff") >= 4.5, name
    assert _contrast(palette["fg"], palette["bg"]) >= 7


def test_an_occurrence_is_scheduled_in_progress_then_completed() -> None:
    m = page_maintenance.PublicMaintenance(
        title="Upgrade", description=None, starts_at=100, ends_at=200, monitors=["m2"], key="k"
    )
    components = [
        {"monitor": "m1", "name": "Website", "group": None},
        {"monitor": "m2", "name": "Database", "group": None},
    ]
    statuses = [public_maintenance(m, components, now)["status"] for now in (99, 100, 199, 200)]
    assert statuses == ["scheduled", "in_progress", "in_progress", "completed"]
    shown = public_maintenance(m, components, 150)
    assert shown["components"] == ["Database"] and "key" not in shown


def test_the_summary_json_is_byte_for_byte_what_json_dumps_writes() -> None:
    """``summary.json`` is written by pydantic-core's serializer: the bytes of
    ``json.dumps(..., separators=(",", ":"), ensure_ascii=False)`` (what it was written
    with before), for every percentage a summary can hold (the multiples of 0.001 from 0
    to 100 that ``_round`` gives, and null), integers up to epoch seconds and beyond, and
    texts with quotes, backslashes, every ASCII control character, non-ASCII letters,
    line separators and an emoji."""
    texts = [
        "".join(chr(c) for c in range(0x80)),
        'é ü 中文 \u2028 \u2029 \ufeff 😀 </script> "quoted" \\ back',
        "",
    ]
    shown = {
        "percents": [k / 1000 for k in range(100_001)] + [None],
        "texts": texts,
        "keys": {text: len(text) for text in texts},
        "numbers": [0, -1, 1_795_795_000, 2**53, 2**63 - 1],
        "flags": [True, False, None],
        "nested": [{"date": "2026-11-27", "uptime_percent": 99.305, "level": "partial"}],
    }
    expected = json.dumps(shown, separators=(",", ":"), ensure_ascii=False).encode()
    assert summary_json(shown) == expected
