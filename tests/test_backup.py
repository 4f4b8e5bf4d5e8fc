"""Backup and restore of an embedded hub, as an operator runs them: `manage.py hub_backup` and
`manage.py hub_restore` in real processes, against a hub whose data dir another process keeps
writing to."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery staple"
PROVIDER_KEY = "sk-test-backup-1234567890"
REMOTE_HEADERS = {"Authorization": "Bearer remote-secret-42"}

SEED = f"""
from django.contrib.auth import get_user_model
from agents_app import remotes, secrets
from chats.services import create_chat, send_message

owner = get_user_model().objects.create_user("owner", password={PASSWORD!r})
secrets.store_key(owner=owner, provider="openai", key={PROVIDER_KEY!r})
remotes.create_remote(owner=owner, name="Tools", url="http://127.0.0.1:9/mcp", headers={REMOTE_HEADERS!r})
for c in range(3):
    chat = create_chat(owner=owner, title=f"Chat {{c}}")
    for m in range(5):
        send_message(chat=chat, content=f"chat {{c}} message {{m}}")
    send_message(chat=chat, content="in a thread", new_thread_title="Side")
"""

# Keeps sending messages round the owner's chats until the stop file appears; prints a line every
# 10 messages so the test knows it is writing.
WRITER = """
import pathlib
from chats.models import Chat
from chats.services import send_message

chats = list(Chat.objects.order_by("created_at"))
stop = pathlib.Path({stop!r})
n = 0
while not stop.exists():
    send_message(chat=chats[n % len(chats)], content=f"live {{n}}")
    n += 1
    if n % 10 == 0:
        print(n, flush=True)
"""

CHECK = f"""
import json
from django.contrib.auth import get_user_model
from agents_app import remotes, secrets
from agents_app.models import Remote

owner = get_user_model().objects.get(username="owner")
print(json.dumps({{
    "password_ok": owner.check_password({PASSWORD!r}),
    "provider_key": secrets.key_for(owner_id=owner.pk, provider="openai"),
    "remote_headers": secrets.open_headers(Remote.objects.get(owner=owner).encrypted_headers),
}}))
"""


def hub_env(data_dir: Path, **extra) -> dict:
    """An embedded hub's environment: no PostgreSQL, no Redis, the key from the data dir."""
    drop = {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "HUB_SQLITE_NAME", "DJANGO_SETTINGS_MODULE"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update({"HUB_DATA_DIR": str(data_dir), "HUB_OUTBOUND_ALLOW": "127.0.0.0/8", "PYTHONUNBUFFERED": "1"}, **extra)
    return env


def manage(*args, data_dir: Path, check=True, **extra) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=hub_env(data_dir, **extra),
                            capture_output=True, text=True, timeout=180)
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def messages_in(database: Path) -> list[tuple]:
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        return db.execute("SELECT id, chat_id, thread_id, content FROM chats_message ORDER BY id").fetchall()


