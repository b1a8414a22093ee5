"""The pure rules of a public status page (:mod:`web.status_view`): component and
overall states, daily levels and percentages, generated incident texts, and the
template's colours against WCAG 2.1 AA. No database, no clock.
"""

from __future__ import annotations

import re
from importlib import resources

import pytest

from store import IncidentRecord
from web.status_view import (
    component_state,
    day_level,
    format_percent,
    overall_state,
    public_text,
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


def _incident(monitor_id: str | None) -> IncidentRecord:
    return IncidentRecord(
        id="inc_x",
        account_id="acct_x",
        title="t",
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


def test_generated_incident_texts_name_the_component_not_the_monitor() -> None:
    opened = _incident("mon_x")
    assert public_text("db-7 is down", opened, "Database", "db-7", title=True) == (
        "Database is down"
    )
    # a monitor renamed since: the old name in the title goes too
    assert public_text("old-name is down", opened, "Database", "db-7", title=True) == (
        "Database is down"
    )
    long_name = "n" * 199
    cut = (long_name + " is down")[:200]
    assert public_text(cut, opened, "Database", long_name, title=True) == "Database is down"
    assert public_text("db-7 is up again after 2h 5m", opened, "Database", None) == (
        "Database is up again after 2h 5m"
    )
    assert public_text("Restarted the primary.", opened, "Database", "db-7") == (
        "Restarted the primary."
    )
    assert public_text("The db is down", opened, "Database", "db-7") == "The db is down"
    manual = _incident(None)
    assert public_text("Queue is down", manual, "Database", None, title=True) == "Queue is down"


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[k : k + 2], 16) / 255 for k in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_state_colours_meet_wcag_aa_contrast_as_text_and_behind_white_text() -> None:
    css = resources.files("web").joinpath("templates/_base.html").read_text("utf-8")
    palette = dict(re.findall(r"--([a-z_]+):\s*(#[0-9a-f]{6})", css))
    assert {"operational", "degraded", "partial_outage", "major_outage", "none"} <= set(palette)
    for name, colour in palette.items():
        if name in ("bg", "border"):
            continue
        # as text on the page's background, and as the banner behind white text
        assert _contrast(colour, palette["bg"]) >= 4.5, name
        assert _contrast(colour, "#ffffff") >= 4.5, name
    assert _contrast(palette["fg"], palette["bg"]) >= 7
