import pytest

from agents_app.models import Run
from agents_app.tools import REGISTRY


@pytest.fixture
def scripted_agent(make_agent, user):
    def make(name="Scribe", reply="Hello {prompt}, nice to meet you.", chunk=4, delay=0.0, tools=(),
             reply_policy="always", recovery_policy="continue", **script_options):
        script = {"reply": reply, "chunk": chunk, "delay": delay,
                  "tools": [{"name": t[0], "args": t[1]} for t in tools], **script_options}
        return make_agent(user, name=name, model="test:scripted", settings={"script": script},
                          # A tool that is not Hub's (a remote's) comes from the thread, not the agent.
                          tools=sorted({t[0] for t in tools if t[0] in REGISTRY}), reply_policy=reply_policy,
                          recovery_policy=recovery_policy)

    return make


@pytest.fixture
def run_now():
    """Execute queued runs in this process, in order, as a worker would (no broker needed)."""
    from agents_app.turns import execute_run

    def run(limit=20):
        outcomes = []
        for _ in range(limit):
            queued = Run.objects.filter(status=Run.Status.QUEUED).order_by("created_at").first()
            if queued is None:
                break
            outcomes.append(execute_run(queued.pk))
        return outcomes

    return run
