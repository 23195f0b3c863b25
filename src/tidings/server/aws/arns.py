"""Queue URLs and ARNs as SQS shapes them, and the queue name inside either.

A queue URL is `{base}/{account_id}/{queue_name}` and an ARN
`arn:aws:sqs:{region}:{account_id}:{queue_name}`. Clients echo back whatever URL they were
given, so a request is resolved by the URL's last path segment alone: the same queue stays
reachable through a proxy, a different host name or a bare path.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidings.errors import ValidationError


@dataclass(frozen=True)
class Naming:
    region: str
    account_id: str
    public_url: str | None = None

    def base_url(self, scheme: str, host: str | None) -> str:
        """Where clients reach this node: the configured public URL, else the Host they used."""
        if self.public_url:
            return self.public_url.rstrip("/")
        return f"{scheme}://{host or '127.0.0.1'}"

    def queue_url(self, base: str, name: str) -> str:
        return f"{base}/{self.account_id}/{name}"

    def queue_arn(self, name: str) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account_id}:{name}"


def name_from_url(url: object, field: str = "QueueUrl") -> str:
    """The queue name in a queue URL (full URL, path, or bare name)."""
    if not isinstance(url, str) or not url:
        raise ValidationError(field, "is required")
    name = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    if not name:
        raise ValidationError(field, f"{url!r} names no queue")
    return name


def name_from_arn(arn: object, field: str) -> str:
    """The queue name in an SQS ARN; anything that is not an `arn:aws:sqs:` ARN is refused."""
    if not isinstance(arn, str) or not arn:
        raise ValidationError(field, "is required")
    parts = arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not parts[5]:
        raise ValidationError(field, f"{arn!r} is not an SQS queue ARN")
    return parts[5]
