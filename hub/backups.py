"""Backups of an embedded hub, and their restore (docs/operations.md, "Backup and restore").

An embedded hub keeps everything in HUB_DATA_DIR: its SQLite database, the secret_key that
sessions and encrypted secrets (agents_app.secrets) depend on, and any other files. A backup is a
directory, complete only once it has its final name (it is built under a hidden name beside it):

    hub-backup-<UTC YYYYmmdd-HHMMSS>/
        hub.sqlite3     the database, copied with SQLite's online backup API
        data/           the data dir's other files
        manifest.json   when, the migrations applied, the counts, each file's size and sha256

Nothing here goes through Django's database connection: a backup reads the live file with its own
sqlite3 connection, and a restore must work on a data dir that has no database yet.
"""

import fnmatch
import hashlib
import json
import os
import shutil
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from hub.errors import HubError

MANIFEST = "manifest.json"
DATABASE = "hub.sqlite3"
DATA = "data"
FORMAT = 1
# The files SQLite keeps beside a database are part of it, not data.
SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")
# Top-level entries of the data dir that are not data: collected static files (regenerable), the
# test database and the parallel test workers' data dirs, backups, and what a restore moved aside.
NOT_DATA = ("staticfiles", "backups", "test-hub*.sqlite3*", "test-workers", "replaced-*", "hub-backup-*",
            ".hub-backup-*")


class BackupError(HubError):
    code = "backup"


BACK_UP_ELSEWHERE = "back it up with pg_dump, and keep HUB_DATA_DIR's secret_key with it"
RESTORE_ELSEWHERE = "restore it with pg_restore, and put the backed-up secret_key into HUB_DATA_DIR"


def sqlite_database(*, instead: str = BACK_UP_ELSEWHERE) -> Path:
    """The embedded database's file; BackupError saying what to do instead when the hub runs on
    another database."""
    database = settings.DATABASES["default"]
    if not database["ENGINE"].endswith("sqlite3"):
        name = "PostgreSQL" if database["ENGINE"].endswith("postgresql") else database["ENGINE"]
        raise BackupError(f'The database is {name}, not the embedded SQLite file: {instead} '
                          '(docs/operations.md, "Backup and restore").')
    return Path(database["NAME"]).resolve()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stamp(now: datetime) -> str:
    return now.strftime("%Y%m%d-%H%M%S")


# --- Making a backup -------------------------------------------------------------------------

