"""The Memory page and open chats hear of memory changes as they happen (memory.updated)."""

import pytest
from playwright.sync_api import expect

from chats import memory
from tests.e2e.helpers import chat_with


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 820}, {"width": 390, "height": 800}],
                         ids=["desktop", "phone"])
def test_memory_written_elsewhere_shows_at_once_on_the_memory_page_and_in_a_chat(user, open_page, viewport):
    memory.append(owner=user, label="preferences", text="Likes window seats")
    page = open_page(user, "/memory/", viewport=viewport)
    expect(page.locator("#memory-blocks")).to_contain_text("Likes window seats")
    expect(page.locator("#memory-blocks h2").first).to_have_text("preferences up to 2000 tokens")
    chat = chat_with(user)
    chat_page = open_page(user, f"/chats/{chat.pk}/", label="chat")
    # What an agent writes reaches the chat's tab once its socket is open (a busy machine may
    # take a moment to open it; a tab that opens later reads the memory fresh anyway).
    expect(chat_page.locator(".conn-status")).to_have_attribute("data-state", "open")
    page.get_by_label("Label").fill("draft I am typing")  # kept while the blocks change

    memory.append(owner=user, label="preferences", text="Vegetarian since 2020")  # as an agent's tool does

    expect(page.locator("#memory-blocks")).to_contain_text("Vegetarian since 2020")
    expect(page.get_by_label("Label")).to_have_value("draft I am typing")
    expect(chat_page.locator(".toast")).to_contain_text("Memory updated: preferences")
