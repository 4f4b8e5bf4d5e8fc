"""The HTTP server: a ThreadingHTTPServer on 127.0.0.1 and the FakeProvider that scripts it."""

import json
import select
import socket
import threading
import time
from dataclasses import asdict, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from agents_app.fake_provider.formats import FORMATS
from agents_app.fake_provider.script import Answer, ReceivedRequest, as_answer, pending_calls

LOOPBACK = "127.0.0.1"
STALL_SECONDS = 60  # how long a stalled stream is held open at most, waiting for the client to go


class _Dropped(Exception):
    """The scripted connection drop: the handler closes the socket without finishing."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as real providers use
    disable_nagle_algorithm = True  # each delta leaves at once, so benchmarks measure Hub, not TCP
    server: "_Server"

    def log_message(self, format, *args):
        pass  # tests and benchmarks read fake.requests, not an access log

    def do_GET(self):
        path = urlsplit(self.path).path
        if path == "/v1/models":  # OpenAI's and Anthropic's listing (both name each model's id)
            models = [{"id": name, "object": "model", "type": "model", "created": 0, "owned_by": "hub"}
                      for name in self.server.fake.models]
            return self._send_json(200, {"object": "list", "data": models, "has_more": False})
        if path == "/_fake/requests":
            return self._send_json(200, [asdict(r) for r in self.server.fake.requests])
        return self._send_json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    def do_POST(self):
        path = urlsplit(self.path).path
        body = self._read_json()
        if path.startswith("/_fake/"):
            return self._control(path, body)
        fmt = FORMATS.get(path)
        if fmt is None:
            return self._send_json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
        request = ReceivedRequest(api=fmt.api, path=path, headers={k.lower(): v for k, v in self.headers.items()},
                                  body=body if isinstance(body, dict) else {}, connection=tuple(self.client_address))
        answer = self.server.fake._take(request)
        try:
            self._answer(request, answer, fmt)
        except (_Dropped, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _read_json(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def _control(self, path: str, body) -> None:
        fake = self.server.fake
        try:
            if path == "/_fake/script":
                model = body.pop("model", None)  # {"model": ..., "answer": {...}} scripts one model
                fake.script(Answer.from_dict(body.pop("answer", body)), model=model)
            elif path == "/_fake/queue":
                fake.queue(*[Answer.from_dict(a) for a in (body if isinstance(body, list) else [body])])
            elif path == "/_fake/reset":
                fake.reset()
            else:
                return self._send_json(404, {"error": {"message": f"no route {path}"}})
        except (TypeError, ValueError, AttributeError) as exc:
            return self._send_json(400, {"error": {"message": str(exc)}})
        self._send_json(200, {"ok": True})

    def _answer(self, request: ReceivedRequest, answer: Answer, fmt) -> None:
        if answer.delay:
            time.sleep(answer.delay)
        pending = pending_calls(request, answer, fmt.tool_id_prefix)
        answer = replace(answer, reasoning=answer.reasoning.replace("{prompt}", request.prompt))
        text = "" if pending else answer.text.replace("{prompt}", request.prompt)
        refusal = _prefix_refusal(request, answer)
        if not refusal and answer.prefix == "honour" and request.asks_to_continue():
            # The model writes on from the end of its partial answer (a trimmed prefill included).
            text = text.removeprefix(request.assistant_prefix)
        wire = fmt(request, answer, pending, text)
        if refusal:
            return self._send_json(400, wire.error_body(400, refusal))
        status = answer.error_status()
        if status is not None:
            headers = {"retry-after": f"{answer.retry_after:g}"} if answer.retry_after is not None else {}
            return self._send_json(status, wire.error_body(status), headers)
        if not request.stream:
            return self._answer_whole(wire, answer)
        self._stream(wire, answer)

    def _answer_whole(self, wire, answer: Answer) -> None:
        if answer.error == "garbage":
            return self._send_raw(200, b"<html>upstream proxy error</html>", "application/json")
        body = json.dumps(wire.whole()).encode()
        if answer.error == "drop":
            self._start(200, "application/json", {"content-length": str(len(body))})
            self.wfile.write(body[: len(body) // 2])
            self._drop()
        self._send_raw(200, body, "application/json")

    def _stream(self, wire, answer: Answer) -> None:
        self._start(200, "text/event-stream", {"transfer-encoding": "chunked", "cache-control": "no-cache"})
        if answer.error == "garbage":
            self._write_chunk(wire.garbage)
            return self._end_chunks()
        pause = 1.0 / answer.chunks_per_second if answer.chunks_per_second > 0 else 0.0
        for sent, (event, data) in enumerate(wire.events()):
            if answer.error == "drop" and sent > answer.drop_after:
                self._drop()
            if answer.stall_after is not None and sent > answer.stall_after:
                return self._hold_open()
            if pause and sent:
                time.sleep(pause)
            payload = data if isinstance(data, str) else json.dumps(data)
            prefix = f"event: {event}\n" if event else ""
            wire.request.sent_at.append(time.time())
            self._write_chunk(f"{prefix}data: {payload}\n\n".encode())
        self._end_chunks()

    def _hold_open(self) -> None:
        """A stuck model server: nothing more is sent until the client goes away."""
        select.select([self.connection], [], [], STALL_SECONDS)
        self.close_connection = True

    # Low-level writes -------------------------------------------------------------------
    def _start(self, status: int, content_type: str, headers: dict) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _send_raw(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
        self._start(status, content_type, {"content-length": str(len(body)), **(headers or {})})
        self.wfile.write(body)

    def _send_json(self, status: int, data, headers: dict | None = None) -> None:
        self._send_raw(status, json.dumps(data).encode(), "application/json", headers)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _drop(self):
        # Cut the TCP connection mid-body: the client sees an incomplete chunked (or sized) body.
        self.connection.shutdown(socket.SHUT_RDWR)
        raise _Dropped()


def _prefix_refusal(request: ReceivedRequest, answer: Answer) -> str:
    """Why a request ending in the assistant's partial answer is refused ("" if it is not)."""
    prefix = request.assistant_prefix
    if prefix is None:
        return ""
    if answer.prefix == "reject":
        return "This model does not support continuing an assistant message."
    if request.api == "anthropic" and prefix != prefix.rstrip():
        return "messages: final assistant content cannot end with trailing whitespace"
    return ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: "FakeProvider"


