"""``uptrio bench api``: the authenticated reads of monitors against ``/healthz``
(docs/benchmarks.md, The other benchmarks; the goals, :data:`GOALS`: ``GET /monitors/:id``
at ≥ 60 % of ``/healthz``'s requests per second, ``GET /monitors?limit=100`` at ≥ 25 %).

In a new data directory, ``uptrio tokens create`` migrates the embedded Postgres and mints
the token, then ``uptrio serve --no-engine`` (the rate limits lifted, logs at ``warning``)
runs on it: no probe competes with the API for the process. ``--monitors`` http monitors
(default 1,000) are created through the API (`create_monitors`, as ``uptrio bench`` does;
their targets are never probed). Then ``wrk`` (Debian's; ``make test-tools``) loads three
routes in turns, ``--wrk-rounds`` times each for ``--wrk-seconds``, so drift in the
machine's load falls on every route alike:

- ``healthz``: ``GET /healthz``, the app's trivial route through the same middleware
  chain, unauthenticated: the request path's own cost;
- ``monitor``: ``GET /monitors/:id`` of one monitor, with the bearer token;
- ``list_100``: ``GET /monitors?limit=100``, the first page of 100, with the token.

Figures per route: requests/s over all rounds, p50 and the worst p99 (wrk's, milliseconds),
answers other than 2xx/3xx and socket errors, and each route's share of ``/healthz``'s
requests/s against its goal. Black-box: the ``uptrio`` command and HTTP only. The report
goes to ``<output>/report.json`` and stdout. Times: take them on a quiet machine.

With ``--profile``, each route then gets one more wrk run (not counted in the figures)
while py-spy samples the service (`bench.profile`): ``profile-<route>.txt`` (collapsed
stacks) and the functions' shares of the samples under ``profiles`` in the report, for a
relative split of where a request's time goes.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import trio

from .api import TokenPool, create_monitors
from .plan import BenchParams, TargetPorts, make_plan
from .profile import record_profile, summarize
from .service import mint_tokens, run_service_process, serve_command
from .status_pages import (
    WrkOptions,
    print_wrk_table,
    run_wrk,
    shares_of_healthz,
    wrk_in_turns,
)

__all__ = ["GOALS", "print_api_reads", "run_api_reads_bench"]

GOALS = {"monitor": 0.60, "list_100": 0.25}
"""The goals: each route's requests/s at least this share of ``/healthz``'s."""

_DISCARD = TargetPorts(http=9, refused=9, tcp=9, dns=9)
"""Where the monitors would probe (the discard port): the service runs without engine."""


async def _profile_routes(
    pid: int, urls: dict[str, str], wrk: WrkOptions, auth: list[str], output: Path
) -> dict[str, Any]:
    """One wrk run per route of ``urls`` while py-spy samples process ``pid``; each
    route's profile summary (or why there is none)."""
    profiles: dict[str, Any] = {}
    for name, url in urls.items():
        path = output / f"profile-{name}.txt"
        failure: list[str | None] = []

        async def sample(path: Path = path, failure: list[str | None] = failure) -> None:
            failure.append(await record_profile(pid, wrk.seconds, path))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sample)
            headers = auth if name != "healthz" else []
            await run_wrk(url, wrk.seconds, wrk.connections, wrk.threads, headers)
        profiles[name] = (
            {"error": failure[0]} if failure[0] else {"file": str(path), **summarize(path, 25)}
        )
    return profiles


async def run_api_reads_bench(
    params: BenchParams, wrk: WrkOptions, output: Path, profile: bool = False
) -> dict[str, Any]:
    """The whole benchmark (module docstring) with ``params.monitors`` monitors; returns the
    report, also written to ``output/report.json``.

    Raises:
        RuntimeError: the service did not start, refused a monitor, or wrk failed.
    """
    await trio.Path(output).mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="uptrio-api-"))
    try:
        (token,) = await mint_tokens(data_dir, None, "bench", 1)  # migrates, too
        command = serve_command(data_dir, "--no-engine", log_level="warning")
        async with run_service_process(command, output / "service.log") as service:
            plans = [plan.with_ports(_DISCARD) for plan in make_plan(params)]
            creation = await create_monitors(
                service.base_url, [TokenPool([token])], plans, params, lambda _: None
            )
            first = creation.ids[min(creation.ids)]
            urls = {
                "healthz": f"{service.base_url}/healthz",
                "monitor": f"{service.base_url}/monitors/{first}",
                "list_100": f"{service.base_url}/monitors?limit=100",
            }
            auth = [f"Authorization: Bearer {token}"]
            runs = await wrk_in_turns(urls, wrk, {"monitor": auth, "list_100": auth})
            profiles = (
                await _profile_routes(service.pid, urls, wrk, auth, output) if profile else None
            )
            service.terminate()
            await service.wait_stopped()
    finally:
        if not params.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    figures = shares_of_healthz(runs)
    report = {
        "monitors": len(creation.ids),
        "created_per_second": round(creation.per_second, 1),
        "wrk": asdict(wrk),
        "rounds": runs,
        "figures": figures,
        "goals": {
            name: {
                "share_of_healthz_min": goal,
                "share_of_healthz": figures[name]["ratio_to_healthz"],
                "met": figures[name]["ratio_to_healthz"] >= goal,
            }
            for name, goal in GOALS.items()
        },
        "profiles": profiles,
    }
    await trio.Path(output / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


_LABELS = {
    "healthz": "GET /healthz",
    "monitor": "GET /monitors/:id",
    "list_100": "GET /monitors?limit=100",
}


def print_api_reads(report: dict[str, Any]) -> None:
    """The report as a plain-text table on stdout."""
    wrk = report["wrk"]
    print(
        f"API reads: {report['monitors']:,} monitors, uptrio serve --no-engine, rate limits "
        f"lifted; wrk -t{wrk['threads']} -c{wrk['connections']}, {wrk['rounds']} rounds of "
        f"{wrk['seconds']:g} s per route, in turns"
    )
    print_wrk_table(report["figures"], _LABELS)
    goals = "; ".join(
        f"{_LABELS[name]} >= {goal['share_of_healthz_min']:.0%} of /healthz: "
        f"{goal['share_of_healthz']:.0%} ({'met' if goal['met'] else 'MISSED'})"
        for name, goal in report["goals"].items()
    )
    print(f"goals: {goals}")
    for name, summary in (report["profiles"] or {}).items():
        if "error" in summary:
            print(f"profile of {_LABELS[name]}: none ({summary['error']})")
            continue
        top = ", ".join(f"{function} {share}%" for share, function in summary["leaf"][:6])
        print(f"profile of {_LABELS[name]} ({summary['samples']} samples), leaves: {top}")
