"""Benchmarks, run by `make bench` (`python -m bench [name ...]`); each prints its figures as JSON.

A benchmark is a module of this package with a `run() -> dict`; list its name in
bench.__main__.BENCHMARKS. bench.live_hub starts the hub's real processes on a throwaway database.
"""
