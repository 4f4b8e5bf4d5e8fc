"""The model picker: the chat header shows each agent's model, and the owner switches it from the
models the provider offers (the fake model server's /v1/models)."""

import pytest
from playwright.sync_api import expect

from agents_app.fake_provider import FakeProvider
from agents_app.models import Agent
from agents_app.services import create_agent
from tests.e2e.helpers import chat_with, reply_of, send, wait_until


@pytest.fixture
def fake():
    with FakeProvider(models=["qwen2.5-7b", "llama-3.1-8b"], text="Hi from the model.") as server:
        yield server


@pytest.mark.parametrize("scheme, viewport", [("light", {"width": 1280, "height": 820}),
                                              ("dark", {"width": 1280, "height": 820}),
                                              ("light", {"width": 390, "height": 800})],
                         ids=["light", "dark", "phone"])
def test_the_owner_switches_an_agents_model_from_the_offered_ones(user, open_page, fake, screenshot, scheme,
                                                                  viewport):
    agent = create_agent(owner=user, name="Local", model="openai:qwen2.5-7b", base_url=fake.openai_url)
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/", color_scheme=scheme, viewport=viewport)
    member = page.get_by_role("button", name="Local (agent)")
    phone = viewport["width"] < 700
    if not phone:  # at phone width the chip is the avatar alone
        expect(member.locator(".member-model")).to_have_text("qwen2.5-7b")
    member.click()
    page.get_by_role("menuitem", name="Model: qwen2.5-7b — switch…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("option")).to_have_text(["llama-3.1-8b", "qwen2.5-7b"])
    screenshot(page, f"model-picker-{scheme}-{viewport['width']}")
    dialog.get_by_role("option", name="llama-3.1-8b").click()
    expect(dialog).to_have_count(0)
    if not phone:
        expect(member.locator(".member-model")).to_have_text("llama-3.1-8b")
    assert Agent.objects.get(pk=agent.pk).model == "openai:llama-3.1-8b"

    send(page, "Hello")
    wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final", what="the reply")
    assert fake.requests[-1].model == "llama-3.1-8b"


def test_the_agent_form_offers_the_servers_models(user, open_page, fake):
    page = open_page(user, "/agents/new/")
    page.get_by_label("Base url").fill(fake.openai_url)
    page.get_by_label("Base url").dispatch_event("change")
    page.get_by_label("Model").fill("openai:")
    expect(page.locator("#model-choices option")).to_have_count(2)
    assert page.locator("#model-choices option").evaluate_all("els => els.map(e => e.value)") == [
        "openai:llama-3.1-8b", "openai:qwen2.5-7b"]
    expect(page.locator("#model-offer")).to_contain_text("2 models offered")
