"""JSON of agents and runs as the API shows them (secrets and worker internals left out)."""

from chats import events


def agent_payload(agent, *, user) -> dict:
    return {
        "id": agent.pk,
        "name": agent.name,
        "avatar": agent.avatar,
        "description": agent.description,
        "model": agent.model,
        "base_url": agent.base_url,
        "system_prompt": agent.system_prompt,
        "settings": agent.settings if isinstance(agent.settings, dict) else {},
        "tools": agent.tools if isinstance(agent.tools, list) else [],
        "reply_policy": agent.reply_policy,
        "recovery_policy": agent.recovery_policy,
        "shared": agent.owner_id is None,
        "editable": agent.owner_id == user.pk,
        "main_chat_id": str(agent.main_chat_id) if agent.main_chat_id else None,
        "created_at": events.iso(agent.created_at),
    }


def run_payload(run) -> dict:
    return {
        "id": str(run.pk),
        "chat_id": str(run.chat_id),
        "thread_id": run.thread_id,
        "agent_id": run.agent_id,
        "kind": run.kind,
        "status": run.status,
        "attempt": run.attempt,
        "trigger_message_id": run.trigger_message_id,
        "reply_message_id": run.reply_message_id,
        "parent_id": str(run.parent_id) if run.parent_id else None,
        "continues_id": str(run.continues_id) if run.continues_id else None,
        "cancel_requested": run.cancel_requested,
        "error": run.error,
        "usage": run.usage if isinstance(run.usage, dict) else {},
        "created_at": events.iso(run.created_at),
        "started_at": events.iso(run.started_at),
        "finished_at": events.iso(run.finished_at),
    }
