"""A/B: the same benchmarks on two git revisions, alternately, on the same machine.

    python bench/ab.py A_REV B_REV [--rounds 3] [--backends sqlite,postgres]
                       [--bench "queue_throughput.py --n 50000" ...] [--pg URL]

Checks each revision out into a worktree of its own in a temporary folder (`git worktree
add --detach`, removed at the end), then runs every benchmark A, B, B, A, A, B …
(`--rounds` pairs) on each backend, each run in its own revision's tree with its own `bench/` script
and `src/` (PYTHONPATH), so a change to a benchmark script is part of what is compared.
Alternating, and swapping which side goes first every other round, spreads the
machine's drift (other load, thermal, caches) over both sides instead of charging it to
whichever ran second.

Backends: a benchmark run without `--db` makes a SQLite file in a temporary folder; for
PostgreSQL each run gets `--db` with a schema of its own, made before and dropped after
(in the database `--pg` names), so no run sees another's rows.

Prints, per benchmark, backend and figure, the median of A's runs, of B's and B/A (a
figure that is the same in every run, such as `n`, is left out), then a final JSON line:
{"a", "b", "rounds", "results": [{"bench", "backend", "figure", "a", "b", "ratio"}],
"failures": [{"bench", "backend", "side", "error"}]}.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The figures of issue 31's "within 5 %" rule, at sizes that run in about a minute each
#: on a quiet machine (delayed_jobs waits out its 60 s spread: ~1.5 min).
DEFAULT_BENCHES = (
    "consumers.py --n 50000",
    "delayed_jobs.py --n 100000 --spread 60",
    "schedules.py --n 100000 --steady-s 10",
    "queue_throughput.py --n 50000 --latency-n 5000",
    "aws_api.py --seconds 10",
)
PG_DEFAULT = os.environ.get("TIDINGS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, text=True,
                          capture_output=True).stdout.strip()


@contextmanager
def worktrees(repo: Path, revs: list[str]) -> Iterator[list[Path]]:
    """A detached worktree per revision in a temporary folder, removed afterwards (also
    on Ctrl-C)."""
    root = Path(tempfile.mkdtemp(prefix="tidings-ab-"))
    made: list[Path] = []
    try:
        for i, rev in enumerate(revs):
            path = root / "ab"[i]
            git(repo, "worktree", "add", "--detach", str(path), rev)
            made.append(path)
        yield made
    finally:
        removed = [subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force",
                                   str(path)], capture_output=True).returncode == 0
                   for path in made]
        if not all(removed):  # its folder goes below: forget the entry git still holds
            subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def pg_schema(base: str) -> Iterator[str]:
    """A URL for `base` whose search_path is a new, empty schema, dropped afterwards."""
    import psycopg

    schema = f"ab_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        sep = "&" if "?" in base else "?"
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run_one(tree: Path, bench: str, db: str | None, timeout_s: float) -> dict[str, Any]:
    """One benchmark run in `tree`: its final JSON line (stdout's last line)."""
    argv = shlex.split(bench)
    cmd = [sys.executable, f"bench/{argv[0]}", *argv[1:]]
    if db is not None:
        cmd += ["--db", db]
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                          timeout=timeout_s)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"exit {done.returncode}: {tail}")
    figures = json.loads(lines[-1])
    if not isinstance(figures, dict):
        raise RuntimeError(f"the last line is not a JSON object: {lines[-1][:200]}")
    return figures


def imports_own_source(tree: Path) -> None:
    """Each side must run its own `src/`, not the one installed in this environment."""
    found = subprocess.run([sys.executable, "-c", "import tidings; print(tidings.__file__)"],
                           cwd=tree, env={**os.environ, "PYTHONPATH": str(tree / "src")},
                           check=True, capture_output=True, text=True).stdout.strip()
    if not Path(found).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"{tree} imports tidings from {found}, not its own src/")


def numbers(figures: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in figures.items()
            if isinstance(v, int | float) and not isinstance(v, bool)}


