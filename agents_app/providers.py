"""Turning an Agent row into a pydantic-ai model, and a model error into words for a user.

Model strings: `openai:<name>` (any OpenAI-compatible server: the agent's base_url, else
OPENAI_BASE_URL, else OpenAI), `anthropic:<name>` (the agent's base_url, else ANTHROPIC_BASE_URL,
else Anthropic), `ollama:<name>` (the agent's base_url, else OLLAMA_BASE_URL, else the local
Ollama), `builtin:librarian` and `test:scripted` (offline).

Keys: the chat owner's own key (agents_app.secrets) wins over the server's environment. The
server's key (OPENAI_API_KEY, ANTHROPIC_API_KEY, OLLAMA_API_KEY) goes only to the server's own base
URL (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, OLLAMA_BASE_URL, or the provider's default when none is
set): an agent whose base URL is another server, which any user may type, gets its owner's key or
none, and its calls go through agents_app.outbound, which keeps them off the hub's own network.
A key is sent only in the provider's auth header; every text that leaves this module is scrubbed of
every key it has handed out, so a key a provider echoes in an error body never reaches a page, an
event or a log line.
"""

import logging
import os
import re
from collections import deque
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from agents_app.models import Agent
from hub.errors import InvalidInput

PROVIDERS = {"openai", "anthropic", "ollama", "builtin", "test"}
OFFLINE_MODELS = {"builtin": {"librarian"}, "test": {"scripted"}}
SECRET_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_API_KEY")
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434/v1"
# provider: (the server's key variable, its base URL variable, the provider's own base URL)
ENVIRONMENT = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL", "https://api.openai.com/v1"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
    "ollama": ("OLLAMA_API_KEY", "OLLAMA_BASE_URL", DEFAULT_OLLAMA_URL),
}
# Local servers (Ollama, llama.cpp, vLLM) take any key, but the SDKs refuse to send none.
PLACEHOLDER_KEY = "api-key-not-set"
KEYS_PAGE = "Agents → Provider keys"


class UnknownModel(ValueError):
    """The agent's model string names nothing Hub can run; the text is for the user."""


class ProviderNotConfigured(ValueError):
    """The provider needs something the server or the user has not set (a key); the text says what."""


# --- Secrets --------------------------------------------------------------------------------

# Keys handed to a provider client by this process. readable_error gets only the exception, so it
# scrubs every key issued here (bounded: the newest few hundred, which covers any live turn).
_issued_keys: deque[str] = deque(maxlen=512)
SECRET_PATTERNS = (
    (re.compile(r"\b(sk-(?:ant-|proj-|or-)?)[A-Za-z0-9_\-]{6,}"), r"\1***"),
    (re.compile(r"(?i)\b(bearer\s+)[^\s\"',}]+"), r"\1***"),
    (re.compile(r"(?i)((?:api[_-]?key|x-api-key|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"), r"\1***"),
)


def _issue(key: str | None) -> str | None:
    if key and key != PLACEHOLDER_KEY and key not in _issued_keys:
        _issued_keys.append(key)
    return key


def scrub(text: str) -> str:
    """The text with every known key and anything shaped like a key replaced by ***."""
    secrets = [*list(_issued_keys), *(os.environ.get(name, "") for name in SECRET_ENV)]
    for secret in sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True):
        text = text.replace(secret, "***")
    for pattern, replacement in SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class ScrubSecrets(logging.Filter):
    """Scrubs log records (message and traceback) of keys before any handler sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        return True


# The turn executor logs a failed model call with the exception, whose body may hold a key. A
# logger's filter sees only what that logger itself logs, so each module's logger is named.
for _logger_name in ("agents_app.turns.execution", "agents_app.turns.tasks", __name__):
    logging.getLogger(_logger_name).addFilter(ScrubSecrets())


def _user_key(owner_id, provider: str) -> str | None:
    if owner_id is None or provider == "ollama":  # users store no Ollama key
        return None
    from agents_app.secrets import key_for

    return key_for(owner_id=owner_id, provider=provider)


@dataclass(frozen=True)
class Endpoint:
    """Where an agent's requests go and with which key."""

    base_url: str  # "" for the provider's own default
    key: str | None
    user_typed: bool  # another server than the environment's: guarded, never the server's key
    allow_private: bool = False


