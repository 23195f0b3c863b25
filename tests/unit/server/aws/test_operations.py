"""The SES v2 operation index: the shipped table is botocore's model, and routes resolve."""

from __future__ import annotations

import botocore.session

from tidings.server.aws.restjson import OperationIndex
from tidings.server.aws.ses import ses_operations


def test_the_table_is_the_sesv2_model() -> None:
    # A botocore upgrade that adds SES operations fails here: add its new rows
    # (METHOD PATH OPERATION) to src/tidings/server/aws/sesv2_operations.txt.
    loader = botocore.session.Session().get_component("data_loader")
    model = loader.load_service_model("sesv2", "service-2")
    expected = {(op["http"]["method"], op["http"]["requestUri"], name)
                for name, op in model["operations"].items()}
    index = ses_operations()
    assert len(index.routes) == len(expected)
    for method, template, name in expected:
        path = template.replace("{", "x-").replace("}", "")  # a value for every label
        assert index.name_of(method, path) == name, (method, template)


def test_routes_resolve_by_method_and_path() -> None:
    index = OperationIndex.parse("""
        # comment
        GET /v2/email/identities/{EmailIdentity} GetEmailIdentity
        GET /v2/email/identities/{EmailIdentity}/policies GetEmailIdentityPolicies
        POST /v2/email/list-identities ListEmailIdentities
        GET /objects/{Key+} GetObject
    """.replace("\n        ", "\n"))
    assert index.name_of("GET", "/v2/email/identities/a@b.test") == "GetEmailIdentity"
    assert index.name_of("GET", "/v2/email/identities/a@b.test/policies") == (
        "GetEmailIdentityPolicies")
    assert index.name_of("DELETE", "/v2/email/identities/a@b.test") is None
    assert index.name_of("GET", "/v2/email/identities/a/b") is None  # one segment a label
    assert index.name_of("POST", "/v2/email/list-identities") == "ListEmailIdentities"
    assert index.name_of("GET", "/objects/a/b/c") == "GetObject"  # greedy label
