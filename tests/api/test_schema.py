"""The OpenAPI schema, and schemathesis against the live hub with it.

schemathesis generates requests from the schema (valid and invalid ones) for every operation; half
of them use the ids of real objects of the caller, so they reach the code behind the 404s. Every
answer must not be a server error and must match the schema: its status listed, its content
type, and its JSON body.
"""

import random

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

pytestmark = pytest.mark.django_db(transaction=True)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
CHECKS_OF_MULTIPART = [not_a_server_error, status_code_conformance]
EXAMPLES_PER_OPERATION = 8


@pytest.mark.django_db
def test_every_operation_documents_its_errors_with_an_example_and_has_a_summary_or_description():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = [(path, method, op) for path, methods in schema["paths"].items() for method, op in methods.items()]
    assert len(operations) >= 40
    for path, method, operation in operations:
        responses = operation["responses"]
        for code in ("400", "401", "403", "404"):
            example = responses[code]["content"]["application/json"]["examples"]
            assert next(iter(example.values()))["value"]["error"]["code"], (path, method, code)
        if method in ("post", "put", "patch"):
            assert {"413", "415"} <= set(responses), (path, method)
        assert any(code.startswith("2") for code in responses), (path, method)
    sends = ["/api/v1/chats/{chat_id}/messages/", "/api/v1/runs/{run_id}/continue/",
             "/api/v1/runs/{run_id}/regenerate/"]
    assert all("429" in schema["paths"][p]["post"]["responses"] for p in sends)


def test_the_schema_and_swagger_ui_are_served(http):
    schema = http.get("/api/v1/schema/", headers={"Accept": "application/json"})
    assert schema.status_code == 200 and schema.json()["openapi"].startswith("3.")
    docs = http.get("/api/v1/docs/")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


@pytest.fixture
def fuzz_world(make_user, token_for, scripted):
    """A user with one of everything, and the ids to put in paths."""
    from agents_app.models import Run
    from chats import memory, search
    from chats.services import create_chat, send_message

    user = make_user("fuzzer")
    agent = scripted(user, name="Fuzz agent", reply="ok")
    chat = create_chat(owner=user, title="Fuzz", agents=[agent])
    message = send_message(chat=chat, content="hello fuzz", new_thread_title="Fuzz thread")
    block = memory.append(owner=user, label="fuzz", text="remember this")
    document = search.index_shared(owner=user, label="kb", key="k", content="fuzz doc")
    from chats.services import create_folder, tag_chat

    folder = create_folder(owner=user, name="Fuzz folder", instructions="be brief")
    tag_chat(chat=chat, name="fuzz")
    return {
        "headers": {"Authorization": f"Bearer {token_for(user)}"},
        "ids": {"chat_id": str(chat.pk), "message_id": message.pk, "thread_id": message.thread_id,
                "agent_id": agent.pk, "run_id": str(Run.objects.get(trigger_message=message).pk),
                "entry_id": block.entries.first().pk, "document_id": document.pk, "label": "fuzz",
                "folder_id": folder.pk},
    }


def test_generated_requests_get_no_server_error_and_answers_that_match_the_schema(live_hub, fuzz_world):
    schema = schemathesis.openapi.from_url(f"{live_hub}/api/v1/schema/?format=json")
    operations = [result.ok() for result in schema.get_all_operations()]
    # Deletions last, so the other operations still find the real objects.
    operations.sort(key=lambda op: op.method.upper() == "DELETE")
    cases = []

    for operation in operations:
        strategy = st.one_of(operation.as_strategy(GenerationMode.POSITIVE),
                             operation.as_strategy(GenerationMode.NEGATIVE))

        @given(case=strategy)
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck),
                  derandomize=True, database=None)
        def check(case):
            if case.path_parameters and random.Random(repr((case.query, case.body))).random() < 0.5:
                case.path_parameters = {name: fuzz_world["ids"].get(name, value)
                                        for name, value in case.path_parameters.items()}
            cases.append(case.operation.label)
            # A multipart body Twisted cannot parse (no part at all) is answered by Daphne itself,
            # 400 with no body, before the hub sees it: only its status is the hub's to check.
            checks = CHECKS_OF_MULTIPART if case.media_type == "multipart/form-data" else CHECKS
            case.call_and_validate(base_url=live_hub, headers=fuzz_world["headers"], checks=checks, timeout=30)

        check()
    print(f"schemathesis: {len(cases)} cases over {len(operations)} operations")
    assert len(operations) >= 40 and len(cases) >= 200
