"""The REST API of agents and runs (/api/v1/agents/, /api/v1/runs/), with the run event stream."""
