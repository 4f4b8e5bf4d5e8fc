"""The small family of errors services raise; entry points turn them into one JSON shape.

Shape: {"error": {"code": "...", "message": "...", "fields": {"field": ["problem", ...]}}}
"""


class HubError(Exception):
    code = "error"
    status = 400

    def __init__(self, message: str, *, fields: dict[str, list[str]] | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}

    def as_dict(self) -> dict:
        return {"error": {"code": self.code, "message": self.message, "fields": self.fields}}


class InvalidInput(HubError):
    code = "invalid"

    @classmethod
    def for_field(cls, field: str, problem: str) -> "InvalidInput":
        return cls(f"{field}: {problem}", fields={field: [problem]})


class NotFound(HubError):
    """Also what another user's object answers: its existence is never revealed."""

    code = "not_found"
    status = 404


class Conflict(HubError):
    code = "conflict"
    status = 409


def show_on_form(form, exc: HubError) -> None:
    """Put a service's error on the form: each problem under its field (a field the form does not
    have, or none, shows above the form)."""
    for name, problems in exc.fields.items():
        for problem in problems:
            form.add_error(name if name in form.fields else None, problem)
    if not exc.fields:
        form.add_error(None, exc.message)


class TooLarge(HubError):
    """A file over its limit, or over what its owner may still store; nothing was kept."""

    code = "too_large"
    status = 413
