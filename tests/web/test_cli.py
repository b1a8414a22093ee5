"""The ``uptrio`` command line (docs/operations.md, Command line; docs/several-nodes.md):
log flags before or after the command, token names, ``nodes forget``, a closed stdout, the
refusal of a JWT secret that is not the database's and ``tokens reset-secret``.

The commands run in this process (``web.process.cli.tokens.tokens_command`` and
``nodes.nodes_command``, as ``main`` runs them) against a fresh database (``--database-url``),
except where the behaviour is the process's own: its exit status when its stdout is closed, and
``uptrio serve`` refusing to start."""

from __future__ import annotations

import hmac
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from store import DATA_DIR_MODE, Connection, Database, leases
from tests.web.helpers import CLI, ROOT, service_env
from web.http.auth import SECRET_ENV, load_secret
from web.process.cli import build_parser
from web.process.cli.nodes import nodes_command
from web.process.cli.tokens import tokens_command

FIRST_SECRET = "the-first-nodes-secret-of-32-bytes-at-least"
OTHER_SECRET = "another-secret-of-at-least-32-bytes"


def test_log_flags_count_before_and_after_the_command() -> None:
    parse = build_parser().parse_args
    after = parse(["serve", "--log-format", "console", "--log-level", "DEBUG"])
    assert (after.log_format, after.log_level) == ("console", "debug")
    before = parse(["--log-format", "console", "serve"])
    assert (before.log_format, before.log_level) == ("console", "info")
    assert parse(["serve"]).log_format == "json"
    assert parse(["nodes", "list", "--log-format", "console"]).log_format == "console"
    assert parse(["tokens", "list", "--log-level", "warning"]).log_level == "warning"
    with pytest.raises(SystemExit):
        parse(["serve", "--log-level", "loud"])


async def _tokens(*argv: str) -> int:
    return await tokens_command(build_parser().parse_args(["tokens", *argv]))


