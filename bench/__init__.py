"""The benchmark harness: ``uptrio bench`` and ``uptrio bench sweep`` (see bench/RESULTS.md).

An extra (``pip install -e '.[bench]'`` brings rich, psutil, matplotlib and numpy), found
by the ``uptrio`` command through the entry point ``bench`` of the group
``uptrio.commands``; nothing of the service imports it.

It starts the real service (``uptrio serve``, its own process, on embedded Postgres in a
temporary data directory or ``--database-url``) and local targets in child processes,
creates monitors through the HTTP API, measures a window after a warm-up from outside
the service (the targets log when every probe arrives) and from its own ``/metrics``,
and reports: a table, a JSON file with every figure, a PNG chart. ``--baseline`` runs
the same probes from a bare trio loop for comparison.

It sees the service only as a user does (the ``uptrio`` command, HTTP, SQL on its
database), except the white-box modules, which say so in their docstrings and are the
only ones the import contracts in ``pyproject.toml`` let import ``engine`` or ``store``:
`baseline` (the bare loop runs the service's own probes and schedule), `analysis`
(lateness against the schedule's grid), `probe_micro` and `ab` (micro-benchmarks).

Modules: `plan` (parameters, the monitors and their targets), `targets` (the target
servers), `service` (the service and its database), `api` (creating monitors, the
reading client), `procstats` (CPU and memory from /proc), `metrics` (``/metrics``),
`baseline`, `analysis`, `run` (one run), `report` and `output` (JSON, table, chart),
`sweep`, `profile` (py-spy), `display` (the live view), `cli` (the command line),
`probe_micro`, `ab`.
"""
