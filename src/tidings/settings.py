"""One frozen `Settings`: every `TIDINGS_*` variable, validated once; CLI flags override them.

Nothing else in tidings reads the environment. A module that needs a setting is handed
it, so a test can build any configuration without touching `os.environ`, and a misspelt
value stops the process at start-up naming the variable, instead of quietly becoming a
default somewhere deep inside. A misspelt *name* (`TIDINGS_PROT`) is warned about once per
process, with the nearest setting's name: refusing it would stop a fleet whose
environment also carries a newer release's variables.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from types import MappingProxyType
from typing import Any

from tidings.errors import ValidationError
from tidings.notify.base import POLL_FALLBACK_S
from tidings.store import DEFAULT_URL

log = logging.getLogger("tidings.settings")

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")  # uvicorn's names
SQLITE_SYNCHRONOUS = ("NORMAL", "FULL", "EXTRA")
SQLITE_CHECKS = ("quick", "full", "off")
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _setting(default: Any, help: str, *, low: float | None = None,
             high: float | None = None, above: float | None = None,
             choices: tuple[str, ...] = (), secret: bool = False) -> Any:
    """A field with its `--help` line and its rule: `low`/`high` inclusive bounds, `above`
    an exclusive lower bound, `choices` a closed set. Secrets stay out of `repr`, which
    ends up in logs and tracebacks."""
    meta = {"help": help, "low": low, "high": high, "above": above, "choices": choices}
    if isinstance(default, Mapping):
        frozen = MappingProxyType(dict(default))
        return field(default_factory=lambda: frozen, repr=not secret, metadata=meta)
    return field(default=default, repr=not secret, metadata=meta)


@dataclass(frozen=True)
class Settings:
    db: str = _setting(DEFAULT_URL, "Database: sqlite:///path.db or postgresql://…",
                       secret=True)
    host: str = _setting("127.0.0.1", "Interface the HTTP API listens on (loopback only "
                         "by default).")
    port: int = _setting(9324, "TCP port of the HTTP API.", low=0, high=65535)
    app: str | None = _setting(None, "Your tidings.App as module:attribute, to run its "
                               "consumers.")
    concurrency: int = _setting(8, "Messages handled at once by consumers.", low=1)
    shutdown_grace_s: float = _setting(30.0, "Seconds running jobs get to finish on SIGTERM.",
                                       low=0)
    sweep_interval_s: float = _setting(5.0, "Seconds between maintenance sweeps.", above=0)
    poll_fallback_s: float = _setting(POLL_FALLBACK_S, "Seconds a node's consumers and "
                                      "dispatcher sleep at most without a wake-up: what a "
                                      "lost one can cost. Give every process of a database "
                                      "the same value.", above=0)
    job_memory_s: int = _setting(14 * 24 * 3600, "Seconds a finished job id is remembered "
                                 "(a job runs to success at most once within it).", low=0)
    firing_history_s: int = _setting(86_400, "Seconds the firing history (each schedule's "
                                     "last firings, on the console) is kept.", low=60)
    region: str = _setting("us-east-1", "AWS region shown in queue URLs and ARNs.")
    account_id: str = _setting("000000000000", "AWS account id shown in queue URLs and ARNs.")
    public_url: str | None = _setting(None, "How clients reach this node, for queue URLs and "
                                      "unsubscribe links.")
    # AWS-API credentials: TIDINGS_AWS_KEYS="AKID:SECRET,AKID2:SECRET2" and/or a file of
    # `AKID SECRET` lines or a JSON object {"AKID": "SECRET"}. None of either: no SigV4 check.
    aws_keys: str | None = _setting(None, "AWS API credentials, AKID:SECRET pairs separated "
                                    "by commas; none: signatures are not checked.", secret=True)
    aws_keys_file: str | None = _setting(None, "File of AWS API credentials: AKID SECRET lines "
                                         "or a JSON object.")
    log_level: str = _setting("info", "Log level.", choices=LOG_LEVELS)
    # Email: the relay (smtp://user:pass@host:587 or smtps://…); None = email deliveries
    # fail with a clear, non-retryable error. Rate in messages/s (0 = no limit) and the
    # cap on simultaneous SMTP sessions, both per relay. Unsubscribe links use public_url.
    smtp_url: str | None = _setting(None, "Relay for email, smtp://user:pass@host:587 or "
                                    "smtps://….", secret=True)
    smtp_max_rate: float = _setting(0.0, "Emails per second through the relay (0: no limit).",
                                    low=0)
    smtp_max_connections: int = _setting(4, "Simultaneous SMTP sessions with the relay.", low=1)
    smtp_domain_rates: str | None = _setting(None, "Emails per second per recipient domain, "
                                             "e.g. gmail.com=20,yahoo.com=10 (*: any other "
                                             "domain).")
    email_daily_cap: int = _setting(0, "At most this many list emails to one recipient per "
                                    "local day (0: no cap).", low=0)
    email_warmup: str | None = _setting(None, "A new sending domain's warm-up: its daily "
                                        "caps day by day from its first send, e.g. "
                                        "50,100,250,500,1000 (UTC days; no cap past the "
                                        "last); none: no warm-up.")
    email_soft_bounces: int = _setting(3, "Soft bounces of one address within "
                                       "TIDINGS_EMAIL_SOFT_BOUNCE_DAYS that put it on the "
                                       "suppression list (0: never).", low=0)
    email_soft_bounce_days: float = _setting(7.0, "The window soft bounces are counted in, "
                                             "in days.", above=0)
    smtp_backoff_max_s: float = _setting(60.0, "Longest pause before trying again a relay "
                                         "that is down or asked to slow down.", above=0)
    smtp_relay_wait_s: float = _setting(300.0, "Seconds an email waits for a relay that is "
                                        "down or slowed before that counts as a failed "
                                        "attempt.", above=0)
    bounce_address: str | None = _setting(None, "Envelope sender (Return-Path) of email, "
                                          "bounces@your.domain: each message gets "
                                          "bounces+<delivery id>@your.domain (VERP), so "
                                          "the DSNs that come back name their delivery.")
    bounce_listen: str | None = _setting(None, "host:port of the inbound SMTP listener for "
                                         "bounces (DSNs) and complaints (ARF reports); "
                                         "none: not started.")
    sns_verify: bool = _setting(True, "Believe an SES notification only in an SNS message "
                                "whose signature holds (and confirm an SNS subscription "
                                "itself).")
    sns_cert_host: str = _setting(r"sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?",
                                  "The hosts (a regular expression of host or host:port) "
                                  "SNS signing certificates and subscription links may "
                                  "come from.")
    sns_ca_file: str | None = _setting(None, "CA certificates to trust when fetching SNS "
                                       "signing certificates (default: the system's).")
    insecure_unsubscribe_links: bool = _setting(
        False, "Deliver email from a node beyond loopback without an https "
        "TIDINGS_PUBLIC_URL (unsubscribe links mail providers refuse; warned once).")
    dkim_key_file: str | None = _setting(None, "PEM private key to DKIM-sign email with.")
    dkim_selector: str | None = _setting(None, "DKIM selector (with the key file).")
    dkim_domain: str | None = _setting(None, "DKIM signing domain (with the key file).")
    secret: str | None = _setting(None, "Receipt-handle signing key (default: a random key "
                                  "kept in the database).", secret=True)
    webhook_secret: str | None = _setting(None, "Webhook HMAC signing key (default: a random "
                                          "key kept in the database).", secret=True)
    lambda_webhooks: Mapping[str, str] = _setting(
        {}, 'Lambda function names delivered as HTTP webhooks: {"name": "https://…"}.')
    sqlite_synchronous: str = _setting("NORMAL", "SQLite durability: NORMAL survives a kill "
                                       "-9, FULL a power loss too.", choices=SQLITE_SYNCHRONOUS)
    sqlite_cache_mb: int = _setting(32, "SQLite page cache, MB: bounded, so the RSS does not "
                                    "follow the database's size; raise it for millions of "
                                    "schedules firing thousands a second.", low=1)
    sqlite_check: str = _setting("quick", "What a node checks of its SQLite file at start: "
                                 "quick (quick_check: every page, ~1 s per 300 MB), full "
                                 "(integrity_check: also every index against its table, "
                                 "~2.5x as long) or off (damage met later still makes the "
                                 "node not ready).", choices=SQLITE_CHECKS)
    smtp_sink_dir: str = _setting("smtp-sink", "Where `tidings smtp-sink` keeps messages.")
    # Security (docs/security.md). A node on loopback with no credentials is a development
    # node and keeps every door open; beyond loopback it refuses to start without them.
    api_tokens: str | None = _setting(None, "Native API bearer tokens, scope:token pairs "
                                      "separated by commas (scopes: read, operate, admin).",
                                      secret=True)
    api_tokens_file: str | None = _setting(None, "File of native API tokens: 'scope "
                                           "sha256-of-token [name]' lines (tidings token new).")
    insecure_no_auth: bool = _setting(False, "Listen beyond loopback without credentials "
                                      "(a warning repeats every minute).")
    url: str | None = _setting(None, "A remote node's URL for the CLI and tidings.remote "
                               "(instead of opening the database).")
    token: str | None = _setting(None, "Bearer token the CLI and tidings.remote send to a "
                                 "remote node.", secret=True)
    webhook_guard: str = _setting("auto", "Refuse webhooks to non-public addresses: on, "
                                  "off, auto (on unless a development node).",
                                  choices=("auto", "on", "off"))
    webhook_allow: str | None = _setting(None, "Webhook destinations allowed despite the "
                                         "guard: CIDRs and host names, comma-separated.")
    webhook_https_only: bool = _setting(False, "Refuse webhooks that are not https://.")
    email_identities: str | None = _setting(None, "Verified senders: addresses or domains, "
                                            "comma-separated (also SES v2 email identities).")
    max_long_polls: int = _setting(1000, "Long-poll receives waiting at once on this node.",
                                   low=1)
    client_timeout_s: float = _setting(30.0, "Seconds a client may take to send a request "
                                       "body before it gets a 408.", above=0)
    tls_cert: str | None = _setting(None, "PEM certificate (chain) for direct HTTPS.")
    tls_key: str | None = _setting(None, "PEM private key for direct HTTPS.")
    trusted_proxies: str | None = _setting(None, "Reverse proxies whose X-Forwarded-* "
                                           "headers are believed: IPs, comma-separated.")
    dispatcher: str = _setting("auto", "Where schedules fire: process (a child process beside "
                               "the node, on a second core), inline (in the node's own "
                               "process), auto (process on a SQLite file, else inline).",
                               choices=("auto", "process", "inline"))
    email_sender: str = _setting("auto", "Where email is sent: process (a child process "
                                 "sends beside the node, on a second core; the relay's "
                                 "connections and rates are split between the two), inline "
                                 "(the node alone), auto (process on a machine with two or "
                                 "more cores, a database file or server, and at least two "
                                 "relay connections).", choices=("auto", "process", "inline"))
    # Testing only (tests/integration/test_clock_steps.py): step this node's wall clock.
    clock_offset_file: str | None = _setting(None, "Testing only: a file of milliseconds "
                                             "added to this node's wall clock, re-read "
                                             "when it changes.")

    @property
    def loopback_only(self) -> bool:
        """True when the HTTP API listens on a loopback interface only."""
        return is_loopback(self.host)

    @property
    def has_credentials(self) -> bool:
        return bool(self.api_tokens or self.api_tokens_file or self.aws_keys
                    or self.aws_keys_file)

    @property
    def credentials_required(self) -> bool:
        """Whether every API of the node (native, AWS, console) demands credentials: when
        any credential is configured, loopback included (behind a reverse proxy on the
        same host every client comes from loopback), and beyond loopback unless
        `--insecure-no-auth`. An API with none of its own configured then refuses every
        call, saying which to set."""
        return self.has_credentials or not (self.loopback_only or self.insecure_no_auth)

    @property
    def development_node(self) -> bool:
        """Loopback and no credentials: the node of one developer, every door open (as
        before tidings was secure by default; the test suite runs this way)."""
        return self.loopback_only and not self.has_credentials

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            checked = _check(f.name, f.metadata, value)
            if checked is not value:
                object.__setattr__(self, f.name, checked)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from `TIDINGS_*` variables; `overrides` that are not None (CLI flags)
        beat them, and the defaults fill the rest."""
        if env is None:
            env = os.environ
            warn_unknown(env, cls)
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(variable(f.name))
            if raw is not None:
                values[f.name] = _convert(f.name, str(f.type), raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def values(self) -> dict[str, Any]:
        """Every value, JSON-ready (mappings as dicts): how a node hands its settings,
        secrets too, to the dispatcher process it starts, over a pipe rather than a
        command line anyone on the machine can read."""
        return {f.name: dict(v) if isinstance(v := getattr(self, f.name), Mapping) else v
                for f in fields(self)}

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Settings:
        return cls(**values)

    @classmethod
    def described(cls) -> list[tuple[str, str]]:
        """(variable, help with its default) for every setting, for `--help`."""
        out = []
        for f in fields(cls):
            default = f.default if f.default_factory is MISSING else f.default_factory()
            shown = "" if default in (None, "", {}) else f" Default: {_shown(default)}."
            out.append((variable(f.name), f"{f.metadata['help']}{shown}"))
        return out


def unknown_variables(env: Mapping[str, str], settings: type[Settings] = Settings,
                      ) -> list[tuple[str, str | None]]:
    """Each `TIDINGS_*` variable of `env` that is no setting, with the setting whose name
    is nearest (None when none is near), sorted."""
    known = {f.name.upper() for f in fields(settings)}
    out = []
    for name in sorted(env):
        if not name.startswith("TIDINGS_") or name[len("TIDINGS_"):] in known \
                or name.startswith(NOT_SETTINGS):
            continue
        near = difflib.get_close_matches(name[len("TIDINGS_"):], known, n=1, cutoff=0.6)
        out.append((name, f"TIDINGS_{near[0]}" if near else None))
    return out


#: Variables of tidings' own test suite and benchmarks (tests/, bench/), which the processes
#: they start inherit: no setting, and no typo of one.
NOT_SETTINGS = ("TIDINGS_TEST_", "TIDINGS_BENCH_", "TIDINGS_CRASH_", "TIDINGS_FUZZ_")

_warned_unknown = False


def warn_unknown(env: Mapping[str, str], settings: type[Settings] = Settings) -> None:
    """Log each unknown `TIDINGS_*` variable once per process (the first time the settings
    are read from the environment): a typo otherwise silently becomes a default."""
    global _warned_unknown
    if _warned_unknown:
        return
    _warned_unknown = True
    for name, near in unknown_variables(env, settings):
        hint = f"did you mean {near}?" if near else "`tidings serve --help` lists them"
        log.warning("%s is not a tidings setting and is ignored: %s", name, hint)


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1); a name is not resolved."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def variable(name: str) -> str:
    return f"TIDINGS_{name.upper()}"


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _convert(name: str, kind: str, raw: str) -> Any:
    """The environment's text as the field's type; an empty optional value means unset."""
    var = variable(name)
    if kind.endswith("| None") and not raw.strip():
        return None
    if kind.startswith("int"):
        try:
            return int(raw)
        except ValueError:
            raise ValidationError(var, f"must be an integer, got {raw!r}") from None
    if kind.startswith("float"):
        try:
            return float(raw)
        except ValueError:
            raise ValidationError(var, f"must be a number, got {raw!r}") from None
    if kind.startswith("bool"):
        try:
            return _BOOLEANS[raw.strip().lower()]
        except KeyError:
            raise ValidationError(var, "must be one of true, false, 1, 0, yes, no") from None
    if kind.startswith("Mapping"):
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise ValidationError(var, "must be a JSON object "
                                  '{"function name": "https://..."}') from None
    return raw


