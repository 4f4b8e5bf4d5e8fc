"""The operator's documents keep up with the code: every setting the hub reads is documented, and
no file tells the project's history by numbered rounds of work, which a reader cannot place."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTING_READ = re.compile(r"""env_(?:str|int|float|bool|list)\(\s*["']([A-Z][A-Z0-9_]+)["']""")
TEXT_SUFFIXES = {".py", ".md", ".txt", ".html", ".js", ".css", ".toml", ".ini", ".cfg", ".example", ".json", ".yml", ""}
ROUND_NUMBER = re.compile(r"\bstops? \d+\b|\bround \d+\b|\b(?:this|next|last) session\b", re.IGNORECASE)


def settings_read_by_the_hub() -> set[str]:
    names = set()
    for path in ROOT.glob("*/**/*.py"):
        if ".venv" in path.parts or path.parts[len(ROOT.parts)] in {"tests", "bench", "var"}:
            continue
        names |= set(SETTING_READ.findall(path.read_text()))
    return names


def test_every_setting_the_hub_reads_is_in_the_operator_guide_and_env_example():
    names = settings_read_by_the_hub()
    assert {"DATABASE_URL", "HUB_LEASE_SECONDS", "HUB_OUTBOUND_ALLOW"} <= names  # the scan finds them
    guide = (ROOT / "docs" / "operations.md").read_text()
    example = (ROOT / ".env.example").read_text()
    assert sorted(n for n in names if f"`{n}`" not in guide) == []
    assert sorted(n for n in names if not re.search(rf"^{n}=", example, re.MULTILINE)) == []


def test_no_file_of_the_project_refers_to_numbered_rounds_of_work():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not tracked:  # not a git checkout (an exported tree): read what is there
        tracked = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
    found = []
    for name in tracked:
        path = ROOT / name
        if path.suffix not in TEXT_SUFFIXES:
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        found += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if ROUND_NUMBER.search(line)]
    assert found == []