def _same_server(a: str, b: str) -> bool:
    """Whether two base URLs name one endpoint (scheme, host, port and path; /v1 and a final / aside)."""
    def normal(url):
        parts = urlsplit(url.strip())
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return parts.scheme.lower(), (parts.hostname or "").lower(), port, parts.path.rstrip("/").removesuffix("/v1")

    try:
        return normal(a) == normal(b)
    except ValueError:
        return False


def endpoint(agent: Agent, provider: str, owner_id) -> Endpoint:
    """The agent's endpoint: its own base URL with its owner's key, or the server's with the
    owner's key, else the server's key."""
    key_name, url_name, default_url = ENVIRONMENT[provider]
    server_url = os.environ.get(url_name, "").strip()
    typed = (agent.base_url or "").strip()
    own_key = _user_key(owner_id, provider)
    if typed and not _same_server(typed, server_url or default_url):
        return Endpoint(typed, own_key, user_typed=True,
                        allow_private=agent.allow_private_network and agent.owner_id is None)
    return Endpoint(typed or server_url, own_key or os.environ.get(key_name, "").strip() or None, user_typed=False)


def _http_client(where: Endpoint, shared=None):
    """A guarded client for a user-typed server; for the server's own, the caller's shared client
    or None, which lets the SDK make its usual one."""
    if not where.user_typed:
        return shared
    from agents_app.outbound import guarded_client

    return guarded_client(allow_private=where.allow_private)


# --- Validation -----------------------------------------------------------------------------

def validate_agent_model(model: str, base_url: str) -> None:
    """Raise InvalidInput (field model or base_url) for a model string or base URL Hub cannot use."""
    model = (model or "").strip()
    prefix, colon, name = model.partition(":")
    if not colon or not prefix or not name or re.search(r"\s", model):
        raise InvalidInput.for_field("model", "must look like provider:model, e.g. openai:gpt-4.1-mini")
    if prefix not in PROVIDERS:
        raise InvalidInput.for_field(
            "model", f"unknown provider {prefix!r}; use one of {', '.join(sorted(PROVIDERS))}"
        )
    if prefix in OFFLINE_MODELS and name not in OFFLINE_MODELS[prefix]:
        known = ", ".join(f"{prefix}:{n}" for n in sorted(OFFLINE_MODELS[prefix]))
        raise InvalidInput.for_field("model", f"unknown {prefix} model {name!r}; use {known}")
    if base_url and base_url.strip():
        _validate_base_url(base_url.strip())


