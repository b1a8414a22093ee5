"""The README is part of the interface: it must list every error code the code has."""

from __future__ import annotations

from pathlib import Path

from engine.probes import ERROR_CODES
from web.errors import CODES

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_readme_lists_every_api_error_code() -> None:
    missing = [code for code in CODES if f"`{code}`" not in README]
    assert not missing


def test_readme_lists_every_check_error_code() -> None:
    missing = [code for code in ERROR_CODES if f"`{code}`" not in README]
    assert not missing


def test_readme_opens_with_the_two_commands() -> None:
    block = README.split("```sh", 1)[1].split("```", 1)[0].strip().splitlines()
    assert [line.split()[0:2] for line in block] == [["make", "serve"], ["make", "test"]]
