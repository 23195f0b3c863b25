"""Console views of email."""

from __future__ import annotations

from starlette.routing import Route

from tidings.server.console.web import Console


def routes(console: Console) -> list[Route]:
    return []
