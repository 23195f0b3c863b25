"""Prometheus metrics of this process, served at `/metrics`.

prometheus-client is the standard exposition library; its metrics are process-global,
which is what a scrape of one node wants.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()

FIRED = Counter("tidings_schedule_firings", "Occurrences fired by the dispatcher",
                ["target"], registry=REGISTRY)
SKIPPED = Counter("tidings_schedule_skipped",
                  "Missed occurrences not fired (older than the maximum event age)",
                  registry=REGISTRY)
DELIVERED = Counter("tidings_deliveries", "Deliveries accepted by their target",
                    ["target"], registry=REGISTRY)
FAILED = Counter("tidings_delivery_failures", "Delivery attempts that failed", ["target"],
                 registry=REGISTRY)
DEAD_LETTERED = Counter("tidings_dead_lettered",
                        "Deliveries sent to the schedule's dead-letter queue (or dropped when"
                        " it has none)", ["target"], registry=REGISTRY)
LATENESS = Histogram(
    "tidings_firing_lateness_seconds", "Actual firing time minus scheduled time",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600),
    registry=REGISTRY)
JOBS = Counter("tidings_jobs", "Jobs by outcome: succeeded, failed, duplicate (acknowledged "
               "without running: its key was done), poison (could never be a job), abandoned "
               "(still running at the shutdown deadline)", ["outcome"], registry=REGISTRY)
EMAIL_WAITING = Gauge("tidings_email_waiting",
                      "Emails accepted and not yet sent: waiting for a node with an SMTP relay,"
                      " or being retried", registry=REGISTRY)
