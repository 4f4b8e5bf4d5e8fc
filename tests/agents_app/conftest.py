import pytest

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
