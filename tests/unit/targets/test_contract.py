"""Targets as a contract, and expressions parsed in one place: read from the source, so a
new `if target.kind is TargetKind.X` or `expression.startswith("rate(")` in a service or
a face fails here instead of quietly becoming the second place a kind is defined."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

import tidings
from tidings.model.queues import DELIVERY_QUEUE, EMAIL_QUEUE
from tidings.model.schedules import Target, TargetKind
from tidings.targets.base import TARGET_LIMITS, LimitPlace
from tidings.targets.registry import TARGETS, native_kinds, target_of

SRC = Path(tidings.__file__).parent
#: Where a target kind may be named: its record (model/) and its implementations (targets/).
KIND_HOMES = ("model", "targets")
#: The few lines outside them that still name a kind: constructors of email targets in
#: the email service and the campaign fan-out (issue 31 allows at most three).
MAX_KIND_LINES = 3
EXPRESSION = re.compile(r"\b(at|rate|cron)\(")
BARE_PREFIX = re.compile(r"\s*(at|rate|cron)\(\s*")
SNIFFING_CALLS = {"startswith", "endswith", "removeprefix", "removesuffix", "find", "rfind",
                  "index", "rindex", "count", "partition", "rpartition", "split"}


def kind_lines(root: Path = SRC) -> list[str]:
    r"""What `grep -rn "TargetKind\." src/tidings` finds outside model/ and targets/."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in KIND_HOMES:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "TargetKind." in line:
                out.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return out


def test_services_and_faces_ask_the_registry_instead_of_switching_on_the_kind() -> None:
    found = kind_lines()
    assert len(found) <= MAX_KIND_LINES, "\n".join(found)


def sniffing(source: str) -> list[int]:
    """Lines that look at an expression's text to tell its kind: a bare `at(` / `rate(` /
    `cron(` literal, or one given to a string search or an `in` test. A complete
    expression (`"at(2000-01-01T00:00:00)"`), an f-string that builds one and help text
    are not sniffing."""
    tree = ast.parse(source)
    in_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
                   for part in ast.walk(node)}

    def texts(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.Tuple):
            return [t for element in node.elts for t in texts(element)]
        return []

    lines = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in in_fstrings and BARE_PREFIX.fullmatch(node.value)):
            lines.add(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in SNIFFING_CALLS
              and any(EXPRESSION.search(t) for arg in node.args for t in texts(arg))):
            lines.add(node.lineno)
        elif (isinstance(node, ast.Compare)
              and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
              and any(EXPRESSION.search(t) for t in texts(node.left))):
            lines.add(node.lineno)
    return sorted(lines)


def test_only_the_trigger_package_reads_an_expression_to_tell_its_kind() -> None:
    found = {str(path.relative_to(SRC)): lines for path in sorted(SRC.rglob("*.py"))
             if path.relative_to(SRC).parts[0] != "triggers"
             and (lines := sniffing(path.read_text(encoding="utf-8")))}
    assert found == {}


@pytest.mark.parametrize("source", [
    'if spec.expression.startswith("at("):\n    pass\n',
    'one = expression[:5] == "rate("\n',
    'recurring = "cron(" in text\n',
    'kind = text.startswith(("rate(", "cron("))\n',
    'head, _, rest = text.partition("rate(")\n',
])
def test_sniffing_would_be_seen(source: str) -> None:
    assert sniffing(source) != []


@pytest.mark.parametrize("source", [
    'expression = f"at({text[:19]})"\n',
    'spec = ScheduleSpec("x", "at(2000-01-01T00:00:00)", target)\n',
    'help_text = "at(2030-01-01T09:00:00), rate(5 minutes) or cron(0 9 ? * MON-FRI *)."\n',
    'line = f"cron({minute} {hour} {dom} {month} {dow} *)"\n',
])
def test_building_or_describing_an_expression_is_not_sniffing(source: str) -> None:
    assert sniffing(source) == []


def test_a_switch_on_the_kind_would_be_counted(tmp_path: Path) -> None:
    for folder in ("schedules", "model", "targets"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.py").write_text(
            "def f(target):\n    if target.kind is TargetKind.WEBHOOK:\n        return 1\n")
    assert kind_lines(tmp_path) == ["schedules/x.py:2: if target.kind is TargetKind.WEBHOOK:"]


# the registry ------------------------------------------------------------------------------

def test_every_kind_has_one_implementation() -> None:
    assert sorted(t.kind.value for t in TARGETS.kinds()) == sorted(k.value for k in TargetKind)
    for kind in TargetKind:
        assert TARGETS.get(kind).kind is kind


@pytest.mark.parametrize(("target", "keys"), [
    (Target.queue("orders"), {"queue": "orders"}),
    (Target.webhook("https://Hooks.Example.com/in?x=1"), {"webhook": "hooks.example.com"}),
    (Target.webhook("http://user:pw@10.0.0.5:8080/"), {"webhook": "10.0.0.5"}),
    (Target.function("enrich"), {"function": "enrich"}),
    (Target.email('{"FromEmailAddress": "a@example.com"}'), {"smtp": "mail.example.net"}),
])
def test_limit_keys_name_the_downstream(target: Target, keys: dict[str, str]) -> None:
    place = LimitPlace("mail.example.net")
    assert target_of(target).limit_keys(target, None, place, TARGET_LIMITS) == keys
    assert target_of(target).limit_keys(target, None, place, ()) == {}  # none wanted


def test_an_email_counts_against_its_first_recipients_domain() -> None:
    body = json.dumps({"FromEmailAddress": "a@example.com", "Destination": {
        "ToAddresses": ["Ann <ann@Example.ORG>", "bob@other.example"]},
        "Content": {"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "b"}}}}})
    target = Target.email(body)
    assert target_of(target).limit_keys(target, body, LimitPlace(), TARGET_LIMITS) == {
        "email-domain": "example.org"}


def test_a_webhook_and_another_path_on_its_host_share_a_limit() -> None:
    a, b = Target.webhook("https://api.example.com/a"), Target.webhook("https://api.example.com:443/b")
    assert target_of(a).limit_keys(a, None, LimitPlace(), TARGET_LIMITS) == target_of(
        b).limit_keys(b, None, LimitPlace(), TARGET_LIMITS)


@pytest.mark.parametrize(("target", "arn"), [
    (Target.queue("orders"), "arn:aws:sqs:eu-west-1:123456789012:orders"),
    (Target.function("enrich"), "arn:aws:lambda:eu-west-1:123456789012:function:enrich"),
    (Target.webhook("https://example.com/in"), "https://example.com/in"),
    (Target.email("{}"), "arn:aws:scheduler:::aws-sdk:sesv2:sendEmail"),
])
def test_aws_arn_of_a_target_made_natively(target: Target, arn: str) -> None:
    assert target_of(target).aws_arn(target, "eu-west-1", "123456789012") == arn


def test_where_each_kind_travels() -> None:
    assert [t.kind.value for t in TARGETS.kinds() if t.writes_queue] == ["queue"]
    assert {t.kind.value: t.delivery_queue for t in TARGETS.kinds()} == {
        "queue": DELIVERY_QUEUE, "webhook": DELIVERY_QUEUE, "function": DELIVERY_QUEUE,
        "email": EMAIL_QUEUE}
    assert sorted(native_kinds()) == ["function", "queue", "webhook"]
