"""The Celery app. Workers run `celery -A hub worker`; embedded mode runs one inside runhub."""

import logging
import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init, worker_process_init, worker_ready
from django.db import DatabaseError, close_old_connections, connection

from hub.startup import freeze_startup_heap

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
# Celery's Django fixup runs Django's system checks in every worker it starts: about 0.35 s of CPU
# (the URL conf and every view imported) of a worker's 3 s start, on each start of each worker.
# They check the code, not the deployment, and the release step's `migrate` runs them anyway.
os.environ.setdefault("CELERY_SKIP_CHECKS", "true")
# A worker's mingle step waits a second at each start for the other workers' revoked task ids, and
# gossip has every worker follow every other's events. The hub revokes no task (a run is cancelled
# in the database) and keeps its own heartbeats and leases, so a worker started (or restarted
# after a crash) takes turns a second sooner without them. These are the defaults of the worker
# command's --without-mingle and --without-gossip; set either variable to false to have them back.
os.environ.setdefault("CELERY_WORKER_WITHOUT_MINGLE", "true")
os.environ.setdefault("CELERY_WORKER_WITHOUT_GOSSIP", "true")
log = logging.getLogger(__name__)

app = Celery("hub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


# The model clients a worker sets up before its first turn, most used first. A provider maps to
# one: Ollama talks through the OpenAI client.
MODEL_CLIENTS = ("openai", "anthropic", "mcp")
CLIENT_OF_PROVIDER = {"openai": "openai", "ollama": "openai", "anthropic": "anthropic"}
# Where the throwaway clients point: nothing is ever sent; building one loads what every client of
# its kind needs (the SDK's lazily imported resources, the price data).
WARM_UP_URL = "http://127.0.0.1:9/v1"


def _openai() -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.ollama import OllamaProvider  # noqa: F401
    from pydantic_ai.providers.openai import OpenAIProvider  # noqa: F401
    from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

    OpenAIChatModel("warm-up", provider=OpenAICompatibleProvider("warm-up", base_url=WARM_UP_URL, api_key="-"))


def _anthropic() -> None:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    AnthropicModel("warm-up", provider=AnthropicProvider(base_url=WARM_UP_URL, api_key="-"))


def _mcp() -> None:
    import fastmcp.client  # noqa: F401
    import pydantic_ai.mcp  # noqa: F401


SET_UP = {"openai": _openai, "anthropic": _anthropic, "mcp": _mcp}


def set_up_model_clients(clients=MODEL_CLIENTS) -> None:
    """Import the named model clients and build one of each, so a turn finds them ready.

    Left to the first turn of a fresh worker, they made it wait: on a quiet 2-core machine the
    OpenAI client took about 0.5 s to import and build, Anthropic's 1.2 to 1.6 s, MCP's about 1 s.
    A client that is not installed is skipped; nothing here talks to the network.
    """
    for name in MODEL_CLIENTS:
        if name in clients:
            try:
                SET_UP[name]()
            except ImportError:
                log.debug("the %s model client is not installed", name)


# Which clients runhub's worker sets up: agents_app registers a finder of the ones its agents
# use (find_model_clients_in_use_with); without one, all of them.
_model_clients_finder = None


def find_model_clients_in_use_with(finder) -> None:
    """finder() -> the names (of MODEL_CLIENTS) of the clients the hub's agents use."""
    global _model_clients_finder
    _model_clients_finder = finder


def model_clients_in_use(*, when_unknown: set[str]) -> set[str]:
    """The clients the hub's agents use; when_unknown when the database cannot say. For a thread
    that asks the database nothing more: its connection is closed (a prefork pool's children must
    not share a worker's)."""
    try:
        return set(_model_clients_finder() if _model_clients_finder else MODEL_CLIENTS)
    except DatabaseError:
        log.warning("could not read which model clients the agents use")
        return when_unknown
    finally:
        connection.close()


def is_embedded(worker) -> bool:
    return str(getattr(worker, "hostname", "")).startswith("embedded@")


@worker_init.connect
def set_up_model_clients_before_taking_tasks(sender=None, **kwargs):
    """A worker process of its own sets up, before it consumes, the OpenAI client (the default
    provider's) and the other clients its hub's agents use; every client when it cannot tell
    which. runhub sets up its embedded worker's while it starts (hub.embedded.ModelClientWarmUp).

    Only those in use: Anthropic's SDK and the MCP client cost about 1.9 and 1.5 s of CPU to import
    on this machine, more than a worker's whole start without them, on every start of every
    worker. A provider an agent takes up later is set up by its first turn in each worker.
    """
    if not is_embedded(sender):
        set_up_model_clients({"openai"} | model_clients_in_use(when_unknown=set(MODEL_CLIENTS)))


@worker_ready.connect
@worker_process_init.connect
def freeze_heap_once_started(**kwargs):
    """A worker (or a prefork pool's child) has imported all it needs."""
    freeze_startup_heap()


@task_prerun.connect
@task_postrun.connect
def close_stale_database_connections(**kwargs):
    """Around each task, as around each request: drop a broken connection or one past its age."""
    close_old_connections()
