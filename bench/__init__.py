"""The benchmark harness: ``uptrio bench`` and ``uptrio bench sweep`` (see bench/RESULTS.md).

It starts the real service (``uptrio serve``, its own process, on embedded Postgres in a
temporary data directory or ``--database-url``) and local targets in child processes,
creates monitors through the HTTP API, measures a window after a warm-up from outside
the service (the targets log when every probe arrives) and from its own ``/metrics``,
and reports: a table, a JSON file with every figure, a PNG chart. ``--baseline`` runs
the same probes from a bare trio loop for comparison.

Modules: `plan` (parameters, the monitors and their targets), `targets` (the target
servers), `service` (the service and its database), `api` (creating monitors, the
reading client), `procstats` (CPU and memory from /proc), `metrics` (``/metrics``),
`baseline` (the bare loop), `analysis` (figures from arrival logs), `run` (one run),
`report` and `output` (JSON, table, chart), `sweep`, `profile` (py-spy), `display`
(the live view), `cli` (the command line), `probe_micro` (a probe micro-benchmark),
`ab` (A/B micro-benchmarks of one module against a git revision).

The names below are imported on first use, so that ``uptrio serve``, which imports
`bench.cli` for its parser, does not load the harness.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["BenchParams", "build_report", "make_plan", "run_bench", "run_sweep"]

_HOMES = {
    "BenchParams": "bench.plan",
    "make_plan": "bench.plan",
    "run_bench": "bench.run",
    "build_report": "bench.report",
    "run_sweep": "bench.sweep",
}


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'bench' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