async def test_tokens_carry_a_name_shown_in_tokens_list(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--database-url", database_url, "--data-dir", str(tmp_path / "data")]
    make = ["create", *where, "--account", "acme", "--permissions", "monitors.read"]
    with trio.fail_after(20):
        assert await _tokens(*make, "--name", "CI deploy (staging)") == 0
        assert await _tokens(*make) == 0
        capsys.readouterr()
        assert await _tokens("list", *where) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[-1] == "NAME"
    (named,) = [row for row in rows if "CI" in row]  # same second: in id order
    (unnamed,) = [row for row in rows if row != named]
    assert named.endswith("monitors.read  CI deploy (staging)"), named
    assert unnamed.split()[-1] == "-"
    with trio.fail_after(20):
        assert await _tokens("revoke", *where, named.split()[0]) == 0
    assert capsys.readouterr().out.strip().endswith("(CI deploy (staging))")
    for bad in ("", "x" * 101, "tab\there"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["tokens", *make, "--name", bad])


async def _execute(connection: Connection, sql: str) -> None:
    await connection.execute(sql)


async def test_nodes_forget_takes_off_a_node_that_is_not_live(
    db: Database, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def nodes(*argv: str) -> int:
        args = build_parser().parse_args(["nodes", *argv, "--database-url", database_url])
        return await nodes_command(args)

    with trio.fail_after(20):
        for name in ("gone", "running"):
            await db.transaction(leases.register_node, name, 10.0)
            await db.transaction(leases.renew_leases, name, 10.0)
        await db.transaction(leases.release_node, "gone")
        capsys.readouterr()
        assert await nodes("forget", "running") == 1
        assert "is live" in capsys.readouterr().err
        assert await nodes("forget", "nobody") == 1
        assert "no node 'nobody'" in capsys.readouterr().err
        assert await nodes("forget", "gone") == 0
        assert capsys.readouterr().out == "forgot gone (stopped)\n"
        assert await nodes("list") == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["running"]


async def test_a_closed_stdout_ends_nodes_list_quietly(db: Database, database_url: str) -> None:
    # more lines than stdout's buffer holds: the writes fail while the command prints
    await db.run(
        _execute,
        "INSERT INTO nodes (name, started, renewed_at, lease_seconds) "
        "SELECT 'node-' || g, now(), now(), 10 FROM generate_series(1, 400) g",
    )
    read, write = os.pipe()
    os.close(read)  # as `| head` does once it has its lines
    try:
        with trio.fail_after(30):
            done = await trio.run_process(
                [*CLI, "nodes", "list", "--database-url", database_url],
                stdout=write,
                capture_stderr=True,
                check=False,
                env=service_env(),
                cwd=ROOT,
            )
    finally:
        os.close(write)
    assert done.stderr.decode() == ""
    assert done.returncode == 141  # 128 + SIGPIPE, as a command the signal ends


async def _fingerprints(connection: Connection) -> list[tuple[str, str]]:
    return [tuple(r) for r in await connection.fetch("SELECT * FROM secret_fingerprints")]


async def test_a_process_with_another_jwt_secret_refuses_to_run(
    db: Database,
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = ["--database-url", database_url, "--data-dir", str(tmp_path / "first")]
    data_dir = tmp_path / "second"
    with trio.fail_after(40):
        # the first process on the database records its secret's fingerprint
        monkeypatch.setenv(SECRET_ENV, FIRST_SECRET)
        assert await _tokens("create", *first, "--account", "a", "--permissions", "all") == 0
        ((name, fingerprint, _),) = await db.run(_fingerprints)
        keyed = hmac.new(FIRST_SECRET.encode(), b"uptrio jwt-secret fingerprint v1", "sha256")
        assert (name, fingerprint) == ("jwt", f"hmac-sha256:{keyed.hexdigest()}")

        # a node whose data directory made a secret of its own: refused, exit status 1
        status, out, err = await _serve_until_listening_or_exit(database_url, data_dir)
        assert status == 1, (out, err)
        assert "listening" not in out
        assert f"the JWT secret in {data_dir / 'jwt-secret'} is not the one" in err, err
        assert "cp -p" in err and SECRET_ENV in err

        # a command with another secret in the environment: refused too
        monkeypatch.setenv(SECRET_ENV, OTHER_SECRET)
        capsys.readouterr()
        assert await _tokens("list", *first) == 1
        err = capsys.readouterr().err
        assert f"the JWT secret in {SECRET_ENV} is not the one" in err, err

        monkeypatch.setenv(SECRET_ENV, FIRST_SECRET)
        assert await _tokens("list", *first) == 0

        # the first secret lost: another one is made the database's, every token revoked
        monkeypatch.setenv(SECRET_ENV, OTHER_SECRET)
        assert await _tokens("reset-secret", *first) == 1  # not without --yes
        capsys.readouterr()
        assert await _tokens("reset-secret", *first, "--yes") == 0
        assert "1 token(s) revoked" in capsys.readouterr().out
        assert await _tokens("list", *first) == 0
        (row,) = capsys.readouterr().out.splitlines()[1:]
        assert row.split()[2] == "revoked"
        monkeypatch.setenv(SECRET_ENV, FIRST_SECRET)
        assert await _tokens("list", *first) == 1


async def _serve_until_listening_or_exit(
    database_url: str, data_dir: Path
) -> tuple[int | None, str, str]:
    """``uptrio serve`` on ``database_url``: (exit status, stdout, stderr) once it exits,
    or (None, ...) once it listens (it is then stopped)."""
    command = [*CLI, "serve", "--no-engine", "--port", "0", "--data-dir", str(data_dir)]
    command += ["--database-url", database_url]
    process = await trio.lowlevel.open_process(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=service_env(),
        cwd=ROOT,
    )
    assert process.stdout is not None and process.stderr is not None
    out, err = bytearray(), bytearray()

    async def drain(stream: Any, into: bytearray) -> None:
        while chunk := await stream.receive_some(4096):
            into += chunk
            if b"listening on" in out:
                process.terminate()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain, process.stdout, out)
            nursery.start_soon(drain, process.stderr, err)
        status = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
    return (None if b"listening on" in out else status), out.decode(), err.decode()


def test_a_secret_file_copied_with_its_mode_open_is_closed_to_other_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data_dir.chmod(0o755)
    copied = data_dir / "jwt-secret"
    copied.write_text(FIRST_SECRET + "\n")  # as `cp` leaves it: 0644
    copied.chmod(0o644)
    assert load_secret(data_dir) == FIRST_SECRET.encode()
    assert stat.S_IMODE(copied.stat().st_mode) == 0o600
    assert stat.S_IMODE(data_dir.stat().st_mode) == DATA_DIR_MODE


def test_notification_flags_make_the_notifiers_settings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from web.process.cli.serve_flags import service_settings

    parse = build_parser().parse_args
    default = service_settings(parse(["serve"]))
    assert default.notifier.retry_base_seconds == 5.0 and not default.smtp_configured
    args = parse(
        [
            "serve",
            "--smtp-url",
            "smtps://user:pw@mail.example.com:465",
            "--smtp-from",
            "uptrio@example.com",
            "--provider-base",
            "slack=http://127.0.0.1:9999/",
            "--provider-base",
            "ntfy=https://ntfy.example.com",
            "--notification-retry-base-seconds",
            "0.5",
        ]
    )
    settings = service_settings(args)
    assert settings.smtp_configured
    assert settings.notifier.smtp_from == "uptrio@example.com"
    assert settings.notifier.provider_bases == {
        "slack": "http://127.0.0.1:9999",
        "ntfy": "https://ntfy.example.com",
    }
    assert settings.notifier.retry_base_seconds == 0.5
    for bad in (
        ["--provider-base", "slack"],
        ["--provider-base", "irc=http://127.0.0.1:1"],
        ["--provider-base", "slack=ftp://x"],
        ["--smtp-url", "http://mail.example.com"],
        ["--smtp-url", "smtp://mail.example.com:notaport"],
        ["--notification-retry-base-seconds", "0"],
    ):
        capsys.readouterr()
        with pytest.raises(SystemExit):
            parse(["serve", *bad])
        assert "error: argument" in capsys.readouterr().err, bad


def test_probe_source_address_is_bound_once_at_start_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from web.process.cli.serve import run
    from web.process.cli.serve_flags import service_settings

    parse = build_parser().parse_args
    assert service_settings(parse(["serve"])).probe_source is None
    settings = service_settings(parse(["serve", "--probe-source-address", "127.0.0.2"]))
    assert settings.probe_source is not None and str(settings.probe_source.ip) == "127.0.0.2"
    for bad, says in (
        ("192.0.2.1", "cannot bind 192.0.2.1"),  # TEST-NET-1: an address of no host
        ("localhost", "not an IP address"),
        ("0.0.0.0", "cannot be a source address"),
    ):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit:
            parse(["serve", "--probe-source-address", bad])
        assert exit.value.code == 2
        err = capsys.readouterr().err
        assert "argument --probe-source-address" in err and says in err, err
    # Both flags given, of two families: refused before anything starts.
    conflict = ["serve", "--probe-source-address", "::1", "--dns-nameserver", "127.0.0.1:53"]
    assert run(parse(conflict), conflict) == 2
    assert "give both of one family" in capsys.readouterr().err
