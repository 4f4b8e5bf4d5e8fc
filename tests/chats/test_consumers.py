"""The chat websocket through channels' WebsocketCommunicator, on the configured layer (Redis in CI)."""

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from chats import services
from chats.models import Message
from hub.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True)]

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


async def open_socket(user, chat_id, *, origin=ORIGIN, timeout: float = 5):
    from channels.routing import URLRouter

    from chats.routing import websocket_urlpatterns

    # The real stack checks the Origin; the session part is replaced by setting the user directly.
    headers = [origin, (b"host", b"127.0.0.1:8000")]
    communicator = WebsocketCommunicator(application, f"/ws/chats/{chat_id}/", headers=headers)
    if user is not None:
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/chats/{chat_id}/")
        communicator.scope["user"] = user
    connected, code = await communicator.connect(timeout=timeout)
    return communicator, connected, code


@pytest.fixture
def owner_chat(user):
    return services.create_chat(owner=user, title="Live")


async def test_two_tabs_see_a_message_sent_in_one(user, owner_chat):
    tab_a, ok_a, _ = await open_socket(user, owner_chat.pk)
    tab_b, ok_b, _ = await open_socket(user, owner_chat.pk)
    assert ok_a and ok_b
    await tab_a.send_json_to({"type": "message.send", "content": "hello", "client_id": "abc"})
    for tab in (tab_a, tab_b):
        event = await receive_type(tab, "message.created")
        assert event["message"]["content"] == "hello"
        assert event["client_id"] == "abc"
    assert await database_sync_to_async(Message.objects.filter(content="hello").count)() == 1
    await tab_a.disconnect()
    await tab_b.disconnect()


async def receive_type(tab, wanted, timeout=5):
    """The next event of that type, skipping others (directory.updated comes along)."""
    while True:
        event = await tab.receive_json_from(timeout=timeout)
        if event["type"] == wanted:
            return event


async def test_send_into_a_new_thread_then_edit(user, owner_chat):
    tab, ok, _ = await open_socket(user, owner_chat.pk)
    assert ok
    await tab.send_json_to({"type": "message.send", "content": "plan", "new_thread_title": "Trip"})
    thread = (await receive_type(tab, "thread.created"))["thread"]
    created = (await receive_type(tab, "message.created"))["message"]
    assert created["thread_id"] == thread["id"]
    await tab.send_json_to({"type": "message.edit", "message_id": created["id"], "content": "better plan"})
    edited = (await receive_type(tab, "message.edited"))["message"]
    assert edited["id"] == created["id"] and edited["content"] == "better plan" and edited["edited_at"]
    await tab.disconnect()


@pytest.mark.parametrize(
    "frame, field",
    [
        ({"type": "message.send", "content": "", "client_id": "c"}, "content"),
        ({"type": "message.send", "content": "x", "kind": "nope"}, "kind"),
        ({"type": "message.send", "content": "x", "thread_id": 999999}, None),
        ({"type": "message.edit", "message_id": 999999, "content": "x"}, None),
        ({"type": "message.send", "content": "x", "new_thread_title": 1}, "new_thread_title"),
        ({"type": "launch.missiles"}, "type"),
        (["not", "an", "object"], "frame"),
    ],
)
async def test_bad_frames_get_an_error_event_and_write_nothing(user, owner_chat, frame, field):
    tab, ok, _ = await open_socket(user, owner_chat.pk)
    assert ok
    await tab.send_json_to(frame)
    event = await receive_type(tab, "error")
    assert event["error"]["code"] in {"invalid", "not_found"}
    if field:
        assert field in event["error"]["fields"]
    if isinstance(frame, dict) and frame.get("client_id"):
        assert event["client_id"] == frame["client_id"]
    assert await database_sync_to_async(Message.objects.count)() == 0
    await tab.disconnect()


async def test_text_that_is_not_json_gets_an_error(user, owner_chat):
    tab, ok, _ = await open_socket(user, owner_chat.pk)
    assert ok
    await tab.send_to(text_data="{not json")
    event = await receive_type(tab, "error")
    assert "frame" in event["error"]["fields"]
    await tab.disconnect()


async def test_another_users_chat_is_refused(other_user, owner_chat):
    _, connected, code = await open_socket(other_user, owner_chat.pk)
    assert not connected and code == 4404


async def test_anonymous_and_unknown_chats_are_refused(user, owner_chat):
    _, connected, _ = await open_socket(AnonymousUser(), owner_chat.pk)
    assert not connected
    _, connected, _ = await open_socket(user, "00000000-0000-0000-0000-000000000000")
    assert not connected


async def test_a_foreign_origin_is_refused(owner_chat):
    _, connected, _ = await open_socket(None, owner_chat.pk, origin=(b"origin", b"http://evil.example"))
    assert not connected


