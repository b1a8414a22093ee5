"""What ``uptrio`` imports before a command runs (``web/process/cli/__init__.py``): building
its parser and parsing a command's flags import none of the service's heavy parts (the
engine, the store, the API, the web server), so that ``uptrio --help`` and the commands that
the tests and the benchmark harness run dozens of times start without them; ``uptrio
serve``'s flags, whose defaults come from every package's settings, are added when
``serve`` is parsed.

Each check runs a fresh interpreter (this one has imported everything already) and reads
its ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.web.helpers import ROOT, service_env
from web.process.cli import build_parser

HEAVY = (
    "engine",
    "store",
    "web.api",
    "web.routes",
    "web.http.deps",
    "web.process.service",
    "web.process.cli.serve_flags",
    "asyncpg",
    "jwt",
    "structlog",
    "rich",
    "trio",
    "trio_asyncio",
    "quart",
    "hypercorn",
    "pydantic",
    "jinja2",
    "httpx",
    "yaml",
)
"""Packages none of which building the parser may import: ours that import the rest, and the
libraries that cost most of a start (``python -X importtime``)."""

_PARSE = """
import json, sys
from web.process.cli import build_parser
build_parser()
for argv in json.loads(sys.argv[1]):
    build_parser().parse_args(argv)
print(json.dumps(sorted(sys.modules)))
"""


def _imported(*argvs: list[str]) -> list[str]:
    """The modules a fresh interpreter holds after building the parser and parsing each
    of ``argvs``."""
    done = subprocess.run(
        [sys.executable, "-c", _PARSE, json.dumps(argvs)],
        cwd=ROOT,
        env=service_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    modules: list[str] = json.loads(done.stdout)
    return modules


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY)]


def test_building_the_parser_and_parsing_a_light_command_import_nothing_heavy() -> None:
    imported = _imported(
        ["tokens", "create", "--account", "acme", "--permissions", "all", "--data-dir", "d"],
        ["tokens", "list"],
        ["nodes", "forget", "node-a"],
        ["supervisors", "restart", "engine"],
        ["apply", "-f", "monitors.yaml", "--dry-run"],
        ["export"],
        ["import", "gatus", "config.yaml"],
    )
    assert "web.process.cli.tokens" in imported
    assert _heavy(imported) == []


def test_serve_flags_are_added_when_serve_is_parsed(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--help"])
    shown = capsys.readouterr().out
    assert "usage: uptrio serve [-h] [--log-format {json,console}]" in shown
    for flag in ("--data-dir", "--shards SHARDS", "--webhook-claim-seconds", "--ping-ack"):
        assert flag in shown, flag
    assert parser.parse_args(["serve", "--shards", "3"]).shards == 3
