"""The models a provider offers, asked over HTTP of the fake model server, as the agent form, the
chat header's model picker and the default Assistant use them."""

import pytest
from django.core.cache import cache

from agents_app import catalog
from agents_app.fake_provider import FakeProvider
from agents_app.models import Agent
from agents_app.services import create_agent, ensure_builtin_agents

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def fake():
    with FakeProvider(models=["qwen2.5-7b", "llama-3.1-8b"]) as server:
        yield server


def test_an_openai_compatible_server_lists_its_models_and_the_list_is_cached(fake):
    offer = catalog.offered_models(provider="openai", base_url=fake.openai_url)
    assert offer == catalog.Offer(["llama-3.1-8b", "qwen2.5-7b"])
    fake.models = ["mistral-small"]
    assert catalog.offered_models(provider="openai", base_url=fake.openai_url).models == ["llama-3.1-8b", "qwen2.5-7b"]
    assert catalog.offered_models(provider="openai", base_url=fake.openai_url, refresh=True).models == ["mistral-small"]
    assert catalog.offered_models(provider="anthropic", base_url=fake.url).models == ["mistral-small"]
    assert catalog.offered_models(provider="ollama", base_url=fake.url).models == ["mistral-small"]  # /v1 added


def test_a_server_that_cannot_list_says_why_and_a_typed_name_still_works(user):
    offer = catalog.offered_models(provider="openai", base_url="http://127.0.0.1:9/v1")
    assert offer.models == [] and "did not list its models" in offer.error
    assert catalog.first_offered("openai:my-model", base_url="http://127.0.0.1:9/v1") == "openai:my-model"


def test_the_default_assistant_takes_the_first_offered_model_when_its_default_is_not_offered(fake, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_url)
    monkeypatch.delenv("HUB_ASSISTANT_MODEL", raising=False)
    ensure_builtin_agents()
    assert Agent.objects.get(owner__isnull=True, name="Assistant").model == "openai:llama-3.1-8b"


def test_pages_offer_models_and_switch_only_the_users_own_agent(client, user, other_user, fake):
    mine = create_agent(owner=user, name="Mine", model="openai:qwen2.5-7b", base_url=fake.openai_url)
    theirs = create_agent(owner=other_user, name="Theirs", model="openai:qwen2.5-7b", base_url=fake.openai_url)
    client.force_login(user)
    listed = client.get(f"/agents/models/?agent={mine.pk}").json()
    assert listed == {"models": ["openai:llama-3.1-8b", "openai:qwen2.5-7b"], "error": ""}
    assert client.get(f"/agents/models/?agent={theirs.pk}").status_code == 404
    switched = client.post(f"/agents/{mine.pk}/model/", {"model": "openai:llama-3.1-8b"},
                           content_type="application/json")
    assert switched.status_code == 200 and Agent.objects.get(pk=mine.pk).model == "openai:llama-3.1-8b"
    refused = client.post(f"/agents/{mine.pk}/model/", {"model": "no provider"}, content_type="application/json")
    assert refused.status_code == 400 and "model" in refused.json()["error"]["fields"]
    assert client.post(f"/agents/{theirs.pk}/model/", {"model": "openai:x"},
                       content_type="application/json").status_code == 404
    assert Agent.objects.get(pk=theirs.pk).model == "openai:qwen2.5-7b"
