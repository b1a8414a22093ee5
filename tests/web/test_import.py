"""``uptrio import uptime-kuma|gatus FILE`` (docs/import.md): the apply document each
importer prints for real-world samples (tests/web/import_samples, README.md there says
where they come from), the notes on standard error, and the exit statuses.

What is printed must be what the API accepts (``assert_api_accepts``,
tests/web/import_helpers.py). No database and no network: the importers are pure
converters; the commands run in this process (parsed by ``web.process.cli.build_parser``
and run without ``main``'s logging set-up, which would bind the process's logging to
this test's captured stdout), one in a subprocess for the real exit status.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.web.helpers import CLI, ROOT, service_env
from tests.web.import_helpers import assert_api_accepts
from web.process.cli import build_parser
from web.process.cli.apply.format import kind_named
from web.process.cli.apply.loader import Desired, load_text

SAMPLES = Path(__file__).parent / "import_samples"
KUMA = SAMPLES / "kuma-backup.json"
GATUS = SAMPLES / "gatus-config.yaml"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    """``uptrio ARGV`` in this process: exit status, stdout, stderr lines."""
    args = build_parser().parse_args(list(argv))
    status = int(args.run(args, list(argv)))
    out, err = capsys.readouterr()
    return status, out, err.splitlines()


def test_kuma_backup_prints_what_the_api_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "import", "uptime-kuma", str(KUMA))
    assert status == 0
    document = yaml.safe_load(out)
    assert list(document) == [
        "notification_channels",
        "escalation_policies",
        "monitors",
        "heartbeats",
    ]
    assert_api_accepts(document)
    channels = {c["name"]: c for c in document["notification_channels"]}
    assert set(channels) == {"Ops Slack", "On-call PagerDuty", "Team Telegram"}
    assert channels["On-call PagerDuty"]["config"] == {
        "routing_key": "0123456789abcdef0123456789abcdef"
    }
    assert channels["Team Telegram"]["enabled"] is False  # inactive in Kuma
    monitors = {m["name"]: m for m in document["monitors"]}
    assert {n: m["type"] for n, m in monitors.items()} == {
        "Website": "http",
        "API health (keyword)": "http",
        "Status JSON": "http",
        "Postgres port": "tcp",
        "Ping": "ping",
        "DNS check": "dns",
    }
    website = monitors["Website"]
    assert website["assertions"] == [  # Kuma's default accepted codes, 200-299
        {"source": "status_code", "comparison": "greater_than", "target": 199},
        {"source": "status_code", "comparison": "less_than", "target": 300},
    ]
    assert website["request_headers"] == {"X-Api-Key": "abc123"}
    assert (website["interval_seconds"], website["timeout_seconds"]) == (60, 48)
    assert website["failure_threshold"] == 3  # 2 retries, then down
    assert website["metadata"] == {"group": "Core services", "imported_from": "uptime-kuma"}
    policy = website["escalation_policy"]
    [step] = next(p for p in document["escalation_policies"] if p["name"] == policy)["steps"]
    assert step == {
        "delay_seconds": 0,
        "targets": [{"channel": "On-call PagerDuty"}, {"channel": "Ops Slack"}],
    }
    keyword = monitors["API health (keyword)"]
    assert keyword["method"] == "POST"
    assert keyword["assertions"] == [
        {"source": "status_code", "comparison": "equals", "target": 200},
        {"source": "body", "comparison": "contains", "target": "healthy"},
    ]
    assert keyword["request_headers"] == {
        "Content-Type": "application/json",
        "Authorization": "Basic bW9uaXRvcjpzM2NyZXQ=",  # monitor:s3cret
    }
    assert keyword["request_body"] == '{\n    "key": "value"\n}'
    assert (keyword["tls_verify"], keyword["tls_expiry_days"]) == (False, 0)
    status_json = monitors["Status JSON"]
    assert status_json["assertions"][-1] == {
        "source": "json_body",
        "property": "$.data.status",
        "comparison": "equals",
        "target": "ok",
    }
    assert status_json["assertions"][1]["target"] == 400  # 200-299 and 300-399 joined
    assert monitors["Postgres port"]["url"] == "db.example.com:5432"
    assert monitors["Postgres port"]["escalation_policy"] == "notify On-call PagerDuty"
    [beat] = document["heartbeats"]
    assert beat == {
        "name": "Nightly backup (push)",
        "period_seconds": 86_400,
        "grace_seconds": 3600,
        "escalation_policy": policy,  # the same set of channels: the same policy
        "metadata": {"imported_from": "uptime-kuma"},
    }


def test_kuma_notes_name_the_monitor_or_notification(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(capsys, "import", "uptime-kuma", str(KUMA))
    assert status == 0
    prefix = f"{KUMA}: "
    assert all(line.startswith(prefix) for line in err)
    notes = [line.removeprefix(prefix) for line in err]
    for expected in (
        "notification \"Gotify phone\" (id 3): type 'gotify' has no Uptrio channel type; skipped",
        "monitor \"Docker container name write here\" (id 8): type 'docker' has no equivalent; "
        "skipped",
        'monitor "API health (keyword)" (id 2): request_headers may not set Host: Host, '
        "Content-Length, Transfer-Encoding and Connection belong to the probe; header not "
        "imported",
        'monitor "Status JSON" (id 3): timeout 96 s imported as 60 s',
        'monitor "Postgres port" (id 4): notification id 3 was not imported; not told',
        'monitor "Postgres port" (id 4): paused in Uptime Kuma; imported active (pause it after '
        "apply)",
        'monitor "Ping" (id 5): upside-down mode has no equivalent; imported as a normal check',
        'monitor "DNS check" (id 6): DNS server 1.1.1.1: Uptrio asks the server\'s own nameserver '
        "(--dns-nameserver)",
    ):
        assert expected in notes
    assert not any("Website" in note for note in notes)  # mapped whole


def test_gatus_config_prints_what_the_api_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "import", "gatus", str(GATUS))
    assert status == 0
    document = yaml.safe_load(out)
    assert_api_accepts(document)
    assert [c["name"] for c in document["notification_channels"]] == ["slack", "discord"]
    monitors = {m["name"]: m for m in document["monitors"]}
    assert {n: (m["type"], m["url"]) for n, m in monitors.items()} == {
        "website": ("http", "https://twin.sh/health"),
        "front-end": ("http", "https://twin.sh/health"),
        "back-end": ("http", "https://example.org/"),
        "example-dns-query": ("dns", "example.com"),
        "icmp-ping": ("ping", "example.org"),
        "check-domain-expiration": ("http", "https://example.org/"),
        "redis": ("tcp", "tcp://127.0.0.1:6379"),
    }
    website = monitors["website"]
    assert website["assertions"] == [
        {"source": "status_code", "comparison": "equals", "target": 200},
        {"source": "json_body", "property": "$.status", "comparison": "equals", "target": "UP"},
        {"source": "response_time_ms", "comparison": "less_than", "target": 300},
    ]
    assert (website["interval_seconds"], website["timeout_seconds"]) == (30, 10)
    # slack's default-alert failure-threshold 4; Gatus's default success-threshold 2
    assert (website["failure_threshold"], website["success_threshold"]) == (4, 2)
    assert website["escalation_policy"] == "notify discord, slack"
    back_end = monitors["back-end"]
    assert (back_end["expected_status_code"], back_end["tls_expiry_days"]) == (200, 2)
    assert back_end["interval_seconds"] == 300
    assert back_end["metadata"] == {"group": "core", "imported_from": "gatus"}
    assert "assertions" not in monitors["icmp-ping"]  # [CONNECTED] == true: what ping checks
    assert document["heartbeats"] == [
        {
            "name": "ext-ep-test",
            "period_seconds": 1800,
            "escalation_policy": "notify discord",
            "metadata": {"group": "core", "imported_from": "gatus"},
        }
    ]


def test_gatus_notes_name_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(capsys, "import", "gatus", str(GATUS))
    assert status == 0
    lines = GATUS.read_text().splitlines()
    notes = {line.removeprefix(f"{GATUS}: ") for line in err}
    for line, text in (
        (12, "alerting provider 'gotify' has no Uptrio channel type; skipped"),
        (56, "condition '[BODY] == 93.184.216.34' has no equivalent; skipped"),
        (69, "condition '[DOMAIN_EXPIRATION] > 720h' has no equivalent; skipped"),
        (77, "alert of type 'gotify': no such channel; not told"),
    ):
        assert f"line {line}: {text}" in notes
    assert "gotify:" in lines[11]
    assert "[BODY] == 93.184.216.34" in lines[55]
    assert "[DOMAIN_EXPIRATION]" in lines[68]
    assert "type: gotify" in lines[76]
    [grpc] = [note for note in notes if "grpc" in note]
    assert grpc.startswith("line 79: ")
    assert "name: price-aggregation-service" in lines[78]


@pytest.mark.parametrize(
    ("source", "name", "content", "message"),
    [
        ("uptime-kuma", "b.json", "{not json", "not JSON: "),
        ("uptime-kuma", "b.json", '{"version": "1.23.0"}', "not an Uptime Kuma backup"),
        ("uptime-kuma", "b.json", "[1, 2]", "not an Uptime Kuma backup"),
        ("gatus", "c.yaml", "endpoints:\n  - name: [a\n", "not YAML at line "),
        ("gatus", "c.yaml", "storage:\n  type: sqlite\n", "not a Gatus configuration"),
        ("gatus", "c.yaml", "", "not a Gatus configuration"),
    ],
)
def test_malformed_input_exits_2_with_a_clear_message(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    source: str,
    name: str,
    content: str,
    message: str,
) -> None:
    path = tmp_path / name
    path.write_text(content)
    status, out, err = _run(capsys, "import", source, str(path))
    assert (status, out) == (2, "")
    [line] = err
    assert line.startswith(f"uptrio: {path}: {message}")


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, out, err = _run(capsys, "import", "gatus", str(tmp_path / "none.yaml"))
    assert (status, out) == (2, "")
    assert err[0].startswith(f"uptrio: {tmp_path / 'none.yaml'}: cannot read it: ")


def test_the_command_exits_0_and_prints_yaml() -> None:
    done = subprocess.run(
        [*CLI, "import", "gatus", str(GATUS)],
        cwd=ROOT,
        env=service_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["monitors"][0]["name"] == "website"
    assert "line 12: alerting provider 'gotify'" in done.stderr


@pytest.mark.parametrize(("source", "sample"), [("uptime-kuma", KUMA), ("gatus", GATUS)])
def test_what_an_importer_prints_is_what_apply_loads(
    capsys: pytest.CaptureFixture[str], source: str, sample: Path
) -> None:
    """The printed document passes ``uptrio apply``'s own loader: the shipped JSON Schema
    of the format and one name per kind (docs/apply.md), as ``uptrio apply -f`` reads it."""
    status, out, _ = _run(capsys, "import", source, str(sample))
    assert status == 0
    desired = Desired()
    load_text(out, f"{source}.yaml", desired, {})
    printed = yaml.safe_load(out)
    for kind, items in printed.items():
        assert [r.name for r in desired.by_kind[kind]] == [
            i[kind_named(kind).name_field] for i in items
        ]
