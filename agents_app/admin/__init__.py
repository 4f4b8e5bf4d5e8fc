"""The admin of agents and their turns: find why a reply failed or stalled, and put it right.

Runs and workers are read-only rows; actions (recover now, cancel, retry) call the services of
agents_app.repair and record a LogEntry. Agents are edited through agents_app.services. The staff
pages beside the model admin (health, repair, /healthz) are in pages.py, routed by urls.py.
"""

from agents_app.admin import agents, runs, usage  # noqa: F401  (each registers its models)
