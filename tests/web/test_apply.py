"""``uptrio apply`` and ``uptrio export`` (docs/apply.md) against the real
app served on loopback, through httpx as the command talks to it."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import yaml
from jsonschema import Draft202012Validator

from tests.web.conftest import Api, MakeToken
from tests.web.helpers import create_monitor, serve_live
from web.http.deps import Dependencies
from web.process.app import create_app
from web.process.cli.apply.client import ApiClient, open_client
from web.process.cli.apply.export import export_account
from web.process.cli.apply.format import SCHEMA_FILE, load_schema, render_schema
from web.process.cli.apply.run import apply_files

FILES = """\
monitors:
  - name: api
    url: https://api.example.com/health
    type: http
    interval_seconds: 60
  - name: site
    url: https://www.example.com
    type: http
    depends_on: [api]
    metadata: {team: web}
notification_channels:
  - name: ops hook
    type: webhook
    config:
      url: https://hooks.example.com/uptrio
      secret: whsec_0123456789abcdefghijklmnopqrstuvwxyz
heartbeats:
  - name: nightly backup
    period_seconds: 86400
maintenance_windows:
  - title: Database upgrade
    monitors: [api, nightly backup]
    starts_at: 4102444800
    ends_at: 4102448400
status_pages:
  - name: Example status
    slug: example-status
    components:
      - {monitor: api, name: API}
      - {monitor: site, name: Website, group: Public}
"""


@asynccontextmanager
async def _served(deps: Dependencies, token: str) -> AsyncIterator[httpx.AsyncClient]:
    """The app on 127.0.0.1 and an httpx client of it with ``token``."""
    async with serve_live(create_app(deps)) as base, open_client(base, token) as http:
        yield http


async def _apply(http: httpx.AsyncClient, files: Path, **flags: bool) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    status = await apply_files([files], http, out=out, err=err, **flags)
    return status, out.getvalue().splitlines(), err.getvalue()


async def _applied(http: httpx.AsyncClient, files: Path, **flags: bool) -> list[str]:
    """The lines of an apply that succeeds quietly."""
    status, lines, err = await _apply(http, files, **flags)
    assert (status, err) == (0, "")
    return lines


def _write(tmp_path: Path, text: str, name: str = "uptrio.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


async def _all(api: Api, path: str) -> list[dict[str, Any]]:
    status, body, _ = await api.get(path, query={"limit": 100})
    assert status == 200
    return list(body["data"])


def test_shipped_schema_is_the_generated_one() -> None:
    """The shipped file is what the create models give (regenerate with ``python -m
    web.process.cli.apply.format``); it is a valid schema and takes the examples of
    docs/apply.md and of the README's "Configuration as code"."""
    shipped = Path(__file__).parents[2] / "web/process/cli/apply" / SCHEMA_FILE
    assert shipped.read_text() == render_schema()
    Draft202012Validator.check_schema(load_schema())
    validator = Draft202012Validator(load_schema())
    validator.validate(yaml.safe_load(FILES))
    root = Path(__file__).parents[2]
    readme = (root / "README.md").read_text().split("## Configuration as code\n")[1]
    docs = (root / "docs/apply.md").read_text() + readme.split("\n## ")[0]
    examples = [block.split("```", 1)[0] for block in docs.split("```yaml\n")[1:]]
    assert len(examples) == 3
    for example in examples:
        validator.validate(yaml.safe_load(example))


async def test_apply_creates_then_is_unchanged_then_updates(
    deps: Dependencies, make_token: MakeToken, api: Api, tmp_path: Path
) -> None:
    files = _write(tmp_path, FILES)
    with trio.fail_after(30):
        async with _served(deps, await make_token()) as http:
            assert await _applied(http, files) == [
                "create notification_channel ops hook",
                "create monitor api",
                "create monitor site",
                "create heartbeat nightly backup",
                "create status_page Example status",
                "create maintenance_window Database upgrade",
            ]
            monitors = {m["name"]: m for m in await _all(api, "/monitors")}
            assert monitors["site"]["depends_on"] == [monitors["api"]["id"]]
            assert monitors["site"]["metadata"] == {"team": "web", "managed_by": "uptrio-apply"}
            page = (await _all(api, "/status-pages"))[0]
            window = (await _all(api, "/maintenance-windows"))[0]
            heartbeat = (await _all(api, "/heartbeats"))[0]
            assert window["monitors"] == [monitors["api"]["id"], heartbeat["id"]]
            assert [c["monitor"] for c in page["components"]] == [
                monitors["api"]["id"],
                monitors["site"]["id"],
            ]
            before = {m["id"]: m["updated"] for m in await _all(api, "/monitors")}

            status, lines, _ = await _apply(http, files)
            assert status == 0
            assert all(line.startswith("unchanged ") for line in lines), lines
            assert len(lines) == 6
            assert {m["id"]: m["updated"] for m in await _all(api, "/monitors")} == before

            files.write_text(FILES.replace("interval_seconds: 60", "interval_seconds: 300"))
            status, lines, _ = await _apply(http, files, dry_run=True)
            assert "update monitor api (interval_seconds)" in lines
            assert {m["id"]: m["updated"] for m in await _all(api, "/monitors")} == before

            status, lines, _ = await _apply(http, files)
            assert status == 0
            assert [line for line in lines if not line.startswith("unchanged")] == [
                "update monitor api (interval_seconds)"
            ]
            after = {m["name"]: m for m in await _all(api, "/monitors")}
            assert after["api"]["interval_seconds"] == 300
            assert after["site"]["updated"] == monitors["site"]["updated"]


