"""Shields.io-style flat badges as SVG (docs/badges.md, "What a badge looks like").

A badge is a label on a dark grey left half and a value on a coloured right half, 20 px
high, drawn by the Jinja2 template ``web/public/templates/badge.svg`` (autoescaped: a
monitor's name is text, never markup). It carries ``role="img"``, an ``aria-label`` and
a ``<title>`` reading ``<label>: <value>``, its text alternative; the drawn texts are
``aria-hidden``.

Text widths are estimated, not measured (no font files): the advance widths of Verdana
(the badge's first font) in font units of 2048 per em, at 11 px; a character outside the
table counts as wide as ``M``'s neighbours (:data:`_DEFAULT_UNITS`). Each text gets
``textLength`` so a viewer with another font still fits it in its box. Like shields.io's,
the texts are drawn at 10 times their size under ``scale(.1)``, for sub-pixel positions.

The colours and thresholds (shields.io's named colours) are in :func:`uptime_colour`,
:func:`response_time_colour` and :data:`STATUS_COLOURS`, and written in docs/badges.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .status_pages import TEMPLATES

__all__ = [
    "STATUS_COLOURS",
    "Badge",
    "badge",
    "format_ms",
    "format_uptime",
    "render_badge",
    "response_time_colour",
    "text_width",
    "uptime_colour",
]

BRIGHTGREEN, GREEN, YELLOWGREEN = "#4c1", "#97ca00", "#a4a61d"
YELLOW, ORANGE, RED, LIGHTGREY = "#dfb317", "#fe7d37", "#e05d44", "#9f9f9f"

STATUS_COLOURS = {"up": BRIGHTGREEN, "down": RED, "paused": LIGHTGREY, "pending": LIGHTGREY}
"""A monitor's status to its badge's colour."""

_UNITS = {
    " ": 720, "!": 813, '"': 942, "#": 1675, "$": 1302, "%": 2212, "&": 1494, "'": 548,
    "(": 911, ")": 911, "*": 1302, "+": 1675, ",": 745, "-": 868, ".": 745, "/": 1305,
    ":": 873, ";": 873, "<": 1675, "=": 1675, ">": 1675, "?": 1116, "@": 2048, "[": 911,
    "\\": 1305, "]": 911, "^": 1675, "_": 1302, "`": 1302, "{": 1303, "|": 911, "}": 1303,
    "~": 1675,
    **dict.fromkeys("0123456789", 1302),
    "a": 1229, "b": 1276, "c": 1079, "d": 1276, "e": 1220, "f": 720, "g": 1276, "h": 1296,
    "i": 562, "j": 668, "k": 1212, "l": 562, "m": 1992, "n": 1296, "o": 1243, "p": 1276,
    "q": 1276, "r": 874, "s": 1075, "t": 807, "u": 1296, "v": 1212, "w": 1677, "x": 1212,
    "y": 1212, "z": 1051,
    "A": 1401, "B": 1405, "C": 1430, "D": 1577, "E": 1294, "F": 1178, "G": 1587, "H": 1540,
    "I": 862, "J": 921, "K": 1423, "L": 1145, "M": 1729, "N": 1532, "O": 1612, "P": 1238,
    "Q": 1612, "R": 1427, "S": 1400, "T": 1255, "U": 1517, "V": 1401, "W": 2027, "X": 1403,
    "Y": 1251, "Z": 1399,
}  # fmt: skip
"""Verdana's advance widths (font units, 2048 per em) of printable ASCII."""
_DEFAULT_UNITS = 1500
_FONT_PX = 11
_PADDING_PX = 5
_MAX_LABEL = 60
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def text_width(text: str) -> float:
    """The estimated width of ``text`` in Verdana 11 px, pixels (module docstring)."""
    return sum(_UNITS.get(c, _DEFAULT_UNITS) for c in text) * _FONT_PX / 2048


def uptime_colour(percent: float | None) -> str:
    """An uptime's colour: >= 99.9 % brightgreen, >= 99 % green, >= 98 % yellowgreen,
    >= 97 % yellow, >= 95 % orange, below red; no data light grey (docs/badges.md)."""
    if percent is None:
        return LIGHTGREY
    for floor, colour in ((99.9, BRIGHTGREEN), (99, GREEN), (98, YELLOWGREEN), (97, YELLOW)):
        if percent >= floor:
            return colour
    return ORANGE if percent >= 95 else RED


def response_time_colour(ms: float | None) -> str:
    """A p95 response time's colour (milliseconds): <= 200 brightgreen, <= 500 green,
    <= 1,000 yellow, <= 2,000 orange, above red; no data light grey (docs/badges.md)."""
    if ms is None:
        return LIGHTGREY
    for ceiling, colour in ((200, BRIGHTGREEN), (500, GREEN), (1000, YELLOW), (2000, ORANGE)):
        if ms <= ceiling:
            return colour
    return RED


def format_uptime(percent: float | None) -> str:
    """``99.95%`` (cut, never rounded up: 99.999 is ``99.99%``, only a clean record is
    ``100%``), or ``no data``."""
    if percent is None:
        return "no data"
    if percent >= 100:
        return "100%"
    return f"{math.floor(percent * 100) / 100:.2f}%"


def format_ms(ms: float | None) -> str:
    """``123 ms`` (whole milliseconds), ``1.23 s`` from a second on, or ``no data``."""
    if ms is None:
        return "no data"
    return f"{round(ms)} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


@dataclass(frozen=True, slots=True)
class Badge:
    """A badge's texts and geometry (pixels; ``*_x`` and ``*_length`` in tenths of a
    pixel, the template's ``scale(.1)``)."""

    label: str
    value: str
    colour: str
    label_width: int
    value_width: int
    label_x: int
    value_x: int
    label_length: int
    value_length: int

    @property
    def width(self) -> int:
        """The whole badge's width, pixels."""
        return self.label_width + self.value_width


def badge(label: str, value: str, colour: str) -> Badge:
    """The :class:`Badge` of ``label`` (characters XML cannot hold become ``?``; longer
    than 60 characters cut with an ellipsis) and ``value`` on ``colour`` (``#rgb``)."""
    label = _NOT_XML.sub("?", label)
    if len(label) > _MAX_LABEL:
        label = label[: _MAX_LABEL - 1] + "…"
    label_text, value_text = text_width(label), text_width(value)
    label_width = math.ceil(label_text) + 2 * _PADDING_PX
    value_width = math.ceil(value_text) + 2 * _PADDING_PX
    return Badge(
        label=label,
        value=value,
        colour=colour,
        label_width=label_width,
        value_width=value_width,
        label_x=label_width * 5,
        value_x=label_width * 10 + value_width * 5,
        label_length=round(label_text * 10),
        value_length=round(value_text * 10),
    )


_TEMPLATE = TEMPLATES.get_template("badge.svg")


def render_badge(label: str, value: str, colour: str) -> bytes:
    """The SVG document (UTF-8) of :func:`badge`'s badge."""
    return _TEMPLATE.render(b=badge(label, value, colour)).encode()
