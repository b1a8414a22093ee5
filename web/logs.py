"""Structured logs: JSON lines on stderr (default) or a console format for humans.

Configured once by the command line; modules log with ``structlog.get_logger(name)``.
Rule: no token, secret, database URL or metadata value is ever passed to a logger.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(fmt: str = "json", level: str = "info") -> None:
    """Send structlog and stdlib logging to stderr as JSON lines (``fmt="json"``) or
    coloured console lines (``fmt="console"``), at ``level`` and above."""
    numeric = logging.getLevelNamesMapping()[level.upper()]
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer() if fmt == "console" else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr)
