"""Uptrio's engine: the actors of every kind (monitors probing real targets, heartbeats
waiting for the pings of jobs) under supervisors, reached through one handle and one
verb (``docs/architecture.md``).

Imports ``store`` (records, the store actor) and nothing of ``web``; other packages
import only the names below (checked by the import contracts in ``pyproject.toml``).
"""

from .actor import ActorRef, ActorUnavailable, AskTimeout, ask
from .channels import (
    CHANNEL_TYPES,
    Attempt,
    ChannelSettings,
    InvalidChannelConfig,
    Message,
    SmtpNotConfigured,
    mask_config,
    send,
    validate_config,
)
from .engine import Engine, run_engine
from .handle import EngineHandle, PingTarget
from .health import Health, after_check
from .heartbeat import PING_KINDS, HeartbeatState, Ping, run_heartbeat
from .heartbeat_group import HeartbeatGroup, HeartbeatHandle
from .kind import Apply, EngineContext, Kind, Runner, ShardContext
from .kinds import KINDS
from .leases import Holding, LeaseSettings, run_leases
from .listener import ListenerSettings, run_listener
from .mailbox import Mailbox
from .monitor import EngineStatistics, probe_spec
from .notifier import NotifierSettings, run_notifier
from .observer import CheckObserver
from .page_mailer import run_page_mailer
from .policy import TargetPolicy
from .probes import (
    MAX_ASSERTIONS,
    MAX_CA_BUNDLE_BYTES,
    MAX_REQUEST_BODY_CHARS,
    MAX_REQUEST_HEADERS,
    PROBE_TYPES,
    Comparison,
    InvalidAssertion,
    InvalidCaBundle,
    InvalidRequestHeaders,
    Prober,
    ProbeResult,
    ProbeSpec,
    Source,
    SourceAddress,
    check_assertions,
    check_ca_bundle,
    check_request_headers,
    http_fields_apply,
    nameserver_resolver,
    parse_target,
    source_address,
)
from .settings import EngineSettings
from .shard import shard_of
from .signing import SIGNATURE_HEADER, signature_header
from .supervisor import (
    Backoff,
    ChildInfo,
    ChildSpec,
    Intensity,
    RestartType,
    Supervisor,
    SupervisorEscalation,
    SupervisorStatistics,
    open_supervisor,
)
from .targets import InvalidTarget
from .walker import WalkerSettings, run_escalations, run_shift_reminders, run_window_walk
from .webhooks import WebhookSettings, run_webhook_sender

__all__ = [
    "CHANNEL_TYPES",
    "KINDS",
    "MAX_ASSERTIONS",
    "MAX_CA_BUNDLE_BYTES",
    "MAX_REQUEST_BODY_CHARS",
    "MAX_REQUEST_HEADERS",
    "PING_KINDS",
    "PROBE_TYPES",
    "SIGNATURE_HEADER",
    "ActorRef",
    "ActorUnavailable",
    "Apply",
    "AskTimeout",
    "Attempt",
    "Backoff",
    "ChannelSettings",
    "CheckObserver",
    "ChildInfo",
    "ChildSpec",
    "Comparison",
    "Engine",
    "EngineContext",
    "EngineHandle",
    "EngineSettings",
    "EngineStatistics",
    "Health",
    "HeartbeatGroup",
    "HeartbeatHandle",
    "HeartbeatState",
    "Holding",
    "Intensity",
    "InvalidAssertion",
    "InvalidCaBundle",
    "InvalidChannelConfig",
    "InvalidRequestHeaders",
    "InvalidTarget",
    "Kind",
    "LeaseSettings",
    "ListenerSettings",
    "Mailbox",
    "Message",
    "NotifierSettings",
    "Ping",
    "PingTarget",
    "ProbeResult",
    "ProbeSpec",
    "Prober",
    "RestartType",
    "Runner",
    "ShardContext",
    "SmtpNotConfigured",
    "Source",
    "SourceAddress",
    "Supervisor",
    "SupervisorEscalation",
    "SupervisorStatistics",
    "TargetPolicy",
    "WalkerSettings",
    "WebhookSettings",
    "after_check",
    "ask",
    "check_assertions",
    "check_ca_bundle",
    "check_request_headers",
    "http_fields_apply",
    "mask_config",
    "nameserver_resolver",
    "open_supervisor",
    "parse_target",
    "probe_spec",
    "run_engine",
    "run_escalations",
    "run_heartbeat",
    "run_leases",
    "run_listener",
    "run_notifier",
    "run_page_mailer",
    "run_shift_reminders",
    "run_webhook_sender",
    "run_window_walk",
    "send",
    "shard_of",
    "signature_header",
    "source_address",
    "validate_config",
]
