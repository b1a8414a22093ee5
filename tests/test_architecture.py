"""``docs/architecture.md`` stays true: every file and folder it names exists, and the
registries it describes hold what it says (the kinds, the probe types, the actors in
their order)."""

from __future__ import annotations

import re
from pathlib import Path

from engine import PROBE_TYPES
from engine.kinds import KINDS
from web.process.actors import ACTORS

_ROOT = Path(__file__).resolve().parent.parent
_PAGE = (_ROOT / "docs" / "architecture.md").read_text()
_PATH = re.compile(r"`((?:store|engine|web|bench|tests|docs)/[\w/.]*?)(?::\w+)?`")


def _tree_paths() -> list[str]:
    """The paths of the page's tree drawing: a folder's files on its lines."""
    drawing = _PAGE.split("```", 2)[1]
    paths, top, sub = [], "", ""
    for line in drawing.splitlines():
        words = line.split()
        if not words:
            continue
        if not line.startswith(" ") and words[0].endswith("/"):
            top, sub = words[0], ""
            paths.append(top)
            continue
        if words[0].endswith("/") and not words[0].endswith(".py"):
            sub = words[0]
            paths.append(top + sub)
            words = words[1:]
        else:
            sub = ""
        for word in words:
            if not word.endswith(".py"):
                break
            paths.append(top + sub + word)
    return paths


def test_every_path_it_names_exists() -> None:
    named = set(_PATH.findall(_PAGE)) | set(_tree_paths())
    assert len(named) > 40
    missing = sorted(p for p in named if not (_ROOT / p).exists())
    assert missing == []


def test_the_registries_hold_what_it_says() -> None:
    prefixes = [kind.__name__ for kind in KINDS]
    assert prefixes == ["MonitorKind", "HeartbeatKind"]
    assert "monitors and heartbeats today" in _PAGE
    assert list(PROBE_TYPES) == ["http", "tcp", "dns", "ping"]
    assert "`http`, `tcp`, `dns`, `ping`" in _PAGE
    order = ", ".join(actor.name for actor in ACTORS)
    assert f"each once the one before is ready: {order}." in " ".join(_PAGE.split())
