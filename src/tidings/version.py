"""The version of this tidings, read once from the installed package's metadata.

`pyproject.toml` holds the one number; the CLI's `--version`, `/health`, `/metrics`
(`tidings_build_info`), the nodes table the console shows and the database's record of
which release migrated it all read it from here.
"""

from __future__ import annotations

import importlib.metadata


def _installed() -> str:
    try:
        return importlib.metadata.version("tidings")
    except importlib.metadata.PackageNotFoundError:  # a source tree never installed
        return "0+unknown"


VERSION = _installed()