async def test_prune_deletes_only_what_apply_created(
    deps: Dependencies, make_token: MakeToken, api: Api, tmp_path: Path
) -> None:
    files = _write(tmp_path, FILES)
    with trio.fail_after(30):
        async with _served(deps, await make_token()) as http:
            await create_monitor(api, name="by hand", url="https://hand.example.com")
            assert (await _apply(http, files))[0] == 0
            smaller = yaml.safe_load(FILES)
            del smaller["status_pages"]
            smaller["monitors"] = smaller["monitors"][:1]
            files.write_text(yaml.safe_dump(smaller))
            status, lines, _ = await _apply(http, files, prune=True, dry_run=True)
            assert status == 0
            assert lines[-2:] == ["delete status_page Example status", "delete monitor site"]
            assert len(await _all(api, "/monitors")) == 3
            status, lines, _ = await _apply(http, files, prune=True)
            assert status == 0
            names = sorted(m["name"] for m in await _all(api, "/monitors"))
            assert names == ["api", "by hand"]
            assert await _all(api, "/status-pages") == []


async def test_invalid_file_names_file_line_and_field(
    deps: Dependencies, make_token: MakeToken, tmp_path: Path
) -> None:
    bad = FILES.replace("interval_seconds: 60", "interval_seconds: fast")
    bad += "  - name: Example status\n    slug: again-status\n"
    files = _write(tmp_path, bad)
    with trio.fail_after(30):
        async with _served(deps, await make_token()) as http:
            status, lines, err = await _apply(http, files)
            assert (status, lines) == (2, [])
            assert f"{files}:5: monitors api: interval_seconds: 'fast' is not of type" in err
            files.write_text(FILES + "  - name: Example status\n    slug: again-status\n")
            status, _, err = await _apply(http, files)
            assert status == 2
            assert f"{files}:31: status_pages Example status: name: given twice" in err
            files.write_text(FILES.replace("depends_on: [api]", "depends_on: [nope]"))
            status, _, err = await _apply(http, files)
            assert status == 2
            assert f"{files}:9: monitors site: depends_on: no monitors named 'nope'" in err


async def test_api_error_exits_1(deps: Dependencies, make_token: MakeToken, tmp_path: Path) -> None:
    files = _write(tmp_path, FILES.replace("https://www.example.com", "not a url at all"))
    with trio.fail_after(30):
        async with _served(deps, await make_token()) as http:
            status, _, err = await _apply(http, files)
            assert status == 1
            assert err.startswith("uptrio: POST /monitors: 422")
        async with _served(deps, "not-a-token") as http:
            status, _, err = await _apply(http, files)
            assert status == 1
            assert "401" in err


async def test_export_then_apply_into_a_fresh_account(
    deps: Dependencies, make_token: MakeToken, api_for: Any, tmp_path: Path
) -> None:
    files = _write(tmp_path, FILES)
    with trio.fail_after(30):
        async with _served(deps, await make_token()) as http:
            assert (await _apply(http, files))[0] == 0
            out, err = io.StringIO(), io.StringIO()
            await export_account(ApiClient(http), out=out, err=err)
            # slugs are unique over the service: the first account lets its page go
            status, lines, _ = await _apply(
                http, _write(tmp_path, "{}\n", "empty.yaml"), prune=True
            )
            assert (status, len(lines)) == (0, 6)
        assert err.getvalue() == (
            "uptrio: notification_channels ops hook: config.secret is a secret the API shows "
            "masked: left out, add it to the file before applying\n"
        )
        exported = yaml.safe_load(out.getvalue())
        monitors = {m["name"]: m for m in exported["monitors"]}
        assert monitors["site"]["depends_on"] == ["api"]
        assert monitors["site"]["metadata"] == {"team": "web"}
        assert monitors["api"] == {
            "name": "api",
            "url": "https://api.example.com/health",
            "type": "http",
        }, "no read-only field, no default, no managed_by"
        assert exported["notification_channels"][0]["config"] == {
            "url": "https://hooks.example.com/uptrio"
        }
        exported["notification_channels"][0]["config"]["secret"] = yaml.safe_load(FILES)[
            "notification_channels"
        ][0]["config"]["secret"]
        copy = _write(tmp_path, yaml.safe_dump(exported, allow_unicode=True), "copy.yaml")
        async with _served(deps, await make_token(account="fresh")) as http:
            status, lines, err = await _apply(http, copy)
            assert (status, err) == (0, "")
            assert all(line.startswith("create ") for line in lines)
            status, lines, _ = await _apply(http, files)
            assert status == 0
            assert all(line.startswith("unchanged ") for line in lines), lines
            fresh = await api_for(account="fresh")
            pages = await _all(fresh, "/status-pages")
            assert json.dumps(pages[0]["components"]).count('"group": "Public"') == 1