async def test_deleting_the_chat_tells_open_tabs_and_closes_them(user, owner_chat):
    tab, ok, _ = await open_socket(user, owner_chat.pk)
    assert ok
    await database_sync_to_async(services.delete_chat)(chat=owner_chat)
    event = await receive_type(tab, "chat.deleted")
    assert event["chat_id"] == str(owner_chat.pk)
    output = await tab.receive_output(timeout=5)
    assert output["type"] == "websocket.close" and output["code"] == 4410
    _, connected, _ = await open_socket(user, owner_chat.pk)
    assert not connected


@pytest.mark.needs_redis
async def test_events_cross_processes_on_the_redis_layer(user, owner_chat, settings):
    """A message stored by another process (here: a plain sync call) reaches the socket via Redis."""
    from channels.layers import get_channel_layer

    assert type(get_channel_layer()).__name__ == "RedisChannelLayer"
    tab, ok, _ = await open_socket(user, owner_chat.pk)
    assert ok
    await database_sync_to_async(services.send_message)(chat=owner_chat, content="from a worker")
    event = await receive_type(tab, "message.created")
    assert event["message"]["content"] == "from a worker"
    await tab.disconnect()


async def test_a_socket_opened_mid_stream_gets_the_text_so_far_then_the_tail(user, owner_chat):
    """Subscribing mid-stream: the replay buffer first, then live deltas, trimmed of overlap."""
    from chats import events
    from chats.streams import replay_buffer

    reply = await database_sync_to_async(services.send_message)(
        chat=owner_chat, content="", status="streaming", kind="message"
    )
    replay_buffer().reset(reply.pk, {"text": "Hello wor"})
    tab, ok, _ = await open_socket(user, owner_chat.pk)
    assert ok
    first = await receive_type(tab, "message.delta")
    assert (first["offset"], first["text"]) == (0, "Hello wor")
    group = events.chat_group(owner_chat.pk)
    for offset, text in [(6, "wor"), (6, "world"), (11, "!")]:  # a repeat, an overlap, the tail
        await database_sync_to_async(events.broadcast_now)(
            group, events.message_delta(message_id=reply.pk, run_id="r", offset=offset, text=text)
        )
    second = await receive_type(tab, "message.delta")
    third = await receive_type(tab, "message.delta")
    assert (second["offset"], second["text"]) == (9, "ld")
    assert (third["offset"], third["text"]) == (11, "!")
    replay_buffer().clear(reply.pk)
    await tab.disconnect()


async def until_the_web_process_listens(chat_id):
    """With Redis, a tab's join registers its chat for the web process's deltas after the socket
    is accepted."""
    import asyncio

    import redis
    from django.conf import settings

    from chats.streams import watch_key

    if not settings.REDIS_URL:
        return
    client = redis.Redis.from_url(settings.REDIS_URL)
    for _ in range(250):
        if client.zcard(watch_key(chat_id)):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the web process never registered the chat for its deltas")


async def test_live_deltas_reach_the_tab_and_a_missed_one_is_filled_from_the_buffer(user, owner_chat):
    """The worker's path (replay buffer + delta feed, or the in-memory layer embedded): a delta
    that never arrived is filled from the replay buffer, so the tab sees no hole."""
    from asgiref.sync import sync_to_async

    from chats import events
    from chats.streams import replay_buffer

    reply = await database_sync_to_async(services.send_message)(
        chat=owner_chat, content="", status="streaming", kind="message"
    )
    buffer = replay_buffer()
    buffer.reset(reply.pk, {})
    tab, ok, _ = await open_socket(user, owner_chat.pk)
    assert ok
    await until_the_web_process_listens(owner_chat.pk)

    def stream(offset, text):
        delta = events.message_delta(message_id=reply.pk, run_id="r", offset=offset, text=text)
        buffer.stream_many([(reply.pk, owner_chat.pk, {"text": text}, [delta])])

    await sync_to_async(stream)(0, "Hello")
    first = await receive_type(tab, "message.delta")
    assert (first["offset"], first["text"]) == (0, "Hello")
    await sync_to_async(buffer.append)(reply.pk, {"text": " wor"})  # streamed, but its delta was lost
    await sync_to_async(stream)(9, "ld!")
    filled = await receive_type(tab, "message.delta")
    assert (filled["offset"], filled["text"]) == (5, " world!")

    # The reply's message.created may come after its first deltas: it does not send them again.
    await database_sync_to_async(events.broadcast_now)(events.chat_group(owner_chat.pk),
                                                       events.message_created(reply))
    await receive_type(tab, "message.created")
    await sync_to_async(stream)(12, " Bye")
    tail = await receive_type(tab, "message.delta")
    assert (tail["offset"], tail["text"]) == (12, " Bye")
    buffer.clear(reply.pk)
    await tab.disconnect()


async def test_cancelling_another_chats_run_is_not_found(user, owner_chat):
    tab, ok, _ = await open_socket(user, owner_chat.pk)
    assert ok
    await tab.send_json_to({"type": "run.cancel", "run_id": "00000000-0000-0000-0000-000000000000"})
    event = await receive_type(tab, "error")
    assert event["error"]["code"] == "not_found"
    await tab.disconnect()


