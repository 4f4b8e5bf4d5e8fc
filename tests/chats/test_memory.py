"""Shared memory: get, set, append (atomic across processes), provenance, trimming, isolation."""

import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from chats import events, memory, services
from chats.models import ContextBlock
from hub.errors import InvalidInput, NotFound

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def test_set_is_last_writer_wins_and_append_keeps_provenance(user, make_agent):
    agent = make_agent(user, name="Noter")
    chat = services.create_chat(owner=user, title="Where it came from")
    memory.set_content(owner=user, label="prefs", content="likes tea")
    memory.set_content(owner=user, label="prefs", content="likes coffee")
    block = memory.append(owner=user, label="prefs", text="hates mornings", chat=chat, agent=agent)
    assert block.content == "likes coffee\nhates mornings"
    first, second = block.entries.order_by("id")
    assert (first.chat, first.agent) == (None, None)
    assert (second.chat, second.agent) == (chat, agent) and second.created_at
    assert block.version == 3


def test_deleting_one_entry_keeps_the_others(user):
    memory.append(owner=user, text="one")
    block = memory.append(owner=user, text="two")
    memory.append(owner=user, text="three")
    middle = block.entries.get(content="two")
    block = memory.delete_entry(owner=user, entry_id=middle.pk)
    assert block.content == "one\nthree"


def test_another_users_block_and_entries_are_not_found(user, other_user):
    block = memory.append(owner=user, text="mine")
    with pytest.raises(NotFound):
        memory.block_for_user(owner=other_user, block_id=block.pk)
    with pytest.raises(NotFound):
        memory.delete_entry(owner=other_user, entry_id=block.entries.get().pk)
    assert memory.get_block(owner=other_user, label="memory") is None
    assert memory.snapshot(owner=other_user) == []


@pytest.mark.parametrize("kwargs, field", [
    ({"label": "", "text": "x"}, "label"),
    ({"label": "x" * 101, "text": "x"}, "label"),
    ({"text": "   "}, "content"),
    ({"text": "x" * 200_001}, "content"),
])
def test_bad_memory_input_names_the_field(user, kwargs, field):
    with pytest.raises(InvalidInput) as err:
        memory.append(owner=user, **kwargs)
    assert field in err.value.fields
    assert not ContextBlock.objects.filter(owner=user).exclude(label="").exists() or field == "content"


def test_what_an_agent_sees_is_trimmed_to_max_tokens_with_a_marker(user):
    block = memory.set_content(owner=user, label="long", content="x" * 1000, max_tokens=50)
    seen = memory.trimmed(block)
    assert len(seen) == 200 and seen.endswith(memory.TRIM_MARKER)
    assert memory.snapshot(owner=user)[0]["content"] == seen


@pytest.mark.django_db(transaction=True)
def test_memory_updated_goes_to_the_users_tabs(user, monkeypatch):
    sent = []
    monkeypatch.setattr(events, "relay", lambda group, batch: sent.extend((group, event) for event in batch))
    memory.append(owner=user, text="fact")
    assert sent == [(events.user_group(user.pk), {"type": "memory.updated",
                                                  "block": {"label": "memory", "version": 1, "content": "fact"}})]


APPENDER = """
import os, sys
sys.path.insert(0, os.getcwd())
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
django.setup()
from django.contrib.auth import get_user_model
from django.db import connections
from chats import memory
user = get_user_model().objects.get(pk=int(sys.argv[1]))
for i in range(int(sys.argv[3])):
    memory.append(owner=user, label="shared", text=f"{sys.argv[2]}-{i}")
"""


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_from_many_processes_never_lose_one(user, tmp_path):
    """Real parallel processes appending to one block at once, on the suite's database."""
    import os

    script = tmp_path / "append.py"
    script.write_text(APPENDER)
    env = dict(os.environ)
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        env["HUB_DATA_DIR"] = str(Path(database["NAME"]).parent)
        env["HUB_SQLITE_NAME"] = str(database["NAME"])
    else:
        env["DATABASE_URL"] = (
            f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
        )
    memory.append(owner=user, label="shared", text="start")
    workers, per_worker = 6, 15
    processes = [
        subprocess.Popen([sys.executable, str(script), str(user.pk), f"w{n}", str(per_worker)], cwd=ROOT, env=env,
                         stderr=subprocess.PIPE, text=True)
        for n in range(workers)
    ]
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    block = ContextBlock.objects.get(owner=user, label="shared")
    lines = block.content.splitlines()
    assert len(lines) == 1 + workers * per_worker
    assert set(lines) == {"start"} | {f"w{n}-{i}" for n in range(workers) for i in range(per_worker)}
    assert block.version == 1 + workers * per_worker