def _validate_base_url(base_url: str) -> None:
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise InvalidInput.for_field("base_url", "is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or re.search(r"\s", base_url):
        raise InvalidInput.for_field("base_url", "must be an http:// or https:// URL, e.g. http://127.0.0.1:11434/v1")
    if parts.username or parts.password:
        # A URL is shown on pages; a key belongs under Provider keys, where it stays secret.
        raise InvalidInput.for_field(
            "base_url", f"must not contain a user name or password; save keys under {KEYS_PAGE}"
        )


# --- Building the model ---------------------------------------------------------------------

def build_model(agent: Agent, *, owner_id, http_client=None):
    """The pydantic-ai model for the agent, with owner_id's own key (else the server's).

    http_client, when given, is an HTTP client the caller keeps open on the event loop the model
    runs on (a worker's model loop): the server's own endpoints are reached through it, so a turn
    reuses its open connections instead of making a client, and a TLS handshake, of its own.
    A server a user typed in always gets a guarded client of its own (agents_app.outbound).

    A model that cannot be built (unknown name, missing key) is returned as a model that fails its
    first request with the reason, so the turn ends through its normal error path, with that reason
    on the reply, instead of failing before the reply exists.
    """
    from pydantic_ai.exceptions import UserError

    try:
        return _build(agent, owner_id, http_client)
    except (UnknownModel, ProviderNotConfigured, UserError) as exc:
        return _failing_model(exc)


def spends_tokens(agent: Agent) -> bool:
    """Whether the agent's tokens count as usage: a built-in agent (the Librarian) runs in the hub,
    at no provider's cost, and its counts are pydantic-ai's estimates, not a provider's report."""
    return not (agent.model or "").strip().startswith("builtin:")


def _build(agent: Agent, owner_id, shared_client=None):
    prefix, _, model_name = (agent.model or "").strip().partition(":")
    if prefix == "test" and model_name == "scripted":
        from agents_app.scripted import scripted_model

        return scripted_model((agent.settings or {}).get("script", {}))
    if prefix == "builtin" and model_name == "librarian":
        from agents_app.librarian import librarian_model

        return librarian_model()
    if not model_name:
        raise UnknownModel(f"Hub does not know the model {agent.model!r}.")
    builders = {"openai": _openai_model, "ollama": _ollama_model, "anthropic": _anthropic_model}
    if prefix not in builders:
        raise UnknownModel(f"Hub does not know the model {agent.model!r}.")
    from agents_app.continuations import with_continuation

    where = endpoint(agent, prefix, owner_id)
    model = builders[prefix](model_name, where, _model_settings(agent), _http_client(where, shared_client))
    # How a continuation asks for the rest of a reply: settings["continuation"] (agents_app.continuations).
    return with_continuation(model, agent, prefix)


def _model_settings(agent: Agent) -> dict:
    """Bounded SDK retries: a 429 or 500 is retried a little, then the turn fails with a reason."""
    configured = (agent.settings or {}).get("max_retries")
    retries = configured if isinstance(configured, int) else getattr(settings, "HUB_MODEL_MAX_RETRIES", 2)
    return {"max_retries": max(0, min(int(retries), 5))}


def _openai_model(model_name: str, where: Endpoint, model_settings: dict, http_client):
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

    key = _issue(where.key)
    if not where.base_url or urlsplit(where.base_url).hostname == "api.openai.com":
        if not key:
            server = "" if where.user_typed else ", or set OPENAI_API_KEY on the server"
            raise ProviderNotConfigured(f"No OpenAI API key is set: add yours under {KEYS_PAGE}{server}.")
        provider = OpenAIProvider(base_url=where.base_url or None, api_key=key, http_client=http_client)
    else:
        # Another server (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter): OpenAI-only request
        # features stay off, and an OpenAI profile is not assumed for its models.
        provider = OpenAICompatibleProvider("openai-compatible", base_url=where.base_url,
                                            api_key=key or PLACEHOLDER_KEY, http_client=http_client)
    return OpenAIChatModel(model_name, provider=provider, settings=model_settings)


def _ollama_model(model_name: str, where: Endpoint, model_settings: dict, http_client):
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.ollama import OllamaProvider

    key = _issue(where.key) or PLACEHOLDER_KEY
    provider = OllamaProvider(base_url=where.base_url or DEFAULT_OLLAMA_URL, api_key=key,
                              http_client=http_client)
    return OpenAIChatModel(model_name, provider=provider, settings=model_settings)


def _anthropic_model(model_name: str, where: Endpoint, model_settings: dict, http_client):
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    # The Anthropic SDK appends /v1/messages itself; accept a base URL written the OpenAI way too.
    base_url = where.base_url.rstrip("/").removesuffix("/v1")
    key = _issue(where.key)
    if not key and not base_url:
        raise ProviderNotConfigured(
            f"No Anthropic API key is set: add yours under {KEYS_PAGE}, or set ANTHROPIC_API_KEY on the server."
        )
    provider = AnthropicProvider(api_key=key or PLACEHOLDER_KEY, base_url=base_url or None,
                                 http_client=http_client)
    return AnthropicModel(model_name, provider=provider, settings=model_settings)


def _failing_model(reason: Exception):
    from pydantic_ai.models.function import FunctionModel

    def answer(messages, info):
        raise reason

    async def stream(messages, info):
        raise reason
        yield ""  # an async generator, as FunctionModel expects

    return FunctionModel(answer, stream_function=stream, model_name="unavailable")


# --- Errors in words ------------------------------------------------------------------------

def readable_error(exc: BaseException) -> str:
    """One short sentence a user can understand; never a traceback, never a key."""
    from pydantic_ai import exceptions as errors

    from agents_app.remotes import RemoteUnreachable

    if isinstance(exc, (UnknownModel, ProviderNotConfigured, RemoteUnreachable)):
        return scrub(str(exc))
    if isinstance(exc, errors.ModelAPIError):
        return scrub(_api_error_sentence(exc, errors))
    if isinstance(exc, errors.UsageLimitExceeded):
        return scrub(f"The turn reached its usage limit: {exc.message}")
    if isinstance(exc, errors.UnexpectedModelBehavior):
        return scrub(f"The model sent an answer Hub could not use: {_first_line(exc.message)}")
    if isinstance(exc, errors.UserError):
        return scrub(f"The agent's model is not set up correctly: {_first_line(exc.message)}")
    return scrub(f"The agent's model failed: {_first_line(str(exc)) or exc.__class__.__name__}")


def _api_error_sentence(exc, errors) -> str:
    """The most specific category first: pydantic-ai's error classes nest."""
    where = _server_address(exc)
    if isinstance(exc, errors.ModelAuthenticationError):
        return "The model provider refused the API key."
    if isinstance(exc, errors.ModelRateLimitError):
        return "The model provider is rate-limiting requests; try again shortly."
    if isinstance(exc, errors.ModelQuotaExceededError):
        return "The model provider says the account's quota or credit is used up."
    if isinstance(exc, errors.ModelUnavailableError):
        return "The model provider is overloaded or unavailable right now; try again shortly."
    if isinstance(exc, errors.ModelServerError):
        status = f" (HTTP {exc.status_code})" if isinstance(exc, errors.ModelHTTPError) else ""
        return f"The model provider had an internal error{status}; try again shortly."
    if isinstance(exc, errors.ModelNotFoundError):
        return f"The model provider does not know the model {exc.model_name!r}, or the base URL is wrong."
    if isinstance(exc, errors.ModelContextWindowExceededError):
        return "The conversation is too long for the model's context window."
    if isinstance(exc, errors.ModelRequestRejectedError):
        detail = _provider_message(exc)
        return f"The model provider rejected the request{': ' + detail if detail else '.'}"
    if isinstance(exc, errors.ModelTimeoutError) or isinstance(exc, errors.ModelRequestTimeout):
        return f"The model server{' at ' + where if where else ''} did not answer in time."
    if isinstance(exc, errors.ModelConnectionError):
        if exc.phase in ("pool", "connect") or (exc.phase is None and _refused(exc)):
            return f"The model server{' at ' + where if where else ''} could not be reached."
        return f"The connection to the model server{' at ' + where if where else ''} broke off during the answer."
    if isinstance(exc, errors.ModelHTTPError):
        return f"The model provider answered with an error (HTTP {exc.status_code})."
    return "The model server sent an answer Hub could not read."


def _causes(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _server_address(exc: BaseException) -> str:
    """host:port of the request that failed, from the SDK's or HTTP client's exception (no path, no user)."""
    for cause in _causes(exc):
        try:
            url = cause.request.url  # openai/anthropic APIConnectionError and httpx errors carry it
        except (AttributeError, RuntimeError):
            continue
        host, port = getattr(url, "host", ""), getattr(url, "port", None)
        if host:
            return f"{host}:{port}" if port else str(host)
    return ""


def _refused(exc: BaseException) -> bool:
    return any(isinstance(c, ConnectionRefusedError) or type(c).__name__ == "ConnectError" for c in _causes(exc))


def _provider_message(exc) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        message = inner.get("message")
        if isinstance(message, str):
            return _first_line(message)[:200]
    return ""


def _first_line(text: str) -> str:
    text = (text or "").strip()
    return text.splitlines()[0][:300] if text else ""
