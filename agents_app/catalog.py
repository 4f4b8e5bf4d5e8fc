"""The models a provider offers: OpenAI-compatible servers' and Ollama's `/v1/models`, Anthropic's
`/v1/models`. Asked through the same endpoint and key a turn would use (a server a user typed is
reached through the outbound guard), kept in the cache for CACHE_SECONDS, refreshed on demand. A
provider that cannot list its models gives an empty list and the reason: a typed name still works.
"""

import asyncio
import hashlib
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx2
from django.core.cache import cache

from agents_app import providers
from agents_app.models import Agent

log = logging.getLogger(__name__)

CACHE_SECONDS = 600
MAX_MODELS = 500
ANTHROPIC_DEFAULT = "https://api.anthropic.com"


@dataclass(frozen=True)
class Offer:
    models: list[str]
    error: str = ""


def offered_models(*, provider: str, base_url: str = "", owner_id=None, refresh: bool = False) -> Offer:
    """The model names (without the provider's prefix) the endpoint offers, sorted."""
    if provider not in providers.ENVIRONMENT:
        return Offer([], f"{provider} does not list models")
    where = providers.endpoint(Agent(model=f"{provider}:x", base_url=base_url or "", owner_id=owner_id),
                               provider, owner_id)
    key = "hub:models:" + hashlib.sha256(f"{provider}|{where.base_url}|{where.key}".encode()).hexdigest()
    if not refresh and (cached := cache.get(key)) is not None:
        return Offer(**cached)
    try:
        models = asyncio.run(_fetch(provider, where))
        offer = Offer(sorted(set(models))[:MAX_MODELS])
    except Exception as exc:  # a server that is down, refuses, or answers something else
        log.info("models of %s at %s could not be listed: %s", provider, where.base_url or "its default", exc)
        offer = Offer([], f"the server did not list its models ({providers.readable_error(exc)})")
    cache.set(key, {"models": offer.models, "error": offer.error}, CACHE_SECONDS if offer.models else 30)
    return offer


async def _fetch(provider: str, where: providers.Endpoint) -> list[str]:
    url, headers = _listing_request(provider, where)
    timeout = httpx2.Timeout(10, connect=3)
    if where.user_typed:
        from agents_app.outbound import guarded_client

        client = guarded_client(allow_private=where.allow_private, timeout=timeout)
    else:
        client = httpx2.AsyncClient(timeout=timeout)
    async with client:
        response = await client.get(url, headers=headers)
        response.raise_for_status()
        body = response.json()
    return [str(item["id"]) for item in body.get("data", []) if isinstance(item, dict) and item.get("id")]


def _listing_request(provider: str, where: providers.Endpoint) -> tuple[str, dict]:
    key = where.key or ""
    if provider == "anthropic":
        base = (where.base_url or ANTHROPIC_DEFAULT).rstrip("/").removesuffix("/v1")
        return f"{base}/v1/models?limit=100", {"x-api-key": key, "anthropic-version": "2023-06-01"}
    default = providers.DEFAULT_OLLAMA_URL if provider == "ollama" else providers.ENVIRONMENT["openai"][2]
    base = (where.base_url or default).rstrip("/")
    if provider == "ollama" and not urlsplit(base).path.rstrip("/").endswith("/v1"):
        base += "/v1"
    return f"{base}/models", ({"Authorization": f"Bearer {key}"} if key else {})


def first_offered(model: str, *, owner_id=None, base_url: str = "") -> str:
    """model ("provider:name") when its provider offers it or lists nothing, else the provider's
    first offered model: a configured default the server does not have would fail every turn."""
    provider, _, name = model.partition(":")
    offer = offered_models(provider=provider, base_url=base_url, owner_id=owner_id)
    if not offer.models or name in offer.models:
        return model
    return f"{provider}:{offer.models[0]}"
