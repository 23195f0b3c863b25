"""tidings: durable queues, schedules and per-recipient delivery in one process."""
