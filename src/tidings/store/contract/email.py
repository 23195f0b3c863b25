"""Templates, the suppression list and the delivery log: what `tidings.email` asks of the
store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tidings.model.email import Delivery, StoredTemplate, Suppression, SuppressionReason
from tidings.model.messages import NewMessage
from tidings.model.states import DeliveryState


@dataclass(frozen=True)
class DeliveryQuery:
    """Filters of the delivery log (None: any)."""

    message_id: str | None = None
    recipient: str | None = None  # normalised address
    schedule_prefix: str | None = None  # "campaign/" for a campaign's deliveries
    state: DeliveryState | None = None
    created_from: int | None = None
    created_until: int | None = None  # exclusive


class EmailStore(Protocol):
    """Templates, the suppression list and the delivery log (`tidings.email`)."""

    def create_template(self, template: StoredTemplate) -> None:
        """Insert; `ConflictError` when the name is taken."""
        ...

    def update_template(self, name: str, subject: str, html: str | None, text: str | None,
                        now: int) -> StoredTemplate: ...
    def get_template(self, name: str) -> StoredTemplate: ...
    def list_templates(self, after: str | None, limit: int) -> list[StoredTemplate]: ...
    def delete_template(self, name: str) -> None: ...

    def add_suppressions(self, addresses: Sequence[str], reason: SuppressionReason,
                         now: int) -> int:
        """Add normalised addresses (existing entries keep their reason); returns how many
        were new."""
        ...

    def remove_suppression(self, address: str) -> bool: ...
    def suppressed_among(self, addresses: Sequence[str]) -> dict[str, Suppression]: ...
    def list_suppressions(self, reason: SuppressionReason | None, after: str | None,
                          limit: int) -> list[Suppression]: ...

    def insert_delivery(self, delivery: Delivery) -> bool:
        """False when a delivery with this id exists (left untouched)."""
        ...

    def record_deliveries(self, deliveries: Sequence[Delivery]) -> list[bool]:
        """Insert each, or move the existing row if it is still QUEUED (compare-and-set:
        False where it was already final); one transaction."""
        ...

    def update_delivery(self, delivery_id: str, current: DeliveryState, new: DeliveryState,
                        detail: str | None, attempts: int, now: int) -> bool:
        """Compare-and-set from `current`; False when it is missing or no longer `current`."""
        ...

    def get_delivery(self, delivery_id: str) -> Delivery | None: ...
    def get_deliveries(self, delivery_ids: Sequence[str]) -> dict[str, Delivery]: ...
    def sent_to_since(self, wanted: Sequence[tuple[str, int]]) -> list[int]:
        """For each (normalised address, instant): how many SENT deliveries went to the
        address since then, in one read."""
        ...

    def take_warmup(self, day: int, ladder: Sequence[int],
                    wanted: Sequence[tuple[str, int]]) -> list[int]:
        """A warm-up's daily caps (TIDINGS_EMAIL_WARMUP): for each (sending domain, how
        many emails it would send now), how many it may, counted against the cap of
        UTC day `day` (`ladder[day - the domain's first day]`; none past the ladder's
        end) and added to the day's count; one transaction, so nodes granting at once
        never pass the cap between them."""
        ...

    def list_deliveries(self, recipient: str | None, state: DeliveryState | None,
                        before: int | None, limit: int) -> list[Delivery]:
        """Newest first; `before` is the `seq` of the previous page's last row."""
        ...

    def resend_deliveries(self, resends: Sequence[tuple[Delivery, NewMessage]],
                          queue_id: int, now: int) -> list[bool]:
        """Put each delivery back to QUEUED (compare-and-set from the state it was read
        in) and, for those that won, write its new job message to the queue; one
        transaction, so a delivery is resent once per resend and never lost between the
        two."""
        ...

    def find_deliveries(self, query: DeliveryQuery, after: int, limit: int,
                        ) -> list[Delivery]:
        """Deliveries matching every given filter, oldest first, after the `seq` `after`."""
        ...

    def delivery_state_counts(self, schedule_prefix: str) -> dict[str, int]:
        """Delivery-log rows whose `schedule` starts with the prefix, by state."""
        ...