class FakeProvider:
    """One fake model server. Answers come from the queue, else the model's script, else the default."""

    def __init__(self, answer: Answer | dict | None = None, *, port: int = 0, api_key: str | None = None,
                 models: list[str] | None = None, **answer_fields):
        self.port = port
        self.models = list(models or ["fake-model"])  # what GET /v1/models lists
        self.api_key = api_key  # when set, any other key gets the 401 answer
        self._default = as_answer(answer, answer_fields)
        self._by_model: dict[str, Answer] = {}
        self._queue: list[Answer] = []
        self._requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle --------------------------------------------------------------------------
    def start(self) -> str:
        """Serve on 127.0.0.1 (only) in a background thread; returns the base URL."""
        if self._server is None:
            self._server = _Server((LOOPBACK, self.port), _Handler)
            self._server.fake = self
            self.port = self._server.server_address[1]
            self._thread = threading.Thread(target=self._server.serve_forever, name=f"fake-model-{self.port}",
                                            daemon=True)
            self._thread.start()
        return self.url

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (the management command)."""
        self.start()
        self._thread.join()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeProvider":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def openai_url(self) -> str:
        """The base URL an OpenAI client wants (it appends /chat/completions)."""
        return f"{self.url}/v1"

    # Scripting --------------------------------------------------------------------------
    def script(self, answer: Answer | dict | None = None, *, model: str | None = None, **fields) -> "FakeProvider":
        """Set the answer to every request (for one model name, or for all) that has nothing queued."""
        scripted = as_answer(answer, fields)
        with self._lock:
            if model is None:
                self._default = scripted
            else:
                self._by_model[model] = scripted
        return self

    def queue(self, *answers: Answer | dict) -> "FakeProvider":
        """Answers for the next requests, one each, in order, before the script applies again."""
        with self._lock:
            self._queue.extend(as_answer(a, {}) for a in answers)
        return self

    def reset(self) -> None:
        with self._lock:
            self._default, self._by_model, self._queue, self._requests = Answer(), {}, [], []

    @property
    def requests(self) -> list[ReceivedRequest]:
        with self._lock:
            return list(self._requests)

    def _take(self, request: ReceivedRequest) -> Answer:
        with self._lock:
            self._requests.append(request)
            if self.api_key is not None and request.api_key != self.api_key:
                return Answer(error=401)
            if self._queue:
                return self._queue.pop(0)
            return self._by_model.get(request.model, self._default)