def test_the_commands_exit_1_when_the_service_is_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``uptrio apply`` and ``uptrio export`` as the console script parses and runs them
    (the logging left as the suite has it): nothing listens on port 1 of 127.0.0.1, so the
    first request fails (exit 1, the request named); an invalid file is refused before any
    request (exit 2)."""
    from web.process.cli import build_parser

    def main(argv: list[str]) -> int:
        args = build_parser().parse_args(argv)
        return int(args.run(args, argv))

    monkeypatch.setenv("UPTRIO_TOKEN", "token")
    files = _write(tmp_path, FILES)
    url = "http://127.0.0.1:1"
    assert main(["apply", "-f", str(files), "--dry-run", "--prune", "--api-url", url]) == 1
    assert main(["export", "--api-url", url]) == 1
    err = capsys.readouterr().err
    assert err.count("uptrio: GET /") == 2 and "ConnectError" in err
    files.write_text("monitors:\n  - name: x\n    type: http\n")
    assert main(["apply", "-f", str(tmp_path), "--api-url", url]) == 2
    assert f"{files}:2: monitors x: url: 'url' is a required property" in capsys.readouterr().err


ON_CALL = """\
notification_channels:
  - name: ops hook
    type: webhook
    config: {url: "https://hooks.example.com/uptrio"}
members:
  - name: Ada
    email: Ada@Example.COM
    contact_channels: [ops hook]
schedules:
  - name: primary
    time_zone: Europe/Paris
    layers:
      - name: weekly
        members: [Ada]
        rotation: {type: weekly, handoff: "2026-12-07T09:00"}
escalation_policies:
  - name: on-call
    steps:
      - delay_seconds: 0
        targets: [{channel: ops hook}, {schedule: primary}]
      - delay_seconds: 600
        targets: [{member: Ada}]
monitors:
  - name: api
    url: https://api.example.com/health
    type: http
    escalation_policy: on-call
"""


async def test_members_and_escalation_policies_by_name(
    deps: Dependencies, make_token: MakeToken, api: Api, tmp_path: Path
) -> None:
    """Step targets and contact channels name channels and members; a monitor names its
    policy; a second apply is all unchanged, and export gives the names back."""
    files = _write(tmp_path, ON_CALL)
    with trio.fail_after(30):
        async with _served(deps, await make_token()) as http:
            assert await _applied(http, files) == [
                "create notification_channel ops hook",
                "create member Ada",
                "create schedule primary",
                "create escalation_policy on-call",
                "create monitor api",
            ]
            channel = (await _all(api, "/notification-channels"))[0]
            member = (await _all(api, "/members"))[0]
            policy = (await _all(api, "/escalation-policies"))[0]
            schedule = (await _all(api, "/schedules"))[0]
            assert schedule["layers"][0]["members"] == [member["id"]]
            assert member["contact_channels"] == [channel["id"]]
            assert [s["targets"] for s in policy["steps"]] == [
                [
                    {"type": "channel", "id": channel["id"]},
                    {"type": "schedule", "id": schedule["id"]},
                ],
                [{"type": "member", "id": member["id"]}],
            ]
            assert (await _all(api, "/monitors"))[0]["escalation_policy"] == policy["id"]
            status, lines, _ = await _apply(http, files)
            assert all(line.startswith("unchanged ") for line in lines), lines
            out = io.StringIO()
            await export_account(ApiClient(http), out=out, err=io.StringIO())
        exported = yaml.safe_load(out.getvalue())
        assert exported["escalation_policies"][0]["steps"][1]["targets"] == [{"member": "Ada"}]
        assert exported["members"][0]["contact_channels"] == ["ops hook"]
        assert exported["schedules"][0]["layers"][0]["members"] == ["Ada"]
        assert "length_seconds" not in exported["schedules"][0]["layers"][0]["rotation"]
        assert exported["monitors"][0]["escalation_policy"] == "on-call"
        bad = _write(tmp_path, ON_CALL.replace("{member: Ada}", "{member: Bob}"), "bad.yaml")
        async with _served(deps, await make_token()) as http:
            status, _, err = await _apply(http, bad)
        assert status == 2
        assert f"{bad}:18: escalation_policies on-call: steps: no members named 'Bob'" in err