@pytest.mark.needs_redis
async def test_a_tab_idle_longer_than_the_layers_blocking_wait_still_gets_events(user, owner_chat):
    # channels-redis waits for a message 5 s at a time; a Redis read timeout no longer than that
    # crashed every idle consumer (close code 1011) before the next event could arrive.
    import asyncio

    tab, ok, _ = await open_socket(user, owner_chat.pk)
    assert ok
    await asyncio.sleep(7)
    await database_sync_to_async(services.send_message)(chat=owner_chat, content="still there?")
    event = await receive_type(tab, "message.created")
    assert event["message"]["content"] == "still there?"
    await tab.disconnect()


@pytest.mark.needs_redis
async def test_tabs_closed_as_they_open_leave_no_consumer_behind(user, owner_chat):
    # Closing a tab cancels its consumer's wait on Redis. On Python 3.11 redis-py sent commands
    # through asyncio.wait_for, which swallows a cancel that lands as the send finishes: the
    # consumer then waited on Redis forever, one leaked task (and connection) per such tab.
    import asyncio

    from channels.layers import get_channel_layer
    from channels.routing import URLRouter

    from chats.routing import websocket_urlpatterns

    for attempt in range(120):
        tab = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/chats/{owner_chat.pk}/")
        tab.scope["user"] = user
        await tab.send_input({"type": "websocket.connect"})
        for _ in range(attempt % 12):
            await asyncio.sleep(0)  # close at a different point of the consumer's start each time
        tab.future.cancel()
        done, _ = await asyncio.wait([tab.future], timeout=3)
        if not done:
            # Close this loop's Redis connections so the leaked consumer ends (channels-redis keeps
            # them per event loop), and the failure is this message rather than a hung teardown.
            await get_channel_layer()._layers[asyncio.get_running_loop()].flush()
            pytest.fail(f"tab {attempt}: its consumer was still running 3 s after being closed")


@pytest.mark.needs_redis
async def test_a_hundred_and_fifty_tabs_closing_at_once_all_leave_their_groups(user, owner_chat):
    # Each closing tab leaves two groups, a Redis command each, all at once. redis-py 8 caps a
    # pool at 100 connections unless told otherwise and fails the command past that: the tabs
    # over the cap stayed in the chat's group for a day, each event still sent to them.
    import asyncio

    from channels.layers import get_channel_layer

    from chats import events

    tabs = [tab for tab, ok, _ in [await open_socket(user, owner_chat.pk) for _ in range(150)] if ok]
    assert len(tabs) == 150
    # A generous wait: the test communicator cancels, silently, a consumer still leaving after
    # its default 1 s, which a busy machine reaches with 150 at once (Daphne gives them 10 s).
    outcomes = await asyncio.gather(*(tab.disconnect(timeout=30) for tab in tabs), return_exceptions=True)
    assert [o for o in outcomes if o is not None] == []

    layer = get_channel_layer()
    key = layer._group_key(events.chat_group(owner_chat.pk))
    async with layer.connection(layer.consistent_hash(key)) as redis:
        assert await redis.zcard(key) == 0


@pytest.mark.needs_postgres
async def test_a_send_held_up_in_one_chat_does_not_hold_up_another_chats(user):
    """Each chat's frames are stored in order on one of a few threads: while one chat's row is
    locked (a long write elsewhere), a message sent in another chat is stored and echoed at once."""
    import threading

    from django.db import connections, transaction

    from chats.consumers import FRAME_THREADS
    from chats.models import Chat

    chats = [await database_sync_to_async(services.create_chat)(owner=user, title=f"Chat {i}") for i in range(8)]
    held = chats[0]
    free = next((chat for chat in chats[1:] if FRAME_THREADS.for_chat(chat.pk) is not FRAME_THREADS.for_chat(held.pk)),
                chats[1])
    locked, release = threading.Event(), threading.Event()

    def hold_the_row():
        with transaction.atomic():
            Chat.objects.select_for_update().get(pk=held.pk)
            locked.set()
            release.wait(10)
        connections.close_all()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    assert locked.wait(5)
    held_tab, ok_held, _ = await open_socket(user, held.pk)
    free_tab, ok_free, _ = await open_socket(user, free.pk)
    assert ok_held and ok_free
    try:
        await held_tab.send_json_to({"type": "message.send", "content": "waits for the lock"})
        await free_tab.send_json_to({"type": "message.send", "content": "goes through"})
        event = await receive_type(free_tab, "message.created", timeout=3)
        assert event["message"]["content"] == "goes through"
    finally:
        release.set()
        holder.join(10)
    event = await receive_type(held_tab, "message.created")
    assert event["message"]["content"] == "waits for the lock"
    await held_tab.disconnect()
    await free_tab.disconnect()