def make_backup(output: Path) -> Path:
    """Write a complete backup of the data dir into a new directory under output and return it.

    Raises BackupError when the database is not SQLite, is missing, or its copy fails SQLite's
    integrity check; a failed backup leaves nothing behind.
    """
    database = sqlite_database()
    data_dir = Path(settings.DATA_DIR).resolve()
    output = output.resolve()
    if output == data_dir:
        raise BackupError(f"{output} is the data dir itself: write backups into a directory of their own.")
    if not database.is_file():
        raise BackupError(f"There is no database at {database} to back up (has `manage.py migrate` run?).")
    now = datetime.now(UTC)
    final = _unused_name(output / f"hub-backup-{_stamp(now)}")
    staging = output / f".{final.name}.partial"
    staging.mkdir(mode=0o700, parents=True)
    try:
        _fill_backup(staging, database=database, data_dir=data_dir, skip=[output], created_at=now)
        staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def _unused_name(path: Path) -> Path:
    """Two backups within one second get -2, -3... rather than one overwriting the other."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}-{n}")
    return candidate


def _fill_backup(staging: Path, *, database: Path, data_dir: Path, skip: list[Path], created_at: datetime) -> None:
    copy = staging / DATABASE
    copy_database(database, copy)
    check_integrity(copy)
    names = [DATABASE] + [f"{DATA}/{rel}" for rel in _copy_data_files(data_dir, staging / DATA, database, skip)]
    manifest = {
        "format": FORMAT,
        "created_at": created_at.isoformat().replace("+00:00", "Z"),
        "data_dir": str(data_dir),
        "secret_key": "environment" if os.environ.get("SECRET_KEY", "").strip() else "file",
        "counts": _counts(copy),
        "migrations": _latest_migrations(copy),
        "files": [_describe(staging, name) for name in names],
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def copy_database(source: Path, target: Path) -> None:
    """Copy the live database in one step of SQLite's online backup API: one read transaction, so
    a consistent snapshot however much the hub writes meanwhile (a copy in several steps restarts
    whenever another connection writes, and may never finish on a busy hub). The copy is switched
    out of WAL so that it is one self-contained file."""
    with closing(sqlite3.connect(source, timeout=20)) as live, closing(sqlite3.connect(target)) as copy:
        live.backup(copy)
        copy.execute("PRAGMA journal_mode=DELETE")


def check_integrity(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db:
        rows = [row[0] for row in db.execute("PRAGMA integrity_check").fetchall()]
    if rows != ["ok"]:
        raise BackupError(f"The copied database fails SQLite's integrity check: {'; '.join(rows[:5])}")


# The tables counted in the manifest (hub sits below the apps, so it names their tables).
COUNTED_TABLES = {"chats": "chats_chat", "messages": "chats_message"}


def _counts(copy: Path) -> dict[str, int]:
    with closing(sqlite3.connect(copy)) as db:
        return {name: db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
                for name, table in COUNTED_TABLES.items()}


def _latest_migrations(copy: Path) -> dict[str, str]:
    """The last migration applied per app, in the order they were applied."""
    with closing(sqlite3.connect(copy)) as db:
        return dict(db.execute("SELECT app, name FROM django_migrations ORDER BY id").fetchall())


def data_files(data_dir: Path, database: Path, skip: list[Path]) -> list[Path]:
    """The data dir's files as relative paths, without the database's own files, what NOT_DATA
    names at the top level, and anything under skip."""
    excluded = {database.with_name(database.name + suffix) for suffix in SQLITE_SUFFIXES}
    found = []
    for root, dirs, files in os.walk(data_dir):
        here = Path(root)
        dirs[:] = sorted(d for d in dirs if _wanted(here / d, data_dir, skip))
        found += [(here / f).relative_to(data_dir) for f in sorted(files)
                  if here / f not in excluded and (here / f).is_file() and _wanted(here / f, data_dir, skip)]
    return found


def _wanted(path: Path, data_dir: Path, skip: list[Path]) -> bool:
    if path in skip:
        return False
    return path.parent != data_dir or not any(fnmatch.fnmatch(path.name, pattern) for pattern in NOT_DATA)


def _copy_data_files(data_dir: Path, target: Path, database: Path, skip: list[Path]) -> list[str]:
    names = []
    for rel in data_files(data_dir, database, skip):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copy2(data_dir / rel, target / rel)
        except FileNotFoundError:
            continue  # removed by the running hub since the walk: it is not part of the backup
        names.append(rel.as_posix())
    return names


def _describe(backup: Path, name: str) -> dict:
    path = backup / name
    return {"path": name, "size": path.stat().st_size, "sha256": sha256_of(path)}


def read_manifest(backup: Path) -> dict:
    try:
        manifest = json.loads((backup / MANIFEST).read_text())
    except FileNotFoundError:
        raise BackupError(f"{backup} is not a complete backup: it has no {MANIFEST}.") from None
    except (ValueError, UnicodeDecodeError):
        raise BackupError(f"{backup / MANIFEST} is not valid JSON.") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{backup / MANIFEST} is not a hub backup manifest of format {FORMAT}.")
    return manifest


def summary_line(manifest: dict) -> str:
    size = sum(entry["size"] for entry in manifest["files"])
    counts = manifest["counts"]
    return (f"{counts['chats']} chats, {counts['messages']} messages, {len(manifest['files'])} files, "
            f"{size / 1e6:.1f} MB")


# --- Restoring -------------------------------------------------------------------------------

def verify_backup(backup: Path) -> dict:
    """The backup's manifest, once every file it lists is present with its size and sha256.
    BackupError names the first file that is not."""
    manifest = read_manifest(backup)
    entries = manifest.get("files") or []
    if DATABASE not in {entry.get("path") for entry in entries}:
        raise BackupError(f"{backup / MANIFEST} lists no {DATABASE}.")
    for entry in entries:
        path = backup / _safe_relative(entry.get("path"))
        if not path.is_file():
            raise BackupError(f"{path} is missing from the backup. Nothing was restored.")
        if path.stat().st_size != entry.get("size") or sha256_of(path) != entry.get("sha256"):
            raise BackupError(f"{path} does not match its sha256 in the manifest: the backup is damaged or was "
                              "changed. Nothing was restored.")
    return manifest


def _safe_relative(name) -> Path:
    """A manifest path, refused unless it stays inside the backup (the manifest is input)."""
    path = Path(name) if isinstance(name, str) and name else None
    if path is None or path.is_absolute() or ".." in path.parts or not (
        path == Path(DATABASE) or (path.parts[0] == DATA and len(path.parts) > 1)
    ):
        raise BackupError(f"The manifest lists a path outside the backup: {name!r}.")
    return path


def holds_database(database: Path) -> bool:
    return any(database.with_name(database.name + suffix).exists() for suffix in SQLITE_SUFFIXES)


def restore_backup(backup: Path, data_dir: Path, *, database: Path | None = None, replace: bool = False) -> Path | None:
    """Restore a verified backup into data_dir: its files, then its database (to database, by
    default data_dir/hub.sqlite3) last, each under a temporary name renamed into place.

    Refuses (BackupError, nothing written) a damaged backup, and a data dir that holds a database
    unless replace. With replace, the present database and data files are first moved into
    data_dir/replaced-<UTC time>/, which is returned; so are files the backup would overwrite with
    other contents. Nothing is ever deleted. Returns None when nothing had to be moved aside.
    """
    backup, data_dir = backup.resolve(), data_dir.resolve()
    database = (database or data_dir / DATABASE).resolve()
    manifest = verify_backup(backup)
    if holds_database(database) and not replace:
        raise BackupError(f"{data_dir} already holds a database ({database}): restore into an empty data dir, "
                          "or pass --replace to move the present database and files aside first.")
    incoming = [Path(entry["path"]).relative_to(DATA) for entry in manifest["files"] if entry["path"] != DATABASE]
    aside = data_dir / f"replaced-{_stamp(datetime.now(UTC))}"
    moved = _move_aside(_displaced(backup, data_dir, database, incoming, replace), data_dir, database, aside)
    for rel in incoming:
        _put(backup / DATA / rel, data_dir / rel)
    _put(backup / DATABASE, database)
    return aside if moved else None


def _displaced(backup: Path, data_dir: Path, database: Path, incoming: list[Path], replace: bool) -> list[Path]:
    """What must move aside: with replace, the database and every data file; otherwise the files
    the backup would overwrite with other contents, except a secret_key with no database beside
    it (start-up made it a moment ago, and nothing can depend on it yet)."""
    if replace:
        present = data_files(data_dir, database, skip=[data_dir / "backups", backup])
        return [database.with_name(database.name + s) for s in SQLITE_SUFFIXES] + [data_dir / p for p in present]
    clashing = [data_dir / rel for rel in incoming
                if (data_dir / rel).is_file() and sha256_of(data_dir / rel) != sha256_of(backup / DATA / rel)]
    return [path for path in clashing if path != data_dir / "secret_key"]


def _move_aside(paths: list[Path], data_dir: Path, database: Path, aside: Path) -> bool:
    moved = False
    for path in paths:
        if not path.exists():
            continue
        rel = path.relative_to(data_dir) if path.is_relative_to(data_dir) else Path(path.name)
        (aside / rel).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.move(path, aside / rel)
        moved = True
    return moved


def _put(source: Path, target: Path) -> None:
    """Copy under a temporary name, then rename: a target is either absent or whole."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.restoring")
    shutil.copy2(source, temporary)
    os.replace(temporary, target)
