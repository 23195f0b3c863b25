"""One frozen `Settings`, read from `TIDINGS_*` variables; CLI flags override them."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any

from tidings.errors import ValidationError
from tidings.store import DEFAULT_URL


@dataclass(frozen=True)
class Settings:
    db: str = DEFAULT_URL
    host: str = "127.0.0.1"
    port: int = 9324
    app: str | None = None  # "module:attribute" of a tidings.App
    concurrency: int = 8
    shutdown_grace_s: float = 30.0
    sweep_interval_s: float = 5.0
    job_memory_s: int = 14 * 24 * 3600  # how long a finished job id is remembered
    region: str = "us-east-1"
    account_id: str = "000000000000"
    public_url: str | None = None  # how clients reach this node, for queue URLs
    # AWS-API credentials: TIDINGS_AWS_KEYS="AKID:SECRET,AKID2:SECRET2" and/or a file of
    # `AKID SECRET` lines or a JSON object {"AKID": "SECRET"}. None of either: no SigV4 check.
    aws_keys: str | None = None
    aws_keys_file: str | None = None
    log_level: str = "info"
    # Email: the relay (smtp://user:pass@host:587 or smtps://…); None = email deliveries
    # fail with a clear, non-retryable error. Rate in messages/s (0 = no limit) and the
    # cap on simultaneous SMTP sessions, both per relay. Unsubscribe links use public_url.
    smtp_url: str | None = None
    smtp_max_rate: float = 0.0
    smtp_max_connections: int = 4
    dkim_key_file: str | None = None  # PEM private key; with dkim_selector and dkim_domain
    dkim_selector: str | None = None
    dkim_domain: str | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> Settings:
        env = dict(os.environ) if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"TIDINGS_{f.name.upper()}")
            if raw is None:
                continue
            values[f.name] = _convert(f.name, f.type, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return replace(cls(), **values)


def _convert(name: str, type_name: Any, raw: str) -> Any:
    kind = str(type_name)
    try:
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError:
        raise ValidationError(f"TIDINGS_{name.upper()}", f"must be a number, got {raw!r}") from None
    return raw
