"""Structured logs: JSON lines on stderr (default) or a console format for humans.

Configured once by the command line; modules log with ``structlog.get_logger(name)``.
Rule: no token, secret, database URL or metadata value is ever passed to a logger.
"""

from __future__ import annotations

import logging
import sys

import structlog


def console_renderer() -> structlog.dev.ConsoleRenderer:
    """The console renderer, with plain tracebacks: structlog's default (rich, with every
    frame's local variables) would print what locals hold (a monitor's request headers,
    a token) and takes tens of milliseconds of the event loop per traceback."""
    return structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)


def configure_logging(fmt: str = "json", level: str = "info") -> None:
    """Send structlog and stdlib logging to stderr as JSON lines (``fmt="json"``) or
    coloured console lines (``fmt="console"``), at ``level`` and above.

    Stdlib records (``engine.supervisor`` logs each restart with its exception, asyncpg,
    Hypercorn) go through the same renderer, at WARNING and above, so every line on
    stderr is one JSON object (``event``, ``level``, ``timestamp``, ``logger`` and, with
    an exception, ``exception``: its traceback as a string).
    """
    numeric = logging.getLevelNamesMapping()[level.upper()]
    renderer: structlog.typing.Processor = (
        console_renderer() if fmt == "console" else structlog.processors.JSONRenderer()
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
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(max(numeric, logging.WARNING))
