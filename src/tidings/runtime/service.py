"""What a node runs (its sweeper, dispatcher, consumers, child processes): a loop that
`run()` until `stop()`, which the node starts together and stops together (node.py, and
a child process's body, child_process.py)."""

from __future__ import annotations

from typing import Protocol


class Service(Protocol):
    async def run(self) -> None: ...
    def stop(self) -> None: ...
