"""Code cites only what a reader of the repository has (docs/development.md, The test suite).

Docstrings, comments and the texts of tests say where a rule comes from by naming the
repository's own documentation (a README section, a page of ``docs/``, ``bench/RESULTS.md``)
or a public one (an RFC, a provider's API reference). This test walks the ``.py`` files of
:data:`CHECKED_PACKAGES` and fails, listing ``file:line``, on every reference to a document
the repository does not hold: an issue by its number, a numbered section of the API contract
or of its extensions, the design notes kept outside it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHECKED_PACKAGES = (
    "engine",
    "store",
    "web",
    "bench",
    "tests",
)
"""Dotted names of the packages whose ``.py`` files are checked, subpackages included."""

_NUMBER = r"\d+(?:\.\d+)*"
FORBIDDEN = re.compile(
    rf"(?i:\bissues?\s*(?:{_NUMBER}|,\s*items?\s+{_NUMBER}))"
    r"|(?i:\b(?:engine|operations|benchmark)\s+issue\b)"
    r"|(?i:\bthe\s+issue's)"
    rf"|(?i:\bspec(?:\s+parts?)?\s+{_NUMBER})"
    rf"|(?i:\bextensions?(?:\s+parts?)?\s+{_NUMBER})"
    r"|\bDESIGN\b|\bSTYLE\b|(?i:\bdesign\s+brief\b)"
    rf"|(?i:\bturn\s+{_NUMBER})"
    r"|(?i:\bhelper\s+(?:session|brief)\b)"
)
"""What names a document outside the repository. Case-sensitive where the word is an
ordinary one in lower case (the upper-case names of documents kept outside); ``\\b`` keeps
identifiers such as ``DESIGN_NOTES`` or ``issue_token`` out. A reference may run across a
line break, in a comment too (see :func:`references`)."""

_COMMENT_MARK = re.compile(r"^([ \t]*)#", re.MULTILINE)


def references(text: str) -> list[tuple[int, str]]:
    """The forbidden references in the source ``text``: ``(line, matched text)`` pairs, lines
    counted from 1. A comment's leading ``#`` is read as a space (same length, so offsets and
    lines stay exact), so that a reference wrapped across two comment lines is found."""
    flat = _COMMENT_MARK.sub(lambda mark: mark.group(1) + " ", text)
    return [
        (flat.count("\n", 0, match.start()) + 1, " ".join(match.group().split()))
        for match in FORBIDDEN.finditer(flat)
    ]


def _package_files() -> list[Path]:
    files = []
    for package in CHECKED_PACKAGES:
        folder = ROOT / package.replace(".", "/")
        assert (folder / "__init__.py").is_file(), f"{package} is no package of this repository"
        files.extend(sorted(folder.rglob("*.py")))
    return files


def test_code_cites_only_what_the_repository_holds() -> None:
    found = []
    for path in _package_files():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        found.extend(
            f"{path.relative_to(ROOT)}:{line}: {matched!r} in {lines[line - 1].strip()!r}"
            for line, matched in references(text)
        )
    assert not found, (
        "cite the README section, the docs/ page or bench/RESULTS.md that states the rule "
        "(or drop the reference):\n" + "\n".join(found)
    )


def test_the_pattern_tells_references_from_ordinary_words() -> None:
    # each sample is built from parts so that this file's own text holds none of them
    cited = [
        "see issue" + " 14, item 3",
        "(Issue" + " 12's story)",
        "(issue" + " 15, item 1)",
        "(operations" + " issue" + ", items 2 to 4)",
        "spec" + " 2.1",
        "(spec" + " part 8)",
        "extensions part" + " 6",
        "extensions" + " 6.2",
        "DES" + "IGN: 400 or 422",
        "the ladder of DES" + "IGN/STY" + "LE",
        "the design" + " brief",
        "in turn" + " 3",
        "the issue" + "'s goals",
        "wrapped across lines (extensions part\n" + "    # 6)",
    ]
    ordinary = [
        "RFC 9110, 5.5",
        "docs/api.md, Error codes",
        "docs/design-notes.md, Writes",
        "issue_token(secret, token.id)",
        "ca.issue_cert(host)",
        "DESIGN_NOTES = 1",
        "a design choice",
        "await prober.probe(spec)",
        "the spec's http fields",
        "tokens used in turn",
        "an issue",
    ]
    assert [sample for sample in cited if not references(sample)] == []
    assert [sample for sample in ordinary if references(sample)] == []
