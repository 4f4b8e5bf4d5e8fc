"""Pages and API calls about a temporary chat run on its image.

Every URL about one chat names it (`chat_id`), or names one of its runs (`run_id`, found in the
runs noted as each temporary chat made them): when that is a temporary chat, the view runs
inside its image (chats.temporary.scope), so it reads and writes the chat with the same
selectors and services as a stored one. Who may see it is still the selectors' question: the
image's chat has its owner, and another user's temporary chat is "not found" like any other.
"""

from chats.temporary import mirror
from chats.temporary.chats import chat_of_run, exists
from chats.temporary.images import ChatGone
from chats.temporary.scope import inside


class TemporaryChatMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        chat_id = view_kwargs.get("chat_id") or chat_of_run(view_kwargs.get("run_id"))
        if not chat_id or not exists(chat_id):
            return None
        # The session's user is the hub's: read it now, before the image stands in for the
        # database (API tokens are read there through hub.own_database).
        request.user.is_authenticated  # noqa: B018
        try:
            with inside(chat_id):
                mirror.bring_up_to_date(chat_id)
                return self._rendered(view_func(request, *view_args, **view_kwargs))
        except ChatGone:
            # Saved meanwhile (it is in the database now), or deleted or expired (not found there).
            return self._rendered(view_func(request, *view_args, **view_kwargs))

    @staticmethod
    def _rendered(response):
        if callable(getattr(response, "render", None)) and not getattr(response, "is_rendered", True):
            response.render()  # a template reads the chat too
        return response
