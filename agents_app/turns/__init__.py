"""An agent's turn, from the queued run to the settled reply, in layers that import only downwards.

    tasks                 the Celery tasks and worker signals: thin, on top, calling down
    execution | peers     one turn in a worker (Turn, execute_run); dead workers found across hosts
    delivery | recovery | delegation | inputs
                          who answers a new message; lost turns recovered; one agent asking
                          another; the model's input built from the thread
    modelloop             the process's event loop that streams every turn's model
    runs                  the run state machine: every status change, fenced by the lease

A lower module never imports a higher one, not even inside a function (`make lint` checks it):
the run state machine sends the run_turn task by its name, and the ask_agent tool reaches
delegation through the turn's dependencies (agents_app.tools.TurnDeps.delegate). This package
imports nothing on purpose: import the module you need.
"""
