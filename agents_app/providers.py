"""Turning an Agent row into a pydantic-ai model, and a model error into words for a user."""

import os
import re

from agents_app.models import Agent

SECRET_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


class UnknownModel(ValueError):
    pass


def build_model(agent: Agent):
    name = agent.model
    prefix, _, model_name = name.partition(":")
    if prefix == "test" and model_name == "scripted":
        from agents_app.scripted import scripted_model

        return scripted_model((agent.settings or {}).get("script", {}))
    if prefix == "openai":
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        base_url = agent.base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = os.environ.get("OPENAI_API_KEY") or ("not-needed" if base_url else None)
        return OpenAIChatModel(model_name, provider=OpenAIProvider(base_url=base_url, api_key=api_key))
    if prefix in {"anthropic", "ollama"}:
        from pydantic_ai.models import infer_model

        return infer_model(name)
    raise UnknownModel(f"Hub does not know the model {name!r}.")


def readable_error(exc: BaseException) -> str:
    """One sentence a user can understand, with any secret scrubbed out."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
    for variable in SECRET_ENV:
        secret = os.environ.get(variable)
        if secret:
            text = text.replace(secret, "***")
    text = re.sub(r"(sk-[A-Za-z0-9_-]{4})[A-Za-z0-9_-]+", r"\1***", text)
    if isinstance(exc, UnknownModel):
        return text
    return f"The agent's model failed: {text[:300]}"