def _check(name: str, meta: Mapping[str, Any], value: Any) -> Any:
    """Apply the field's rule; returns the value, normalised (case, immutability)."""
    var = variable(name)
    choices: tuple[str, ...] = meta.get("choices", ())
    if choices:
        # Case-insensitive, as SQLite's pragmas and Python's log levels are.
        known = {c.lower(): c for c in choices}.get(str(value).lower())
        if known is None:
            raise ValidationError(var, f"must be one of {', '.join(choices)}, got {value!r}")
        return known
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high, above = meta.get("low"), meta.get("high"), meta.get("above")
        if low is not None and high is not None and not low <= value <= high:
            raise ValidationError(var, f"must be from {_shown(low)} to {_shown(high)}, "
                                  f"got {_shown(value)}")
        if low is not None and high is None and value < low:
            raise ValidationError(var, f"must be {_shown(low)} or more, got {_shown(value)}")
        if above is not None and value <= above:
            raise ValidationError(var, f"must be more than {_shown(above)}, got {_shown(value)}")
    if name == "lambda_webhooks":
        return _webhooks(var, value)
    return value


def _webhooks(var: str, doc: Any) -> Mapping[str, str]:
    if not isinstance(doc, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and re.match(r"^https?://", v)
            for k, v in doc.items()):
        raise ValidationError(var, "must map function names to http:// or https:// URLs")
    return doc if isinstance(doc, MappingProxyType) else MappingProxyType(dict(doc))
