"""Per-subscription metrics (labelled by queue), in the process's registry
(`runtime/metrics.py`), served at `/metrics` with the rest."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from tidings.runtime.metrics import REGISTRY

PUSHED = Counter("tidings_push_pushed", "Messages pushed and acknowledged by a 2xx",
                 ["queue"], registry=REGISTRY)
FAILED = Counter("tidings_push_failed", "Pushes that failed, by the endpoint's status "
                 "(`none`: no answer: a timeout, a refused connection)", ["queue", "status"],
                 registry=REGISTRY)
HELD = Counter("tidings_push_held", "429/503 answers with Retry-After that held a "
               "subscription back", ["queue"], registry=REGISTRY)
LATENCY = Histogram("tidings_push_latency_seconds", "From a push's request to the "
                    "endpoint's answer", ["queue"], registry=REGISTRY,
                    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                             5, 10, 30, 60))
IN_FLIGHT = Gauge("tidings_push_in_flight", "Pushes waiting for their endpoint's answer "
                  "on this node", ["queue"], registry=REGISTRY)
