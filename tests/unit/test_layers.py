"""The package's layers: lower ones never import upward, and only `settings` reads the
environment. Read from the source (every import statement, also those inside functions),
so an import that only runs on some path is caught too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tidings

SRC = Path(tidings.__file__).parent
FOUNDATION = {"errors", "clock", "version"}
LOWEST = FOUNDATION | {"model", "triggers"}
STORAGE = LOWEST | {"store", "notify"}
SERVICES = STORAGE | {"engine", "email", "targets", "settings"}

#: What each lower package may import from tidings (top-level names under `tidings.`).
ALLOWED = {
    "model": LOWEST, "triggers": LOWEST,
    "store": STORAGE, "notify": STORAGE,
    "engine": SERVICES, "email": SERVICES, "targets": SERVICES,
}


def tidings_imports(path: Path) -> set[str]:
    """The top-level `tidings.<name>` each import in the module at `path` reaches."""
    return imports_in(path.read_text(encoding="utf-8"), path.relative_to(SRC).parts[:-1])


def imports_in(source: str, package: tuple[str, ...]) -> set[str]:
    """The same, for `source` as if it lived in `tidings/<package...>/`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = ["tidings", *package[: len(package) - node.level + 1]]
                modules = [".".join([*base, *(node.module or "").split(".")]).rstrip(".")]
            else:
                modules = [node.module or ""]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] == "tidings" and len(parts) > 1:
                found.add(parts[1])
    return found


def modules_of(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_lower_layers_never_import_upward(package: str) -> None:
    assert modules_of(package), f"no modules found under tidings/{package}"
    wrong = {str(p.relative_to(SRC)): sorted(tidings_imports(p) - ALLOWED[package])
             for p in modules_of(package)}
    assert {m: names for m, names in wrong.items() if names} == {}


def test_the_engine_knows_nothing_of_its_faces() -> None:
    """The rule the composition root exists for, spelt out: the HTTP server, the CLI and
    the node sit above the engine."""
    for path in modules_of("engine"):
        assert tidings_imports(path).isdisjoint({"server", "cli", "node"}), path


def test_a_violation_would_be_seen() -> None:
    """The checker itself: imports inside functions and relative imports count."""
    source = ("import json\n"
              "def f():\n    from tidings.server.app import create_app\n"
              "    from . import queues\n    from ..node import Node\n")
    assert imports_in(source, ("engine",)) == {"server", "engine", "node"}


def test_only_settings_reads_the_environment() -> None:
    readers = [str(p.relative_to(SRC)) for p in sorted(SRC.rglob("*.py"))
               if p.name != "settings.py" and any(
                   word in p.read_text(encoding="utf-8")
                   for word in ("os.environ", "getenv(", "envvar="))]
    assert readers == []


def test_the_console_calls_engine_services_never_the_store() -> None:
    """Every console view goes through the engine, as the APIs do: no import of
    `tidings.store`, and no reach for a store through the `Tidings` handle."""
    for path in modules_of("server/console"):
        assert "store" not in tidings_imports(path), path
        source = path.read_text(encoding="utf-8")
        assert ".store." not in source and "t.store" not in source, path
