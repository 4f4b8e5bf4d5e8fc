"""A small Server-Sent Events reader over httpx, as a program would write one."""

import json
from dataclasses import dataclass


@dataclass
class Event:
    type: str
    data: dict
    id: str | None


def read_events(response, *, stop_after=None):
    """Yield the events of a streaming httpx response; stop_after(event) True ends the reading."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line == "":
            if "data" in fields:
                event = Event(fields.get("event", "message"), json.loads(fields["data"]), fields.get("id"))
                yield event
                if stop_after is not None and stop_after(event):
                    return
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value
