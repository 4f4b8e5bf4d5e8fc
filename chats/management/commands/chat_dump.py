from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from chats.models import Chat
from chats.selectors import chat_view


class Command(BaseCommand):
    help = "Print the ChatView of a chat (its latest page, grouped into threads) as text."

    def add_arguments(self, parser):
        parser.add_argument("chat_id")
        parser.add_argument("--before", type=int, default=None, help="Page back from this message id.")

    def handle(self, *args, chat_id, before, **options):
        try:
            chat = Chat.objects.select_related("owner").get(pk=chat_id)
        except (Chat.DoesNotExist, ValueError, ValidationError):
            raise CommandError(f"No chat {chat_id}.") from None
        self.stdout.write(chat_view(chat=chat, before_id=before).dump())