def chats_in(database: Path) -> list[tuple]:
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        return db.execute("SELECT id, title, owner_id FROM chats_chat ORDER BY id").fetchall()


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A migrated hub with a user, their secrets and three chats; other files in its data dir; and
    a backup taken while another process keeps sending messages."""
    base = tmp_path_factory.mktemp("backup")
    data_dir = base / "live"
    manage("migrate", "--noinput", "-v", "0", data_dir=data_dir)
    manage("shell", "--no-imports", "-c", SEED, data_dir=data_dir)
    (data_dir / "uploads").mkdir()
    (data_dir / "uploads" / "notes.txt").write_text("kept with the hub")
    (data_dir / "staticfiles" / "app.css").write_text("regenerable")
    (data_dir / "test-hub.sqlite3").write_text("the test database, not data")
    (data_dir / "test-workers" / "gw0").mkdir(parents=True)
    (data_dir / "test-workers" / "gw0" / "test-hub.sqlite3_gw0").write_text("a test worker's, not data")
    stop = base / "stop-writing"
    command = [sys.executable, "manage.py", "shell", "--no-imports", "-c", WRITER.format(stop=str(stop))]
    writer = subprocess.Popen(command, cwd=ROOT, env=hub_env(data_dir), stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "10"
        backup = manage("hub_backup", data_dir=data_dir)
        # The writer goes on after the backup, so the backup is a point before the end.
        writer.stdout.readline(), writer.stdout.readline()
    finally:
        stop.touch()
        writer.wait(60)
    assert writer.returncode == 0
    path = Path(backup.stdout.splitlines()[0])
    return {"base": base, "data_dir": data_dir, "backup": path, "output": backup.stdout}


@pytest.fixture(scope="module")
def restored(hub):
    """The backup restored into a data dir that does not exist yet."""
    data_dir = hub["base"] / "restored"
    result = manage("hub_restore", str(hub["backup"]), data_dir=data_dir)
    return {"data_dir": data_dir, "output": result.stdout}


@pytest.mark.sqlite_only
def test_a_backup_holds_the_database_data_files_and_a_manifest(hub):
    backup, data_dir = hub["backup"], hub["data_dir"]
    assert backup.parent == data_dir / "backups" and backup.name.startswith("hub-backup-")
    assert not [p for p in backup.parent.iterdir() if p.name.startswith(".")], "a partial backup was left"
    manifest = json.loads((backup / "manifest.json").read_text())
    paths = {entry["path"] for entry in manifest["files"]}
    assert paths == {"hub.sqlite3", "data/secret_key", "data/uploads/notes.txt"}
    assert (backup / "data" / "secret_key").read_bytes() == (data_dir / "secret_key").read_bytes()
    assert manifest["migrations"]["chats"].startswith("00") and "agents_app" in manifest["migrations"]
    assert manifest["created_at"].endswith("Z")
    with closing(sqlite3.connect(backup / "hub.sqlite3")) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert not (backup / "hub.sqlite3-wal").exists()
    counts = manifest["counts"]
    assert hub["output"].splitlines()[1].startswith(f"{counts['chats']} chats, {counts['messages']} messages")


@pytest.mark.sqlite_only
def test_a_backup_taken_while_writing_is_one_consistent_point(hub):
    backed_up = messages_in(hub["backup"] / "hub.sqlite3")
    final = messages_in(hub["data_dir"] / "hub.sqlite3")
    live = [m for m in backed_up if m[3].startswith("live ")]
    assert len(live) >= 10, "the backup began after the writer had sent ten messages"
    assert len(backed_up) < len(final), "the writer went on after the backup"
    # Every message up to the backup's last one, and nothing else: no gap, no torn write.
    assert backed_up == [m for m in final if m[0] <= backed_up[-1][0]]


@pytest.mark.sqlite_only
def test_a_restore_into_an_empty_data_dir_brings_back_chats_logins_and_secrets(hub, restored):
    data_dir = restored["data_dir"]
    assert messages_in(data_dir / "hub.sqlite3") == messages_in(hub["backup"] / "hub.sqlite3")
    assert chats_in(data_dir / "hub.sqlite3") == chats_in(hub["data_dir"] / "hub.sqlite3")
    assert len(chats_in(data_dir / "hub.sqlite3")) == 3
    assert (data_dir / "secret_key").read_bytes() == (hub["data_dir"] / "secret_key").read_bytes()
    assert (data_dir / "uploads" / "notes.txt").read_text() == "kept with the hub"
    assert not list(data_dir.glob("replaced-*")), "an empty data dir has nothing to move aside"
    check = json.loads(manage("shell", "--no-imports", "-c", CHECK, data_dir=data_dir).stdout)
    assert check == {"password_ok": True, "provider_key": PROVIDER_KEY, "remote_headers": REMOTE_HEADERS}
    assert "Restored" in restored["output"]


@pytest.mark.sqlite_only
def test_a_tampered_backup_is_refused_by_name_and_nothing_is_written(hub, tmp_path):
    backup = tmp_path / hub["backup"].name
    shutil.copytree(hub["backup"], backup)
    (backup / "data" / "uploads" / "notes.txt").write_text("changed after the backup")
    target = tmp_path / "target"
    (target / "staticfiles").mkdir(parents=True)
    (target / "secret_key").write_text("key made at start-up")
    before = snapshot(target)

    result = manage("hub_restore", str(backup), data_dir=target, check=False)

    assert result.returncode != 0
    assert "notes.txt" in result.stderr and "sha256" in result.stderr
    assert snapshot(target) == before


@pytest.mark.sqlite_only
def test_a_data_dir_with_a_database_is_kept_unless_replace_which_moves_it_aside(hub, tmp_path):
    target = tmp_path / "target"
    shutil.copytree(hub["data_dir"], target, ignore=shutil.ignore_patterns("backups"))
    (target / "only-in-the-old-dir.txt").write_text("old")
    old_database = (target / "hub.sqlite3").read_bytes()

    refused = manage("hub_restore", str(hub["backup"]), data_dir=target, check=False)
    assert refused.returncode != 0 and "already holds a database" in refused.stderr and "--replace" in refused.stderr
    assert (target / "hub.sqlite3").read_bytes() == old_database

    replaced = manage("hub_restore", str(hub["backup"]), "--replace", data_dir=target)
    [aside] = target.glob("replaced-*")
    assert str(aside) in replaced.stdout
    assert (aside / "hub.sqlite3").read_bytes() == old_database
    assert (aside / "only-in-the-old-dir.txt").read_text() == "old"
    assert (aside / "uploads" / "notes.txt").exists() and (aside / "secret_key").exists()
    assert not (target / "only-in-the-old-dir.txt").exists()
    assert messages_in(target / "hub.sqlite3") == messages_in(hub["backup"] / "hub.sqlite3")


@pytest.mark.needs_postgres
def test_on_postgresql_hub_backup_says_to_use_pg_dump(tmp_path):
    result = manage("hub_backup", data_dir=tmp_path / "var", check=False, DATABASE_URL=os.environ["DATABASE_URL"])
    assert result.returncode != 0
    assert "PostgreSQL" in result.stderr and "pg_dump" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "var" / "backups").exists()
