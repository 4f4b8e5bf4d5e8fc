"""The shape of a repair: checks that find broken state (reads only) and fix it (through services).

Each app lists its checks (chats.repair, agents_app.repair); `hub_repair` and the admin's repair
page run them all. A dry run only reads. With fix, the checks run in order and each one looks
after the fixes of those before it, so a finding an earlier fix already cured (a recovered run
settles its reply) is neither reported nor fixed twice.

A check without a fix reports what the hub cannot put right by itself (no worker is running):
its findings say what to do, and they count as problems left, so the report never says "Nothing
to repair." while they last.
"""

import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction

from hub.errors import HubError


@dataclass
class Finding:
    """One broken thing, said so a support person can act on it."""

    check: str
    subject: str  # what is broken: "run 1a2b3c4d (Helper in 'Plans')"
    problem: str  # what is wrong with it
    remedy: str  # what the fix does (or did)
    target: object = None  # what the fix acts on (a model instance or a key); never shown
    url: str = ""  # the admin page of the subject
    outcome: str = ""  # after a fix: what was done, or why it was not
    fixed: bool = False
    fixable: bool = True  # False: the remedy is for a person to do (the check has no fix)


@dataclass
class Check:
    key: str
    title: str  # "Streaming messages with no live run"
    find: Callable[[], list[Finding]]
    fix: Callable[[Finding], str] | None  # returns what it did; raises HubError when it could not
    description: str = ""  # how the broken state comes about, for the repair page


@dataclass
class CheckResult:
    check: Check
    findings: list[Finding] = field(default_factory=list)
    error: str = ""  # the check itself could not run
    seconds: float = 0.0  # how long finding (and fixing) took

    @property
    def fixable(self) -> bool:
        return self.check.fix is not None


@dataclass
class Report:
    fixing: bool
    results: list[CheckResult]

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.results for f in r.findings]

    @property
    def unfixed(self) -> list[Finding]:
        return [f for f in self.findings if not f.fixed]

    @property
    def fixable(self) -> list[Finding]:
        """What --fix (or the page's Fix button) could repair."""
        return [f for f in self.findings if f.fixable]

    @property
    def healthy(self) -> bool:
        return not self.unfixed and not any(r.error for r in self.results)

    def summary(self) -> str:
        found = len(self.findings)
        if not found and self.healthy:
            return "Nothing to repair."
        if self.fixing:
            fixed = found - len(self.unfixed)
            return f"{found} problem{'s' * (found != 1)} found, {fixed} fixed, {len(self.unfixed)} left."
        fixable = len(self.fixable)
        by_hand = found - fixable
        if not by_hand:
            return f"{found} problem{'s' * (found != 1)} found. Run with --fix to repair them."
        return (f"{found} problem{'s' * (found != 1)} found"
                + (f"; --fix repairs {fixable}" if fixable else "")
                + f"; {by_hand} need{'s' * (by_hand == 1)} you: see what to do above.")

    def as_table(self, *, width: int = 120) -> str:
        """The report as plain text: a line per check, then a table of findings under it."""
        lines = []
        for result in self.results:
            count = len(result.findings)
            state = f"ERROR: {result.error}" if result.error else ("ok" if not count else f"{count} found")
            lines.append(f"{result.check.title} [{result.check.key}]: {state}")
            if count:
                rows = [(f.subject, f.problem, f.outcome if self.fixing else _remedy_shown(f))
                        for f in result.findings]
                lines.extend(_table(("subject", "problem", "fixed" if self.fixing else "fix"), rows, width=width))
                lines.append("")
        lines.append(self.summary())
        return "\n".join(lines)


def _remedy_shown(finding: Finding) -> str:
    return f"would {finding.remedy}" if finding.fixable else f"needs you: {finding.remedy}"


def _table(header, rows, *, width: int) -> list[str]:
    """Columns sized to their content; when a row is too wide its longest cells wrap onto more
    lines (nothing is cut off)."""
    columns = list(zip(header, *rows, strict=True))
    sizes = [max(len(" ".join(str(v).split())) for v in column) for column in columns]
    budget = width - 2 - 3 * (len(sizes) - 1)
    while sum(sizes) > budget and max(sizes) > 16:
        sizes[sizes.index(max(sizes))] -= 1

    def line(values):
        cells = [textwrap.wrap(" ".join(str(v).split()), s, break_on_hyphens=False) or [""]
                 for v, s in zip(values, sizes, strict=True)]
        height = max(len(c) for c in cells)
        return [
            "  " + " | ".join((c[i] if i < len(c) else "").ljust(s) for c, s in zip(cells, sizes, strict=True)).rstrip()
            for i in range(height)
        ]

    separator = "  " + "-+-".join("-" * s for s in sizes)
    out = [*line(header), separator]
    for index, row in enumerate(rows):
        if index and any(len(" ".join(str(v).split())) > s for v, s in zip(row, sizes, strict=True)):
            out.append(separator.replace("-", " ").replace("+", "|"))
        out.extend(line(row))
    return out


def run_checks(checks: list[Check], *, fix: bool = False, on_fixed=None) -> Report:
    """Run each check; with fix, repair what it found, one finding per transaction.

    on_fixed(finding) is called after each successful fix (the admin records a LogEntry there).
    """
    results = []
    for check in checks:
        result = CheckResult(check=check)
        results.append(result)
        started = time.monotonic()
        try:
            result.findings = check.find()
        except Exception as exc:  # one broken check must not hide what the others found
            result.error = f"{type(exc).__name__}: {exc}"
            continue
        finally:
            result.seconds = time.monotonic() - started
        if check.fix is None:
            for finding in result.findings:
                finding.fixable = False
                finding.outcome = f"not fixed: the hub cannot do this itself; {finding.remedy}"
            continue
        if not fix:
            continue
        for finding in result.findings:
            try:
                with transaction.atomic():
                    finding.outcome = check.fix(finding)
                    finding.fixed = True
                    if on_fixed is not None:
                        on_fixed(finding)
            except HubError as exc:
                finding.outcome = f"not fixed: {exc.message}"
            except Exception as exc:
                finding.outcome = f"not fixed: {type(exc).__name__}: {exc}"
        result.seconds = time.monotonic() - started
    return Report(fixing=fix, results=results)
