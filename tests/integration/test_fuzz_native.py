"""Schema-driven fuzzing of the native HTTP API from its own OpenAPI document.

schemathesis reads /openapi.json from a real server on loopback (SQLite and PostgreSQL)
and, for every /v1 operation, sends requests that follow the schema and requests that
break it (wrong types, missing fields, out-of-range values, odd Unicode). Each answer
must be no 5xx, a documented status with a documented content type, and a body matching
the documented schema; every error additionally has the one error body
`{"error": {"code", "message", ...}}`. Path parameters are drawn half the time from
resources that exist, so the fuzzer gets past "not found" into the handlers.

Examples are bounded and derandomized (the same requests every run) so the default suite
stays fast; TIDINGS_FUZZ_EXAMPLES=500 (say) looks much harder, with fresh randomness when
TIDINGS_FUZZ_RANDOM=1.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import checks
from schemathesis.generation import GenerationMode
from serving import running_server

from conftest import BACKENDS, module_pg_schema, pg_url
from tidings.client import Tidings
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.server.app import create_app
from tidings.settings import Settings

EXAMPLES = int(os.environ.get("TIDINGS_FUZZ_EXAMPLES", "12"))
RANDOM = os.environ.get("TIDINGS_FUZZ_RANDOM") == "1"
#: A longer hunt needs longer than the suite's 300 s per test.
LONG = pytest.mark.timeout(max(300, EXAMPLES * 60))
CHECKS = [checks.not_a_server_error, checks.status_code_conformance,
          checks.content_type_conformance, checks.response_schema_conformance]
#: Resources the server holds, by path parameter name.
EXISTING = {"name": ["jobs", "jobs.fifo", "team", "nightly", "welcome"],
            "group": ["default", "team"]}
#: A long poll waits up to 20 s for nothing (or the queue's default, which the fuzzer may
#: have set to 20 s): these never wait.
SLOW = {("GET", "/v1/queues/{name}/messages")}


def _seed(t: Tidings) -> None:
    t.queues.create_queue("jobs")
    t.queues.create_queue("jobs.fifo")
    t.queues.send("jobs", "hello")
    t.schedules.create_group("team")
    t.schedules.create(ScheduleSpec("nightly", "rate(1 hour)", Target(TargetKind.QUEUE, "jobs")))
    t.email.create_template("welcome", "Hi {{name}}", text="Hello {{name}}")


@pytest.fixture(scope="module", params=BACKENDS)
def server(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    def serve(db: str) -> Iterator[str]:
        with Tidings(settings=Settings(db=db)) as t:
            _seed(t)
            with running_server(create_app(t)) as url:
                yield url

    if request.param == "sqlite":
        yield from serve(f"sqlite:///{tmp_path_factory.mktemp('fuzz')}/t.db")
    else:
        with module_pg_schema() as schema:
            yield from serve(pg_url(schema))


def _error_body(response: Any) -> str | None:
    """What is wrong with an error answer's body, or None."""
    try:
        doc = json.loads(response.content)
        error = doc["error"]
        if isinstance(error["code"], str) and isinstance(error["message"], str):
            return None
    except (ValueError, KeyError, TypeError):
        pass
    return f"{response.status_code} without the error body: {response.content[:300]!r}"


def _fuzz(url: str, operation: Any, failures: list[str]) -> None:
    strategy = (operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
                | operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))

    @given(case=strategy, data=st.data())
    @settings(max_examples=EXAMPLES, derandomize=not RANDOM, deadline=None, database=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    def run(case: Any, data: st.DataObject) -> None:
        for key in list(case.path_parameters or {}):
            if key in EXISTING and data.draw(st.booleans()):
                case.path_parameters[key] = data.draw(st.sampled_from(EXISTING[key]))
        if (operation.method.upper(), operation.path) in SLOW:
            case.query = {**(case.query or {}), "wait": 0}  # the queue's default may be 20 s
        try:
            response = case.call_and_validate(base_url=url, checks=CHECKS, timeout=30)
        except Exception as exc:  # noqa: BLE001 - every finding is reported, not just one
            failures.append(f"{operation.label}: {str(exc)[:1500]}")
            return
        if response.status_code >= 400:
            problem = _error_body(response)
            if problem:
                failures.append(f"{operation.label}: {problem}")

    run()


@LONG
# schemathesis's strategies call `random` inside, which hypothesis frowns upon when it
# draws fresh examples (TIDINGS_FUZZ_RANDOM=1); the examples stay valid.
@pytest.mark.filterwarnings("ignore:Do not use the `random` module"
                            ":hypothesis.errors.HypothesisDeprecationWarning")
def test_the_native_api_answers_every_request_as_its_schema_says(server: str,
                                                                   tmp_path: Path) -> None:
    schema = schemathesis.openapi.from_url(f"{server}/openapi.json")
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    native = [op for op in operations if op.path.startswith("/v1/")]
    assert len(native) > 40  # the document lists the API, not a stub
    for operation in native:
        _fuzz(server, operation, failures)
    report = tmp_path / "failures.txt"
    report.write_text("\n\n".join(failures))
    distinct = sorted({f.split("\n")[0][:300] for f in failures})
    assert not failures, f"{len(failures)} findings ({report}):\n" + "\n".join(distinct[:40])


def test_the_document_says_what_errors_look_like(server: str) -> None:
    import httpx

    doc = httpx.get(f"{server}/openapi.json").json()
    for path, item in doc["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, operation in item.items():
            responses = operation["responses"]
            assert "422" not in responses, (method, path)  # FastAPI's; tidings answers 400
            for status in ("400", "503"):
                schema = responses[status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path)
    # And the server answers an unparseable body in that shape too.
    r = httpx.post(f"{server}/v1/queues", content=b"{not json",
                   headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "InvalidParameterValue"
    r = httpx.get(f"{server}/v1/no/such/thing")
    assert r.status_code == 404 and r.json()["error"]["code"] == "NotFound"
