"""What text and JSON a user may send: the one place these rules live.

A text is refused when it holds U+0000 (PostgreSQL stores it in no text or JSON column, and no
user types it) or a lone surrogate (half of a UTF-16 pair: not a character, and no UTF-8 encoding
exists for it). JSON is parsed strictly: NaN, Infinity and -Infinity are not JSON numbers (Python
reads them, PostgreSQL's jsonb and browsers refuse them), and every key and string inside is held
to the text rule. A refusal is an InvalidInput naming the field, e.g. "title": "must not contain
the character U+0000".

Used by every entry point: the HTTP middleware (paths, query strings, forms, page JSON bodies),
the API's JSON parser, the chat page's JSON endpoints and the websockets. wants_json says whether
a request is answered in JSON (an error, an outage) or with a page.
"""

import json
import math
import re

from hub.errors import InvalidInput

_REFUSED_CHARACTER = re.compile("[\x00\ud800-\udfff]")
NUL_PROBLEM = "must not contain the character U+0000"


def text_problem(text: str) -> str | None:
    """Why a text is refused, or None when it is acceptable."""
    found = _REFUSED_CHARACTER.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return NUL_PROBLEM
    return f"must not contain a lone surrogate (U+{ord(found.group()):04X}): it is not a character"


def check_text(field: str, text: str) -> None:
    """Raise InvalidInput for the field when the text holds a refused character."""
    problem = text_problem(text)
    if problem is not None:
        raise InvalidInput.for_field(field, problem)


class NonFiniteNumber:
    """What the parser reads for NaN, Infinity or -Infinity, so the check can name the field."""

    def __init__(self, spelling: str):
        self.spelling = spelling


def check_json(value, *, root: str = "body") -> None:
    """Raise InvalidInput for the first refused text, key or number found in a parsed JSON value.

    The field is the dotted path to it ("settings.temperature", "agents[2]"); the value as a whole
    is named root. A stack, not recursion: the parser follows nesting deeper than the call stack
    left to this function has room for.
    """
    pending = [("", value)]
    while pending:
        path, item = pending.pop()
        _check_scalar(path or root, item)
        if isinstance(item, dict):
            for key, inner in reversed(list(item.items())):
                if isinstance(key, str) and (problem := text_problem(key)) is not None:
                    # The key itself cannot be shown as the field: name its parent.
                    raise InvalidInput.for_field(path or root, f"keys {problem}")
                pending.append((f"{path}.{key}" if path else str(key), inner))
        elif isinstance(item, list):
            pending.extend((f"{path or root}[{index}]", inner) for index, inner in reversed(list(enumerate(item))))


def _check_scalar(field: str, value) -> None:
    if isinstance(value, str):
        check_text(field, value)
    elif isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput.for_field(field, "must be a finite number")
    elif isinstance(value, NonFiniteNumber):
        raise InvalidInput.for_field(field, f"must be a finite number, not {value.spelling}")


def parse_json(text: str | bytes):
    """The JSON value of a text, with NaN and the infinities read as NonFiniteNumber (not checked).

    Raises ValueError (json.JSONDecodeError, UnicodeDecodeError) for text that is not JSON, and
    for arrays or objects nested deeper than the parser can follow.
    """
    try:
        return json.loads(text, parse_constant=NonFiniteNumber)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None


def loads(text: str | bytes):
    """Parse JSON strictly: ValueError when it is not JSON, InvalidInput when it holds a refused
    character (in a key or a string) or a number that is not finite."""
    value = parse_json(text)
    check_json(value)
    return value


API_PREFIX = "/api/"


def is_json(content_type: str | None) -> bool:
    return bool(content_type) and (content_type == "application/json" or content_type.endswith("+json"))


def wants_json(request) -> bool:
    if request.path.startswith(API_PREFIX) or is_json(request.content_type):
        return True
    return request.get_preferred_type(["text/html", "application/json"]) == "application/json"
