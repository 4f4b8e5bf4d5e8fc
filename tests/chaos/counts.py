"""The chaos tests' counts, gathered from their reports and printed at the end of the run.

Each chaos test leaves its line (its name, seed, seconds and counts) in its report's
user_properties, which pytest-xdist hands from the worker that ran the test to the process that
prints the summary; so the lines and their totals show whether the tests ran in one process or
two at a time.
"""

import json
from collections import Counter

CHAOS_PROPERTY = "chaos_test"
NOT_COUNTS = ("test", "seed", "seconds")


def lines_in(report) -> list[dict]:
    """The chaos line a test's teardown report carries, if any."""
    if report.when != "teardown":
        return []
    return [value for name, value in report.user_properties if name == CHAOS_PROPERTY]


def print_counts(terminalreporter, lines: list[dict]) -> None:
    """Each chaos test's line, then the totals of their counts."""
    if not lines:
        return
    totals: Counter = Counter()
    terminalreporter.section("chaos counts")
    for line in lines:
        terminalreporter.write_line(json.dumps({CHAOS_PROPERTY: line}))
        totals.update({key: value for key, value in line.items() if key not in NOT_COUNTS})
    totals["tests"] = len(lines)
    terminalreporter.write_line(json.dumps({"chaos": dict(sorted(totals.items()))}))
