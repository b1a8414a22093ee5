"""In-process A/B micro-benchmarks of the hot path against a git revision.

White-box (allowed by the import contracts in ``pyproject.toml``): it imports ``engine``
and ``store`` modules and runs them in this process.

Usage::

    .venv/bin/python -m bench.ab probe [--against HEAD] [--rounds 6] [--checks 3000]
    .venv/bin/python -m bench.ab https [--against HEAD] [--rounds 6] [--checks 3000]
    .venv/bin/python -m bench.ab actor [--against HEAD] [--rounds 6] [--monitors 5000]

Whole-service runs on a shared 2-core machine vary by ±10 % from run to run, more than
most single optimisations are worth. Here the old module (``git show REV:path``, loaded
beside the new one under another name) and the new one run in the same process,
alternately (ABBA order), against the same target, so both see the same machine; the
medians of the rounds are compared. CPU is `time.process_time` (this process only).

- ``probe``: `engine.probes._http.probe_http` against the built-in http target (a child
  process), at concurrency 1 (checks one at a time, as 1,000 checks/s spread over a
  second mostly are) and 50; microseconds of CPU per check.
- ``https``: the same over TLS, against a one-process trio target serving a self-signed
  certificate for 127.0.0.1 (made by the ``openssl`` command line); the new module is called
  with ``tls_expiry_days=14`` (docs/checks.md, Assertions and TLS expiry: the certificate's
  expiry read and checked on every https check).
- ``actor``: `engine.monitor.run_monitor` with a prober that answers at once (the
  engine's own cost: actor loop, probe task, limiter, records, the store's inbox),
  ``--monitors`` actors every 1 s; microseconds of CPU per check.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import trio

__all__ = ["load_revision", "main"]

ROOT = Path(__file__).resolve().parents[1]


def load_revision(module: str, revision: str) -> ModuleType:
    """Module ``module`` (dotted, e.g. ``engine.monitor``) as it is at git ``revision``,
    loaded under the name ``<package>._ab_old_<name>`` so that it sits beside the current
    one and its relative imports resolve to the current package.

    Raises:
        subprocess.CalledProcessError: git does not know the file at that revision.
    """
    path = module.replace(".", "/") + ".py"
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    package, _, name = module.rpartition(".")
    copy = Path(tempfile.mkdtemp(prefix="uptrio-ab-")) / f"{name}.py"
    copy.write_text(source)
    spec = importlib.util.spec_from_file_location(f"{package}._ab_old_{name}", copy)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = loaded
    spec.loader.exec_module(loaded)
    return loaded


Measure = Callable[[ModuleType], Awaitable[float]]


async def _alternate(old: ModuleType, new: ModuleType, rounds: int, measure: Measure) -> str:
    """Run ``measure`` on each module ``rounds`` times in ABBA order; a one-line summary
    of the medians (µs per check)."""
    found: dict[str, list[float]] = {"old": [], "new": []}
    for number in range(rounds):
        order = [("old", old), ("new", new)]
        for name, module in order if number % 2 else reversed(order):
            found[name].append(await measure(module))
    old_median, new_median = statistics.median(found["old"]), statistics.median(found["new"])
    change = (new_median - old_median) / old_median * 100
    return (
        f"old {old_median:7.1f} µs/check   new {new_median:7.1f} µs/check   "
        f"({change:+.1f} %; rounds old {[round(x) for x in found['old']]}, "
        f"new {[round(x) for x in found['new']]})"
    )


async def _probe_ab(
    revision: str,
    rounds: int,
    checks: int,
    url: str,
    context: ssl.SSLContext,
    new_options: dict[str, Any],
) -> None:
    import engine.probes._http as new

    old = load_revision("engine.probes._http", revision)
    for concurrency in (1, 50):

        async def measure(module: ModuleType, concurrency: int = concurrency) -> float:
            left = checks
            options = new_options if module is new else {}

            async def worker() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    result = await module.probe_http(
                        url,
                        method="GET",
                        expected_status_code=200,
                        ssl_context=context,
                        policy=None,
                        **options,
                    )
                    assert result.ok, result

            started = time.process_time()
            async with trio.open_nursery() as nursery:
                for _ in range(concurrency):
                    nursery.start_soon(worker)
            return (time.process_time() - started) / checks * 1e6

        summary = await _alternate(old, new, rounds, measure)
        print(f"probe_http {url[:5]}, concurrency {concurrency:2}: {summary}")


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """(certificate, key) PEM files for 127.0.0.1, valid 30 days, made by ``openssl``."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    command = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30"
    command += " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1"
    subprocess.run(
        [*command.split(), "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True
    )
    return cert, key


async def _tls_target(cert: str, key: str) -> None:
    """The https target (a child process): one ``200 ok`` per connection, its port printed
    as JSON, until its standard input closes."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def handle(stream: trio.SSLStream[trio.SocketStream]) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return
                head += chunk
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            )
        except trio.BrokenResourceError:
            pass
        finally:
            await trio.aclose_forcefully(stream)

    [tcp] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    listeners = [trio.SSLListener(tcp, context)]
    print(json.dumps({"port": tcp.socket.getsockname()[1]}))
    sys.stdout.flush()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, handle, listeners)
        await trio.to_thread.run_sync(sys.stdin.read)  # the parent closes it to stop us
        nursery.cancel_scope.cancel()


class _ResultWriter:
    """The producers' handle as ``engine.monitor`` called it before the store's families
    (``store.StoreWriter``: ``write(check, change, lease_epoch)``), over today's
    ``store.StoreWriter``, for an ``actor`` A/B against a revision from before them. It
    does the work that handle did per check (one ``WriteCheck`` stamped with the trio
    clock, sent at once when the inbox has room), so the A/B compares the actors."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer
        self.statistics = writer.statistics

    def write_nowait(self, check: Any, change: Any = None, lease_epoch: int | None = None) -> bool:
        """Queue one result if the inbox has room (``store.StoreWriter.write_nowait``)."""
        from store import WriteCheck

        item = WriteCheck(check=check, change=change, lease_epoch=lease_epoch)
        return bool(self._writer.write_nowait(item))

    async def write(self, check: Any, change: Any = None, lease_epoch: int | None = None) -> None:
        """Queue one result, waiting for room (``store.StoreWriter.write``)."""
        from store import WriteCheck

        await self._writer.write(WriteCheck(check=check, change=change, lease_epoch=lease_epoch))


def _load_monitor(revision: str) -> ModuleType:
    """``engine.monitor`` at ``revision``; one from before the store's families imports
    ``store.StoreWriter``, which is lent to it (:class:`_ResultWriter`) while it loads."""
    import store

    lent = not hasattr(store, "StoreWriter")
    if lent:
        setattr(store, "StoreWriter", _ResultWriter)  # noqa: B010 (not a name of store)
    try:
        return load_revision("engine.monitor", revision)
    finally:
        if lent:
            delattr(store, "StoreWriter")


async def _actor_ab(revision: str, rounds: int, monitors: int) -> None:
    import engine.monitor as new
    from engine.actor import open_inbox
    from engine.probes import ProbeResult, TlsContexts
    from store import MonitorRecord, new_id
    from store.actor import StoreWriter, WriterStatistics

    old = _load_monitor(revision)
    answer = ProbeResult(
        ok=True, response_time_ms=0.1, status_code=200, error_code=None, error_message=None
    )

    class AtOnce:
        tls = TlsContexts(ssl.create_default_context())  # the actors build their specs with it

        async def probe(self, spec: Any) -> ProbeResult:
            await trio.lowlevel.checkpoint()
            return answer

    async def measure(module: ModuleType) -> float:
        send, receive = trio.open_memory_channel[Any](10_000)
        stats = module.EngineStatistics()
        writer: Any = StoreWriter(send, WriterStatistics())
        if not hasattr(module, "WriteCheck"):  # a revision from before the store's families
            writer = _ResultWriter(writer)
        deps = module.MonitorDeps(
            prober=AtOnce(),
            writer=writer,
            limiter=trio.CapacityLimiter(1000),
            stats=stats,
        )
        now = int(time.time())

        async def drain() -> None:
            async for _ in receive:
                pass

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            for i in range(monitors):
                record = MonitorRecord(
                    id=new_id("mon"),
                    account_id="acct_ab",
                    name=f"m{i}",
                    url=f"http://127.0.0.1:9/m/{i}/o",
                    type="http",
                    status="up",
                    interval_seconds=1,
                    timeout_seconds=1,
                    method="GET",
                    expected_status_code=200,
                    failure_threshold=2,
                    success_threshold=1,
                    run_epoch=1,
                    created=now,
                    updated=now,
                    metadata={},
                    last_checked_at=None,
                )
                ref, inbox = open_inbox[Any](16)
                run = functools.partial(module.run_monitor, record, ref, inbox, deps)
                nursery.start_soon(functools.partial(run, check_now=False))
            await trio.sleep(1.5)
            cpu, checks = time.process_time(), stats.checks
            await trio.sleep(4.0)
            cpu, checks = time.process_time() - cpu, stats.checks - checks
            nursery.cancel_scope.cancel()
        return float(cpu / max(1, checks) * 1e6)

    summary = await _alternate(old, new, rounds, measure)
    print(f"run_monitor, {monitors} actors every 1 s: {summary}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m bench.ab`` (see the module docstring)."""
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("what", choices=("probe", "https", "actor", "_tls-target"))
    parser.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--against", default="HEAD", help="git revision of the old code")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--checks", type=int, default=3000, help="probe: checks per round")
    parser.add_argument("--monitors", type=int, default=5000, help="actor: actors")
    args = parser.parse_args(argv)
    if args.what == "actor":
        trio.run(_actor_ab, args.against, args.rounds, args.monitors)
        return
    if args.what == "_tls-target":
        trio.run(_tls_target, *args.files)
        return
    context = ssl.create_default_context()
    with tempfile.TemporaryDirectory(prefix="uptrio-ab-") as directory:
        if args.what == "probe":  # the built-in http target, until stdin closes
            command = [sys.executable, "-m", "bench.targets", "http"]
        else:
            cert, key = _self_signed(Path(directory))
            context.load_verify_locations(cert)
            command = [sys.executable, "-m", "bench.ab", "_tls-target", str(cert), str(key)]
        target = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert target.stdout is not None
            port = int(json.loads(target.stdout.readline())["port"])
            if args.what == "probe":
                url, options = f"http://127.0.0.1:{port}/m/1/o", {}
            else:
                url, options = f"https://127.0.0.1:{port}/", {"tls_expiry_days": 14}
            trio.run(_probe_ab, args.against, args.rounds, args.checks, url, context, options)
        finally:
            if target.stdin is not None:
                target.stdin.close()
            target.wait(timeout=10)


if __name__ == "__main__":
    main()
