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

#: What each package below the faces may import from tidings (top-level names under
#: `tidings.`), one rule per package. The services stack in this order: the runtime
#: (threads, group commit, back-off, metrics), queues, email, targets, schedules (whose
#: dispatcher fires into targets), jobs (consumers and deliveries), and beside them
#: campaigns and ops (the node's housekeeping); each may import only those below it.
ALLOWED = {
    "model": LOWEST, "triggers": LOWEST,
    "store": STORAGE, "notify": STORAGE,
    "runtime": STORAGE | {"runtime"},
    "limits": STORAGE | {"runtime", "limits"},
    "queues": STORAGE | {"runtime", "queues"},
    "email": STORAGE | {"runtime", "queues", "email", "settings"},
    "targets": STORAGE | {"runtime", "queues", "email", "targets", "settings"},
    "schedules": STORAGE | {"runtime", "queues", "email", "targets", "schedules", "limits"},
    "jobs": STORAGE | {"runtime", "queues", "targets", "schedules", "jobs", "limits"},
    "campaigns": STORAGE | {"runtime", "email", "targets", "schedules", "campaigns"},
    "ops": STORAGE | {"runtime", "queues", "schedules", "ops"},
    "push": STORAGE | {"runtime", "limits", "queues", "targets", "push"},
}
SERVICES = ("runtime", "limits", "queues", "email", "targets", "schedules", "jobs", "campaigns",
            "ops", "push")


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


@pytest.mark.parametrize("package", SERVICES)
def test_the_services_know_nothing_of_their_faces(package: str) -> None:
    """The rule the composition root exists for, spelt out: the HTTP server, the CLI, the
    client handle and the node sit above every service."""
    for path in modules_of(package):
        assert tidings_imports(path).isdisjoint({"server", "cli", "node", "client", "app"}), path


def test_no_package_imports_another_that_imports_it_back() -> None:
    """No import cycle between the packages (or top-level modules) of `src/tidings`: every
    import, inside functions too, is an edge; a path back to where it started fails."""
    edges: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).parts
        here = rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")
        if here in {"__init__", "__main__"}:
            continue
        edges.setdefault(here, set()).update(tidings_imports(path) - {here})

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
        return False

    cycles = sorted({" <-> ".join(sorted((a, b))) for a, bs in edges.items() for b in bs
                     if reaches(b, a)})
    assert cycles == []


def test_the_engine_is_no_longer_one_flat_package() -> None:
    assert not (SRC / "engine").exists()


def test_a_violation_would_be_seen() -> None:
    """The checker itself: imports inside functions and relative imports count."""
    source = ("import json\n"
              "def f():\n    from tidings.server.app import create_app\n"
              "    from . import queues\n    from ..node import Node\n")
    assert imports_in(source, ("queues",)) == {"server", "queues", "node"}


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
