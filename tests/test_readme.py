"""The documentation is part of the interface: it must list every error code the code has.

The README opens with the two commands; the codes may be documented in README.md or in any
page of ``docs/`` (the tables live in ``docs/api.md`` and ``docs/checks.md``).
"""

from __future__ import annotations

from pathlib import Path

from engine.probes import ERROR_CODES
from web.http.errors import CODES

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
DOCUMENTATION = "\n".join(
    [README, *(page.read_text() for page in sorted((ROOT / "docs").glob("*.md")))]
)


def test_documentation_lists_every_api_error_code() -> None:
    missing = [code for code in CODES if f"`{code}`" not in DOCUMENTATION]
    assert not missing


def test_documentation_lists_every_check_error_code() -> None:
    missing = [code for code in ERROR_CODES if f"`{code}`" not in DOCUMENTATION]
    assert not missing


def test_readme_opens_with_the_two_commands() -> None:
    block = README.split("```sh", 1)[1].split("```", 1)[0].strip().splitlines()
    assert [line.split()[0:2] for line in block] == [["make", "serve"], ["make", "test"]]
