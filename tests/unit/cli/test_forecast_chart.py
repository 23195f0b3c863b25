"""`tidings forecast`'s text: a limited key's line says what holds it back (its rate, its
concurrency with the duration assumed, its pause) and when its burst drains."""

from __future__ import annotations

from tidings.campaigns.service import Forecast
from tidings.cli.forecast_chart import render

START = 1_803_888_000_000  # 2027-03-01 08:00 UTC


def test_a_limited_key_says_when_it_drains_or_that_it_does_not() -> None:
    fc = Forecast(START, 60_000, 3, {"queue": [0, 5, 0]}, {"queue": [0, 5, 0]}, limited=[
        {"key": "queue:orders", "rate": "2/min", "firings": 5, "started": [0, 2, 2],
         "drains_at_ms": None},
        {"key": "webhook:a.example", "rate": "5/s", "firings": 5, "started": [0, 5, 0],
         "drains_at_ms": START + 120_000}])
    text = "\n".join(render(fc))
    assert "queue:orders started (rate 2/min): peak 2" in text
    assert "queue:orders (rate 2/min): 5 firings, not drained within the horizon" in text
    assert "webhook:a.example (rate 5/s): 5 firings, drained by 03-01 08:02 UTC" in text


def test_a_concurrency_and_a_pause_are_named() -> None:
    fc = Forecast(START, 60_000, 3, {"webhook": [5, 0, 0]}, {"webhook": [5, 0, 0]}, limited=[
        {"key": "webhook:a.example", "rate": None, "concurrency": 2,
         "paused_until_ms": START + 60_000, "mean_duration_ms": 30_000, "firings": 5,
         "started": [0, 4, 1], "drains_at_ms": START + 180_000}])
    text = "\n".join(render(fc))
    assert ("webhook:a.example (concurrency 2, 30 s each; paused until 03-01 08:01 UTC): "
            "5 firings, drained by 03-01 08:03 UTC") in text