def summarise(runs: dict[str, list[dict[str, Any]]]) -> list[tuple[str, float, float]]:
    """(figure, median A, median B) for every number that differs between runs."""
    a = [numbers(f) for f in runs["a"]]
    b = [numbers(f) for f in runs["b"]]
    if not a or not b:
        return []
    out = []
    for key in a[0]:
        values_a = [f[key] for f in a if key in f]
        values_b = [f[key] for f in b if key in f]
        if not values_a or not values_b or len(set(values_a + values_b)) == 1:
            continue
        out.append((key, statistics.median(values_a), statistics.median(values_b)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="revision A (the baseline), e.g. main or a commit")
    parser.add_argument("b", help="revision B (the change)")
    parser.add_argument("--rounds", type=int, default=3, help="A,B pairs per benchmark")
    parser.add_argument("--backends", default="sqlite,postgres",
                        help="comma-separated: sqlite, postgres")
    parser.add_argument("--bench", action="append", default=None,
                        help="a script in bench/ and its flags, e.g. \"aws_api.py --seconds 5\""
                             " (repeatable; default: the five of issue 31)")
    parser.add_argument("--pg", default=PG_DEFAULT, help="PostgreSQL database for the "
                        "postgres runs (a schema is made per run)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not set(backends) <= {"sqlite", "postgres"} or not backends:
        parser.error("--backends: sqlite and/or postgres")
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    benches = args.bench or list(DEFAULT_BENCHES)
    repo = Path(git(Path.cwd(), "rev-parse", "--show-toplevel"))
    revs = [git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}") for rev in (args.a, args.b)]
    print(f"A = {args.a} ({revs[0][:10]}), B = {args.b} ({revs[1][:10]}); "
          f"{args.rounds} round(s); load {os.getloadavg()[0]:.1f}", file=sys.stderr)

    results: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    with worktrees(repo, revs) as trees:
        for tree in trees:
            imports_own_source(tree)
        for bench in benches:
            for backend in backends:
                runs: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
                for r in range(args.rounds):
                    # A,B then B,A: a load that rises (or falls) through the rounds
                    # weighs on both sides alike rather than always on B.
                    order = list(zip("ab", trees, strict=True))
                    for side, tree in order if r % 2 == 0 else order[::-1]:
                        began = time.monotonic()
                        try:
                            if backend == "postgres":
                                with pg_schema(args.pg) as url:
                                    figures = run_one(tree, bench, url, args.timeout)
                            else:
                                figures = run_one(tree, bench, None, args.timeout)
                        except (RuntimeError, subprocess.TimeoutExpired,
                                json.JSONDecodeError) as exc:
                            failures.append({"bench": bench, "backend": backend,
                                             "side": side.upper(), "error": str(exc)})
                            print(f"  {bench} [{backend}] {side.upper()}{r + 1}: FAILED {exc}",
                                  file=sys.stderr)
                            continue
                        runs[side].append(figures)
                        print(f"  {bench} [{backend}] {side.upper()}{r + 1}: "
                              f"{time.monotonic() - began:.0f} s, load "
                              f"{os.getloadavg()[0]:.1f} {json.dumps(figures)}",
                              file=sys.stderr)
                # Each bench's medians as soon as it is done: a run cut short keeps them.
                for figure, a, b in summarise(runs):
                    print(f"    {bench.split()[0]} [{backend}] {figure}: A {a}, B {b}",
                          file=sys.stderr)
                    results.append({"bench": bench, "backend": backend, "figure": figure,
                                    "a": a, "b": b, "ratio": round(b / a, 3) if a else None})

    width = max([len(r["bench"].split()[0]) for r in results] + [5])
    fig_width = max([len(r["figure"]) for r in results] + [6])
    print(f"{'bench':<{width}}  {'db':<8}  {'figure':<{fig_width}}  {'A median':>12}  "
          f"{'B median':>12}  {'B/A':>6}")
    for r in results:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        print(f"{r['bench'].split()[0]:<{width}}  {r['backend']:<8}  {r['figure']:<{fig_width}}"
              f"  {r['a']:>12.6g}  {r['b']:>12.6g}  {ratio:>6}")
    print(json.dumps({"a": revs[0], "b": revs[1], "rounds": args.rounds,
                      "load": round(os.getloadavg()[0], 1), "results": results,
                      "failures": failures}), flush=True)


if __name__ == "__main__":
    main()
