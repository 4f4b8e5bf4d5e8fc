"""Agents see the files of their thread: the text of a short file whole, the passages of a long
one that answer the question, images as image parts for a model that sees them and by name for
one that does not. Each turn goes the way a user's does, against the fake model server over HTTP."""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image
from pydantic_ai.messages import BinaryContent, ModelMessagesTypeAdapter, ModelRequest, UserPromptPart

from agents_app.fake_provider import FakeProvider, ToolCall
from agents_app.services import create_agent
from agents_app.turns import files as turn_files
from chats import services
from chats.models import Message
from hub.errors import InvalidInput
from tests.chats.test_reading import pdf_with_pages

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path / "media")}}}
    settings.HUB_MODEL_MAX_RETRIES = 0


@pytest.fixture
def fake():
    with FakeProvider() as server:
        yield server


def png_bytes(color=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 6), color).save(out, format="PNG")
    return out.getvalue()


def attach(chat, name: str, data: bytes):
    """A file uploaded to the chat and read, as the worker reads it after an upload."""
    attachment = services.upload_file(chat=chat, upload=SimpleUploadedFile(name, data))
    services.read_file_text(file_id=str(attachment.pk))
    return attachment


def ask(agent, content: str, *attachments):
    return services.send_message(chat=agent.main_chat, content=content, files=[str(a.pk) for a in attachments])


def test_a_vision_model_receives_the_image_and_the_text_of_a_short_file(fake, user, run_now):
    agent = create_agent(owner=user, name="Seer", model="openai:gpt-4o", base_url=fake.openai_url)
    picture = attach(agent.main_chat, "cat.png", png_bytes())
    notes = attach(agent.main_chat, "notes.txt", b"The spare key is under the blue flowerpot.\n")
    ask(agent, "Where is the key, and what colour is the picture?", picture, notes)

    assert run_now() == ["succeeded"]
    request = fake.requests[0]
    assert request.images == [("image/png", png_bytes())]
    prompt = request.prompt
    assert prompt.startswith("Where is the key, and what colour is the picture?")
    assert "The spare key is under the blue flowerpot." in prompt
    assert 'name="notes.txt"' in prompt and f"/files/{notes.pk}/" in prompt  # so the reply can link it
    assert "cat.png" not in request.system  # files are the user's words, never instructions


def test_a_model_without_vision_is_told_the_images_name_only(fake, user, run_now):
    agent = create_agent(owner=user, name="Reader", model="openai:fake-model", base_url=fake.openai_url,
                         settings={"vision": False})
    picture = attach(agent.main_chat, "holiday.png", png_bytes())
    ask(agent, "What is in the picture?", picture)

    assert run_now() == ["succeeded"]
    request = fake.requests[0]
    assert request.images == []
    assert 'name="holiday.png"' in request.prompt and "does not see images" in request.prompt


def test_whether_a_model_sees_images_is_guessed_from_its_name_unless_set(user):
    guessed = [create_agent(owner=user, name=model, model=model) for model in
               ("openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5", "ollama:llava", "ollama:llama3.2",
                "openai:gpt-3.5-turbo")]
    assert [turn_files.sees_images(a) for a in guessed] == [True, True, True, False, False]
    told = create_agent(owner=user, name="told", model="ollama:llama3.2", settings={"vision": True})
    assert turn_files.sees_images(told)
    with pytest.raises(InvalidInput) as refused:
        create_agent(owner=user, name="odd", model="ollama:llama3.2", settings={"vision": "maybe"})
    assert "settings.vision" in refused.value.fields


def test_a_long_file_gives_the_passages_that_answer_the_question(fake, user, run_now):
    agent = create_agent(owner=user, name="Clerk", model="openai:fake-model", base_url=fake.openai_url)
    pages = [f"Page {n} covers the boiler, the meters and the bins in some detail. " * 12 for n in range(1, 31)]
    pages[21] = "Tenants may keep small pets such as cats with the landlord's written consent."
    lease = attach(agent.main_chat, "lease.pdf", pdf_with_pages(pages))
    ask(agent, "What does the lease say about pets?", lease)

    assert run_now() == ["succeeded"]
    prompt = fake.requests[0].prompt
    assert "small pets such as cats" in prompt
    assert "[lease.pdf, page 22]" in prompt  # each passage says where it is, to cite
    assert 'text="passages for the question"' in prompt
    assert len(prompt) < len("".join(pages)) / 3  # passages, not the whole lease


def test_files_of_earlier_messages_stay_in_the_conversation_and_unread_ones_say_so(fake, user, run_now):
    agent = create_agent(owner=user, name="Clerk", model="openai:fake-model", base_url=fake.openai_url)
    recipe = attach(agent.main_chat, "recipe.md", b"# Soup\n\nSimmer the leeks for twenty minutes.\n")
    ask(agent, "Here is my recipe.", recipe)
    run_now()
    pending = services.upload_file(chat=agent.main_chat, upload=SimpleUploadedFile("later.txt", b"not read yet"))
    ask(agent, "How long do the leeks simmer?", pending)
    run_now()

    second = fake.requests[-1]
    first_user_turn = next(m for m in second.messages if m["role"] == "user")
    assert "Simmer the leeks for twenty minutes." in str(first_user_turn["content"])
    assert "still being read" in second.prompt and 'name="later.txt"' in second.prompt


def test_a_checkpoint_keeps_an_image_by_its_file_not_its_bytes(user, chat):
    picture = attach(chat, "big.png", png_bytes((10, 200, 10)))
    image = BinaryContent(data=png_bytes((10, 200, 10)), media_type="image/png",
                          identifier=f"{turn_files.IMAGE_ID_PREFIX}{picture.pk}")
    messages = [ModelRequest(parts=[UserPromptPart(content=["What colour?", image])])]

    kept = turn_files.without_image_data(ModelMessagesTypeAdapter.dump_python(messages, mode="json"))
    assert kept[0]["parts"][0]["content"][1]["data"] == ""
    restored = ModelMessagesTypeAdapter.validate_python(turn_files.with_image_data(kept))
    assert restored[0].parts[0].content[1].data == png_bytes((10, 200, 10))
    assert kept[0]["parts"][0]["content"][1]["data"] == ""  # the checkpoint's own copy stays small

    services.delete_file(attachment=picture)
    gone = ModelMessagesTypeAdapter.validate_python(turn_files.with_image_data(
        turn_files.without_image_data(ModelMessagesTypeAdapter.dump_python(messages, mode="json"))))
    assert gone[0].parts[0].content == ["What colour?", "(an image attached here has been removed)"]


def test_a_turn_that_calls_a_tool_sends_the_image_again_after_the_call(fake, user, run_now):
    fake.script(tool_calls=[ToolCall("record_effect", {"key": "seen"})], text="Red, and noted.")
    agent = create_agent(owner=user, name="Seer", model="openai:gpt-4o", base_url=fake.openai_url,
                         tools=["record_effect"])
    picture = attach(agent.main_chat, "red.png", png_bytes())
    ask(agent, "Note the colour", picture)

    assert run_now() == ["succeeded"]
    assert [r.images for r in fake.requests] == [[("image/png", png_bytes())]] * 2
    assert Message.objects.get(sender_agent=agent, kind="message").content == "Red, and noted."
