"""`python -m bench` runs every benchmark but `peers`, `scaling` and `suite`; `python -m bench streaming`
runs the one named.

Each benchmark with no name given runs in its own Python process, because a benchmark configures
Django (settings, database) for itself and Django can be set up only once per process.
Figures go to stdout as one JSON object keyed by benchmark name; progress and logs go to stderr.
"""

import importlib
import json
import subprocess
import sys

# Module names in this package, each with a run() -> dict. Add new benchmarks here.
BENCHMARKS = [
    "streaming", "search", "recovery", "startup", "pages", "files", "imports", "embedded", "scaling", "peers", "suite",
]
# Run only when named: `peers` compares with Open WebUI, a 7.4 GB install of its own
# (BENCH_PEERS_INSTALL=1; without it, it reports that it was skipped); `scaling` starts the hub in
# six layouts and fills both cores for about twelve minutes, five times the streaming benchmark;
# `suite` runs the test suite twice per mode (10 minutes embedded, about 40 on PostgreSQL).
ONLY_WHEN_NAMED = {"peers", "scaling", "suite"}
# A benchmark that runs longer than this is stopped (each one should stay well under it).
BENCHMARK_TIMEOUT_SECONDS = 3600


def run_here(name: str) -> dict:
    return importlib.import_module(f"bench.{name}").run()


def run_in_own_process(name: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "bench", name], stdout=subprocess.PIPE, text=True, timeout=BENCHMARK_TIMEOUT_SECONDS
    )
    if result.returncode != 0:
        return {"error": f"exited with status {result.returncode} (see its output above)"}
    return json.loads(result.stdout)[name]


def main(argv: list[str]) -> int:
    unknown = [name for name in argv if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark {unknown[0]!r}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    if len(argv) == 1:
        figures = {argv[0]: run_here(argv[0])}
    else:
        default = [name for name in BENCHMARKS if name not in ONLY_WHEN_NAMED]
        figures = {name: run_in_own_process(name) for name in argv or default}
    print(json.dumps(figures, indent=2))
    return 1 if any("error" in result for result in figures.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
