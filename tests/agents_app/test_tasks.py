"""The turn's Celery tasks keep the names that queued messages and beat's schedule carry."""

from agents_app.turns import runs, tasks
from hub.celery import app


def test_a_worker_finds_every_task_under_its_name():
    app.loader.import_default_modules()  # what a worker imports when it starts (CELERY_IMPORTS)
    assert {"agents_app.run_turn", "agents_app.sweep_runs", "agents_app.generate_title"} <= set(app.tasks)


def test_a_run_is_sent_under_the_name_its_task_has(monkeypatch):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append((name, args)))
    runs.send_turn_task("a-run-id")
    assert sent == [("agents_app.run_turn", ["a-run-id"])]
    assert tasks.run_turn.name == "agents_app.run_turn" and tasks.run_turn.acks_late
