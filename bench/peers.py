"""Peers: Hub and Open WebUI side by side, against one fake model server, through a browser's path.

`python -m bench peers` runs only when named (a bare `python -m bench` leaves it out). Open WebUI
is installed into a virtual environment of its own, `var/peers/open-webui/` under the repository
(or BENCH_PEERS_VENV), only when BENCH_PEERS_INSTALL=1 says so: `pip install open-webui==VERSION`,
about 7.4 GB and a few minutes, pip's output on stderr. Without that venv and without the knob the
benchmark reports {"skipped": ...} and exits 0; with CI=true it never installs.

What runs, all on 127.0.0.1:

* One fake model server (agents_app.fake_provider, real HTTP, OpenAI-compatible) in a process of
  its own, scripted to answer REPLY, a hundred words in 8-character pieces at 20 a second (5 s).
  It stamps each piece with the moment it is written to the socket (`sent_at`); both systems talk
  to it over HTTP, so both pay the same cost for the model's stream.
* Hub as `make run` starts it: `manage.py runhub --migrate --ensure-admin` (SQLite, the in-memory
  channel layer, the in-process worker), with OPENAI_BASE_URL at the fake server. Each
  conversation is a user of its own whose agent is `openai:fake-model` (the real OpenAI client,
  not the in-process scripted model).
* Open WebUI VERSION under uvicorn (`open_webui.main:app`, FROM_INIT_PY=true, as its `serve`
  command runs it, one process), on a DATA_DIR of its own (SQLite), offline: OFFLINE_MODE,
  HF_HUB_OFFLINE, no Ollama, OPENAI_API_BASE_URL at the fake server, the title, tag, follow-up,
  autocomplete and query generations off (each would send the model more requests of its own;
  Hub has none), BYPASS_MODEL_ACCESS_CONTROL so plain users may use the connection's model.
  The first account is made through its sign-up API (the admin); each conversation is a user of
  its own made by the admin through /api/v1/auths/add, as in Hub, because Open WebUI sends a
  user's events to all of that user's sockets.

The path a browser uses:

* Hub: the chat's websocket (/ws/chats/<id>/), a `message.send` frame; the reply arrives as
  `message.delta` frames and ends with `message.settled` (as bench/embedded.py does).
* Open WebUI 0.12: its page keeps a socket.io connection (/ws/socket.io, websocket transport,
  the token in the CONNECT packet, then `user-join`), and sends a message with one
  POST /api/chat/completions carrying the chat id, the socket's id (`session_id`), the new user
  message, the reply's id and the model's messages; the server answers at once with a task id,
  stores the turn, and streams the reply to the socket as `events`
  (`response:completion` / `response.output_text.delta`), ending with a `chat:completion` whose
  `done` is true. This client speaks that much socket.io (engine.io v4 over the same websockets
  library the Hub client uses). The page's own chat was made before the round, through
  /api/v1/chats/new, as the page makes one.

Figures, for both, in interleaved rounds (Hub, Open WebUI, Hub, ...), with every figure's ratio
Hub / Open WebUI:

* relay latency: each model piece from the fake server's write (`sent_at`) to the moment the
  client holds all of its characters, p50 / p99 over all pieces, per N (one machine, one clock);
* the first word: from each user's send to the first piece of the reply in their tab, p50 / max;
* streams lost: replies that did not arrive whole and settled, with the reasons seen (HTTP
  errors, error events, time-outs);
* CPU seconds per reply of the server's processes (all threads, and children, from /proc);
* opening a chat of CHATS chats of 20 messages, p50 / p95: Hub GET /chats/<id>/ (the page, which
  carries the messages in its HTML); Open WebUI GET /api/v1/chats/<id> (what its page fetches to
  show a chat; the page's script is cached). Both data sets hold the same text, made here:
  Hub's through its services in this process before it starts (as bench/pages.py), Open WebUI's
  through its own import endpoint (/api/v1/chats/import, a hundred chats a request);
* message search, p50 / p95: Hub GET /api/v1/search/messages/?q= (its message search; the page's
  sidebar searches titles only), Open WebUI GET /api/v1/chats/search?text= (its page's search,
  titles and messages);
* idle memory: the RSS of each server's processes once started and idle 10 s, before the first
  request of the benchmark.

Knobs: BENCH_PEERS_SIZES (1,10,50), BENCH_PEERS_ROUNDS (3), BENCH_PEERS_INSTALL (unset),
BENCH_PEERS_VENV (var/peers/open-webui), BENCH_PEERS_CHATS (2000), BENCH_PEERS_SAMPLES (100
opens each), BENCH_PEERS_SEARCHES (20 each).
"""

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench import cpu, pages, streaming
from bench.live_hub import BIN, ROOT, free_port, log

VERSION = "0.12.4"
VENV = Path(os.environ.get("BENCH_PEERS_VENV") or ROOT / "var" / "peers" / "open-webui")
INSTALL = os.environ.get("BENCH_PEERS_INSTALL", "") == "1"
SIZES = tuple(int(n) for n in os.environ.get("BENCH_PEERS_SIZES", "1,10,50").split(","))
ROUNDS = int(os.environ.get("BENCH_PEERS_ROUNDS", "3"))
CHATS = int(os.environ.get("BENCH_PEERS_CHATS", "2000"))
MESSAGES = 20
OPEN_SAMPLES = int(os.environ.get("BENCH_PEERS_SAMPLES", "100"))
OPEN_WARMUP = 10
SEARCH_SAMPLES = int(os.environ.get("BENCH_PEERS_SEARCHES", "20"))
SEARCH_WARMUP = 2
SEARCH_WORDS = ("caching", "customer", "reproduce", "report", "friday", "build")
REPLY = " ".join(f"word{i:03d}" for i in range(100))  # 799 characters
CHUNK = 8  # a word and its space: 100 pieces
RATE = 20  # pieces a second
MODEL = "fake-model"
IDLE_SECONDS = 10
START_TIMEOUT_SECONDS = 300
ROUND_TIMEOUT_SECONDS = 60
CONNECT_TIMEOUT_SECONDS = 30
SEED = 20261205
PASSWORD = "bench-only-Passw0rd!"


# --- Figures (pure) ---------------------------------------------------------------------------

def percentile(values, p: float):
    return streaming.percentile(values, p)


def piece_latencies(arrivals: list[tuple[float, int]], sent_at: list[float], *, chunk: int = CHUNK,
                    length: int = len(REPLY)) -> list[float]:
    """Seconds from each piece's send to the arrival that completed it in the client.

    arrivals: (receive time, characters of the reply held after it), in order; sent_at: the
    model's send time of piece k, which holds characters [k*chunk, (k+1)*chunk).
    """
    latencies, piece = [], 0
    for received, held in arrivals:
        while piece < len(sent_at) and min((piece + 1) * chunk, length) <= held:
            latencies.append(received - sent_at[piece])
            piece += 1
    return latencies


def ratio(hub, peer):
    if not isinstance(hub, (int, float)) or not isinstance(peer, (int, float)) or not peer:
        return None
    return round(hub / peer, 2)


def with_ratios(hub: dict, peer: dict) -> dict:
    """{figure: {"hub": .., "open_webui": .., "ratio": hub / open_webui}} for the figures both have."""
    return {key: {"hub": hub.get(key), "open_webui": peer.get(key), "ratio": ratio(hub.get(key), peer.get(key))}
            for key in dict.fromkeys([*hub, *peer])}


def _cell(value, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        value = f"{value:,.3g}" if abs(value) < 10 else f"{value:,.1f}"
    return f"{value}{unit}"


def table(figures: dict) -> str:
    """The side-by-side as text: one row per figure, Hub, Open WebUI and the ratio."""
    rows = [("figure", "Hub", "Open WebUI", "Hub / OWUI")]
    for name, pair in figures.items():
        if isinstance(pair, dict) and "hub" in pair:
            rows.append((name, _cell(pair["hub"]), _cell(pair["open_webui"]), _cell(pair["ratio"])))
        else:
            rows.append((name, str(pair), "", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def stream_summary(watches: list[dict], sent_at: dict[str, list[float]], *, cpu_seconds: float) -> dict:
    """One round's figures from its watches and the model's send times (keyed by prompt)."""
    latencies = []
    for watch in watches:
        latencies += piece_latencies(watch["arrivals"], sent_at.get(watch["prompt"], []))
    waits = [w["first"] - w["sent"] for w in watches if w["first"] and w["sent"]]
    lost = [w for w in watches if not (w["done"] and w["text"] == REPLY and not w["error"])]
    reasons = {}
    for watch in lost:
        reason = watch["error"] or ("incomplete" if watch["done"] else "no end within the round")
        reasons[reason[:160]] = reasons.get(reason[:160], 0) + 1
    return {
        "relay_p50_ms": streaming.ms(percentile(latencies, 50)),
        "relay_p99_ms": streaming.ms(percentile(latencies, 99)),
        "relay_pieces": len(latencies),
        "first_word_p50_s": round(percentile(waits, 50), 3) if waits else None,
        "first_word_max_s": round(max(waits), 3) if waits else None,
        "lost": len(lost),
        "lost_why": reasons,
        "cpu_s_per_reply": round(cpu_seconds / len(watches), 3),
    }


def rounds_summary(rounds: list[dict]) -> dict:
    """Medians over rounds, and each round's lost streams and relay p99."""
    result = {}
    for key in ("relay_p50_ms", "relay_p99_ms", "first_word_p50_s", "first_word_max_s", "cpu_s_per_reply"):
        values = [r[key] for r in rounds if r[key] is not None]
        result[key] = round(statistics.median(values), 3) if values else None
    result["lost"] = sum(r["lost"] for r in rounds)
    result["lost_each_round"] = [r["lost"] for r in rounds]
    result["relay_p99_ms_each_round"] = [r["relay_p99_ms"] for r in rounds]
    result["first_word_max_s_each_round"] = [r["first_word_max_s"] for r in rounds]
    why = {}
    for r in rounds:
        for reason, count in r["lost_why"].items():
            why[reason] = why.get(reason, 0) + count
    result["lost_why"] = why
    return result


def timing_summary(durations: list[float]) -> dict:
    return {"p50_ms": round(percentile(durations, 50), 1), "p95_ms": round(percentile(durations, 95), 1),
            "samples": len(durations)}


# --- /proc: CPU and memory of a process and its descendants ----------------------------------------

def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def tree_cpu_seconds(root: int) -> float:
    """User and system CPU of the process, its live descendants, and the children they reaped."""
    ticks = 0
    for pid in process_tree(root):
        fields = _stat(pid)
        if fields:
            ticks += sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_rss_mb(root: int) -> float:
    total_kb = 0
    for pid in process_tree(root):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
    return round(total_kb / 1024, 1)


# --- Open WebUI's venv ----------------------------------------------------------------------------

def installed_version() -> str | None:
    python = VENV / "bin" / "python"
    if not python.exists():
        return None
    result = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('open-webui'))"],
                            capture_output=True, text=True, timeout=60)
    return result.stdout.strip() if result.returncode == 0 else None


def install() -> None:
    """A venv of its own and Open WebUI from the package registry; pip's progress on stderr."""
    started = time.monotonic()
    log(f"installing open-webui=={VERSION} into {VENV} (about 7.4 GB; a few minutes)")
    VENV.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=600)
    subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                    f"open-webui=={VERSION}"], check=True, stdout=sys.stderr, timeout=3600)
    log(f"installed in {time.monotonic() - started:.0f} s")


def ensure_open_webui() -> tuple[str | None, str | None]:
    """(installed version, None) or (None, why it is skipped)."""
    version = installed_version()
    if version:
        return version, None
    hint = f"run with BENCH_PEERS_INSTALL=1 to install open-webui=={VERSION} (about 7.4 GB) into {VENV}"
    if not INSTALL:
        return None, f"Open WebUI is not installed; {hint}"
    if os.environ.get("CI", "").lower() in ("1", "true"):
        return None, "Open WebUI is never installed in CI"
    install()
    return installed_version(), None


# --- The fake model server, in a process of its own -------------------------------------------------

SERVE_MODEL = """
import sys
from agents_app.fake_provider import Answer, FakeProvider
FakeProvider(Answer.from_dict({}), port=int(sys.argv[1])).serve_forever()
"""


class ModelServer:
    def __init__(self, log_path: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.openai_url = f"{self.url}/v1"
        self.output = open(log_path, "wb")
        self.process = subprocess.Popen([str(BIN / "python"), "-c", SERVE_MODEL, str(self.port)], cwd=ROOT,
                                        stdout=self.output, stderr=subprocess.STDOUT)

    def wait(self) -> None:
        import httpx

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("the fake model server exited")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/v1/models", timeout=2).status_code == 200:
                    self.script()
                    return
            time.sleep(0.1)
        raise RuntimeError("the fake model server did not answer in time")

    def script(self) -> None:
        import httpx

        answer = {"text": REPLY, "chunk_size": CHUNK, "chunks_per_second": RATE}
        httpx.post(f"{self.url}/_fake/script", json=answer, timeout=10).raise_for_status()

    def take_sent_at(self) -> dict[str, list[float]]:
        """Each request's piece send times by its prompt (the last user message); then a fresh log."""
        import httpx

        requests = httpx.get(f"{self.url}/_fake/requests", timeout=30).json()
        httpx.post(f"{self.url}/_fake/reset", timeout=10).raise_for_status()
        self.script()
        sent = {}
        for request in requests:
            messages = [m for m in request["body"].get("messages", []) if m.get("role") == "user"]
            content = messages[-1].get("content") if messages else ""
            if isinstance(content, list):
                content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
            for token in str(content).split():
                if token.startswith("peer-"):
                    sent[token] = request["sent_at"][1:]  # event 0 opens the message
        return sent

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.output.close()


def prompt(stream: int, round_id: str) -> str:
    """The user's message; its token names the stream and round, so the model's send times match."""
    return f"peer-{round_id}-s{stream:03d} stream, please"


def token_of(text: str) -> str:
    return text.split()[0]


# --- The chats both systems hold -------------------------------------------------------------------

def chat_contents(count: int, messages: int = MESSAGES):
    """(title, [message texts]) for each chat, the user's and the agent's by turns; the same for both."""
    rng = random.Random(SEED)
    words = pages.WORDS
    for number in range(count):
        title = f"Chat {number}: {rng.choice(words)}"
        texts = [rng.choice(words)]
        texts += [" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(1, messages)]
        yield title, texts


# --- Hub -------------------------------------------------------------------------------------------

def hub_env(data_dir: Path, port: int, model: "ModelServer") -> dict:
    env = pages.hub_env(data_dir, port)
    env.update(OPENAI_BASE_URL=model.openai_url, OPENAI_API_KEY="sk-bench-peers", ALLOWED_HOSTS="127.0.0.1")
    return env


def hub_fill(env: dict, conversations: int) -> dict:
    """Migrate and fill the hub's database from this process, through its services."""
    pages.migrate_in_this_process(env)
    from django.contrib.auth import get_user_model
    from django.db import connections, transaction

    from agents_app.services import create_agent
    from bench.live_hub import session_cookie
    from chats import services

    started = time.monotonic()
    with transaction.atomic():
        user = get_user_model().objects.create_user("bench", password="bench-only")
        helper = create_agent(owner=user, name="Helper", model="builtin:librarian", reply_policy="never")
        chat_ids = []
        for title, texts in chat_contents(CHATS):
            chat = services.create_chat(owner=user, title=title, agents=[helper])
            first = services.send_message(chat=chat, content=texts[0], new_thread_title="First thread")
            for index, text in enumerate(texts[1:], start=1):
                services.send_message(chat=chat, content=text, thread=first.thread,
                                      sender_agent=helper if index % 2 else None)
            chat_ids.append(str(chat.pk))
        streams = []
        for index in range(conversations):
            member = get_user_model().objects.create_user(f"peer{index:03d}", password=None)
            agent = create_agent(owner=member, name="Streamer", model=f"openai:{MODEL}")
            streams.append({"chat_id": str(agent.main_chat_id), "cookie": session_cookie(member)})
    cookie = session_cookie(user)
    connections.close_all()  # the hub's process takes the file from here
    log(f"hub: {CHATS:,} chats of {MESSAGES} messages and {conversations} conversations stored "
        f"in {time.monotonic() - started:.0f} s")
    return {"cookie": cookie, "chat_ids": chat_ids, "streams": streams}


def new_watch(prompt_text: str) -> dict:
    return {"prompt": token_of(prompt_text), "sent": None, "first": None, "text": "", "arrivals": [],
            "done": False, "error": None}


def note_text(watch: dict, text: str, received: float) -> None:
    watch["text"] = text
    watch["arrivals"].append((received, len(text)))
    watch["first"] = watch["first"] or received


async def hub_watch(socket, watch: dict, deadline: float) -> None:
    from websockets.exceptions import ConnectionClosed

    while not watch["done"]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        try:
            raw = await asyncio.wait_for(socket.recv(), remaining)
        except TimeoutError:
            return
        except ConnectionClosed as exc:
            watch["error"] = watch["error"] or f"socket closed: {exc}"[:160]
            return
        received = time.time()
        event = json.loads(raw)
        kind = event.get("type")
        if kind == "message.delta" and event.get("part") == "text":
            if event["offset"] != len(watch["text"]):
                watch["error"] = watch["error"] or "a gap in the deltas"
            note_text(watch, watch["text"][: event["offset"]] + event["text"], received)
        elif kind == "message.settled" and event["message"]["sender"]["type"] == "agent":
            message = event["message"]
            watch["done"] = True
            if message.get("status") not in (None, "final"):
                watch["error"] = f"settled as {message.get('status')}: {str(message.get('content'))[:100]}"
            elif message.get("content") != REPLY:
                watch["error"] = "settled with other text"
        elif kind == "error":
            watch["error"] = f"error frame: {json.dumps(event)[:120]}"


async def hub_round(port: int, streams: list[dict], round_id: str) -> list[dict]:
    sockets = await streaming.open_sockets(port, streams)
    try:
        deadline = time.monotonic() + ROUND_TIMEOUT_SECONDS
        watches = [new_watch(prompt(index, round_id)) for index in range(len(streams))]
        watchers = [asyncio.create_task(hub_watch(socket, watch, deadline))
                    for socket, watch in zip(sockets, watches, strict=True)]
        for index, socket in enumerate(sockets):
            watches[index]["sent"] = time.time()
            await socket.send(json.dumps({"type": "message.send", "content": prompt(index, round_id)}))
        await asyncio.gather(*watchers)
        return watches
    finally:
        await asyncio.gather(*(socket.close() for socket in sockets), return_exceptions=True)


# --- Open WebUI ------------------------------------------------------------------------------------

def open_webui_env(data_dir: Path, model: "ModelServer") -> dict:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env.update({
        "FROM_INIT_PY": "true",  # as `open-webui serve` sets it before uvicorn imports the app
        "DATA_DIR": str(data_dir),
        "WEBUI_SECRET_KEY": "bench-only-not-a-secret-" + "x" * 32,
        "WEBUI_AUTH": "true",
        "ENABLE_SIGNUP": "true",
        "DEFAULT_USER_ROLE": "user",
        "OFFLINE_MODE": "true",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "RAG_EMBEDDING_MODEL_AUTO_UPDATE": "false",
        "RAG_RERANKING_MODEL_AUTO_UPDATE": "false",
        "WHISPER_MODEL_AUTO_UPDATE": "false",
        "ENABLE_VERSION_UPDATE_CHECK": "false",
        "ENABLE_OLLAMA_API": "false",
        "ENABLE_OPENAI_API": "true",
        "OPENAI_API_BASE_URL": model.openai_url,
        "OPENAI_API_KEY": "sk-bench-peers",
        "ENABLE_TITLE_GENERATION": "false",
        "ENABLE_TAGS_GENERATION": "false",
        "ENABLE_FOLLOW_UP_GENERATION": "false",
        "ENABLE_AUTOCOMPLETE_GENERATION": "false",
        "ENABLE_RETRIEVAL_QUERY_GENERATION": "false",
        "ENABLE_SEARCH_QUERY_GENERATION": "false",
        "ENABLE_IMAGE_PROMPT_GENERATION": "false",
        "ENABLE_EVALUATION_ARENA_MODELS": "false",
        "BYPASS_MODEL_ACCESS_CONTROL": "true",
        "SCARF_NO_ANALYTICS": "true",
        "DO_NOT_TRACK": "true",
        "ANONYMIZED_TELEMETRY": "false",
        "GLOBAL_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    })
    return env


@contextlib.contextmanager
def running_open_webui(workdir: Path, model: "ModelServer"):
    """uvicorn open_webui.main:app on 127.0.0.1:<free port>, in a session of its own; stopped on exit."""
    port = free_port()
    env = open_webui_env(workdir / "open-webui-data", model)
    (workdir / "open-webui-data").mkdir()
    with open(workdir / "open-webui.log", "ab") as output:
        process = subprocess.Popen([str(VENV / "bin" / "python"), "-m", "uvicorn", "open_webui.main:app",
                                    "--host", "127.0.0.1", "--port", str(port), "--forwarded-allow-ips", "*"],
                                   cwd=workdir, env=env, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            yield process, port
        finally:
            pages.stop(process)


def wait_for_open_webui(process: subprocess.Popen, port: int, log_path: Path) -> float:
    import httpx

    started = time.monotonic()
    while time.monotonic() - started < START_TIMEOUT_SECONDS:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"Open WebUI exited with status {process.returncode}:\n{tail}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return time.monotonic() - started
        time.sleep(0.5)
    raise RuntimeError(f"Open WebUI did not answer /health within {START_TIMEOUT_SECONDS} s")


def history(texts: list[str], model: str = MODEL) -> dict:
    """A chat as Open WebUI's page stores it: the message tree, the current message and a list."""
    messages, parent, now = {}, None, int(time.time())
    for index, text in enumerate(texts):
        message_id = str(uuid.uuid4())
        role = "assistant" if index % 2 else "user"
        messages[message_id] = {"id": message_id, "parentId": parent, "childrenIds": [], "role": role,
                                "content": text, "timestamp": now, **({"model": model} if role == "assistant"
                                                                      else {"models": [model]}),
                                **({"done": True} if role == "assistant" else {})}
        if parent:
            messages[parent]["childrenIds"].append(message_id)
        parent = message_id
    return {"messages": messages, "currentId": parent}


def open_webui_chat(title: str, texts: list[str]) -> dict:
    tree = history(texts)
    listed, current = [], tree["currentId"]
    while current:
        listed.insert(0, tree["messages"][current])
        current = tree["messages"][current]["parentId"]
    return {"title": title, "models": [MODEL], "history": tree, "messages": listed, "params": {}, "files": [],
            "tags": [], "timestamp": int(time.time() * 1000)}


def open_webui_fill(base: str, conversations: int) -> dict:
    """The admin (sign-up), the 2,000 chats (import), and a user and an empty chat per conversation."""
    import httpx

    started = time.monotonic()
    with httpx.Client(base_url=base, timeout=120) as client:
        response = client.post("/api/v1/auths/signup", json={"name": "Bench", "email": "bench@example.com",
                                                               "password": PASSWORD})
        response.raise_for_status()
        admin = response.json()["token"]
        headers = {"Authorization": f"Bearer {admin}"}
        models = client.get("/api/models", headers=headers).json()["data"]
        model_item = next((m for m in models if m["id"] == MODEL), None)
        if model_item is None:
            raise RuntimeError(f"Open WebUI does not list {MODEL}: {[m['id'] for m in models]}")
        chat_ids, batch = [], []
        contents = list(chat_contents(CHATS))
        for number, (title, texts) in enumerate(contents, start=1):
            batch.append({"chat": open_webui_chat(title, texts)})
            if len(batch) == 100 or number == len(contents):
                response = client.post("/api/v1/chats/import", json={"chats": batch}, headers=headers)
                response.raise_for_status()
                chat_ids += [chat["id"] for chat in response.json()]
                batch = []
        streams = []
        for index in range(conversations):
            response = client.post("/api/v1/auths/add", headers=headers, json={
                "name": f"Peer {index}", "email": f"peer{index:03d}@example.com", "password": PASSWORD,
                "role": "user"})
            response.raise_for_status()
            token = response.json()["token"]
            response = client.post("/api/v1/chats/new", headers={"Authorization": f"Bearer {token}"},
                                   json={"chat": open_webui_chat("New Chat", [])})
            response.raise_for_status()
            streams.append({"token": token, "chat_id": response.json()["id"], "messages": [], "parent": None})
    log(f"open webui: {len(chat_ids):,} chats imported and {conversations} users made "
        f"in {time.monotonic() - started:.0f} s")
    return {"token": admin, "chat_ids": chat_ids, "streams": streams, "model_item": model_item}


class SocketIO:
    """As much of a socket.io v4 client as Open WebUI's page needs: engine.io over a websocket."""

    def __init__(self, socket, sid: str):
        self.socket, self.sid = socket, sid

    @classmethod
    async def connect(cls, port: int, token: str) -> "SocketIO":
        return await asyncio.wait_for(cls._connect(port, token), CONNECT_TIMEOUT_SECONDS)

    @classmethod
    async def _connect(cls, port: int, token: str) -> "SocketIO":
        from websockets.asyncio.client import connect

        socket = await connect(f"ws://127.0.0.1:{port}/ws/socket.io/?EIO=4&transport=websocket",
                               origin=f"http://127.0.0.1:{port}", open_timeout=CONNECT_TIMEOUT_SECONDS,
                               max_queue=None)
        opening = await socket.recv()
        if not opening.startswith("0"):
            raise RuntimeError(f"not an engine.io opening: {opening[:80]}")
        await socket.send("40" + json.dumps({"token": token}))
        while True:
            frame = await socket.recv()
            if frame == "2":
                await socket.send("3")
            elif frame.startswith("40"):
                sid = json.loads(frame[2:])["sid"]
                break
            elif frame.startswith(("41", "44")):
                raise RuntimeError(f"socket.io refused the connection: {frame[:200]}")
        await socket.send("42" + json.dumps(["user-join", {"auth": {"token": token}}]))
        return cls(socket, sid)

    async def next_event(self, deadline: float):
        """(event name, data, receive time) by the deadline (time.monotonic()), else TimeoutError;
        answers the server's pings on the way."""
        while True:
            frame = await asyncio.wait_for(self.socket.recv(), max(0.0, deadline - time.monotonic()))
            received = time.time()
            if frame == "2":
                await self.socket.send("3")
            elif frame.startswith("41"):
                raise ConnectionError("the server closed the socket.io connection")
            elif frame.startswith("42"):
                name, *args = json.loads(frame[2:])
                return name, (args[0] if args else None), received

    async def close(self) -> None:
        await self.socket.close()


def output_text(output) -> str:
    """The text of a reply's output items (Open WebUI 0.12 stores a reply as Responses-style output)."""
    parts = []
    for item in output or []:
        for part in item.get("content") or [] if isinstance(item, dict) else []:
            if isinstance(part, dict) and part.get("type") == "output_text":
                parts.append(part.get("text", ""))
    return "".join(parts)


async def open_webui_watch(socket: SocketIO, watch: dict, message_id: str, deadline: float) -> None:
    from websockets.exceptions import ConnectionClosed

    while not watch["done"]:
        try:
            name, data, received = await socket.next_event(deadline)
        except TimeoutError:
            return
        except (ConnectionClosed, ConnectionError) as exc:
            watch["error"] = watch["error"] or f"socket closed: {exc}"[:160]
            return
        if name != "events" or not isinstance(data, dict) or data.get("message_id") != message_id:
            continue
        event = data.get("data") or {}
        kind, body = event.get("type"), event.get("data") or {}
        if kind == "response:completion" and body.get("type") == "response.output_text.delta":
            note_text(watch, watch["text"] + body.get("delta", ""), received)
        elif kind == "chat:completion":
            if body.get("error"):
                watch["error"] = f"error event: {json.dumps(body['error'])[:140]}"
            if body.get("done"):
                watch["done"] = True
                final = output_text(body.get("output"))
                if final and final != watch["text"]:
                    watch["error"] = watch["error"] or "the final output differs from the streamed text"
        elif kind == "chat:message:error":
            watch["error"] = f"error event: {json.dumps(body.get('error'))[:140]}"
            watch["done"] = True


async def open_webui_send(client, stream: dict, sid: str, text: str, message_id: str, model_item: dict,
                          watch: dict) -> None:
    """What the page posts for a message in an existing chat; the reply comes over the socket."""
    user_message = {"id": str(uuid.uuid4()), "parentId": stream["parent"], "childrenIds": [], "role": "user",
                    "content": text, "timestamp": int(time.time()), "models": [MODEL]}
    body = {
        "stream": True, "model": MODEL,
        "messages": [*stream["messages"], {"role": "user", "content": text}],
        "params": {"model_controls": {}}, "tool_ids": [], "tool_servers": [], "features": {}, "variables": {},
        "model_item": model_item, "session_id": sid, "chat_id": stream["chat_id"], "id": message_id,
        "parent_id": stream["parent"], "user_message": user_message,
        "background_tasks": {"follow_up_generation": False},
    }
    watch["sent"] = time.time()
    try:
        response = await client.post("/api/chat/completions", json=body,
                                     headers={"Authorization": f"Bearer {stream['token']}"})
    except Exception as exc:  # the stream is lost; say why
        watch["error"], watch["done"] = f"POST failed: {type(exc).__name__}: {exc}"[:160], True
        return
    if response.status_code != 200:
        watch["error"], watch["done"] = f"HTTP {response.status_code}: {response.text[:120]}", True
        return
    answer = response.json()
    if isinstance(answer, dict) and answer.get("error"):
        watch["error"], watch["done"] = f"answer: {json.dumps(answer['error'])[:140]}", True
    stream["messages"] += [{"role": "user", "content": text}, {"role": "assistant", "content": REPLY}]
    stream["parent"] = message_id


async def open_webui_round(port: int, streams: list[dict], clients: list, model_item: dict,
                           round_id: str) -> list[dict]:
    sockets = []
    for start in range(0, len(streams), streaming.CONNECT_BATCH):
        batch = streams[start:start + streaming.CONNECT_BATCH]
        sockets += await asyncio.gather(*(SocketIO.connect(port, stream["token"]) for stream in batch))
    try:
        deadline = time.monotonic() + ROUND_TIMEOUT_SECONDS
        watches = [new_watch(prompt(index, round_id)) for index in range(len(streams))]
        message_ids = [str(uuid.uuid4()) for _ in streams]
        watchers = [asyncio.create_task(open_webui_watch(socket, watch, message_id, deadline))
                    for socket, watch, message_id in zip(sockets, watches, message_ids, strict=True)]
        sends = [asyncio.create_task(open_webui_send(clients[index], stream, sockets[index].sid,
                                                     prompt(index, round_id), message_ids[index], model_item,
                                                     watches[index]))
                 for index, stream in enumerate(streams)]
        await asyncio.gather(*sends)
        for watch, watcher in zip(watches, watchers, strict=True):
            if watch["done"]:  # its send failed: nothing more will come
                watcher.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        return watches
    finally:
        await asyncio.gather(*(socket.close() for socket in sockets), return_exceptions=True)


# --- Rounds, interleaved ---------------------------------------------------------------------------

def measure(pid: int, model: ModelServer, run_round) -> dict:
    """One round of `size` conversations at once on one system."""
    round_id = uuid.uuid4().hex[:8]
    before = tree_cpu_seconds(pid)
    with streaming.no_client_collections():
        watches = run_round(round_id)
    time.sleep(0.5)  # the last replies' settling
    used = tree_cpu_seconds(pid) - before
    sent_at = model.take_sent_at()
    return stream_summary(watches, sent_at, cpu_seconds=used)


def timed_requests(hub_client, peer_client, hub_path, peer_path, *, samples: int, warmup: int, check_hub=None,
                   check_peer=None) -> tuple[list[float], list[float]]:
    """Alternating requests (Hub first in even turns, Open WebUI first in odd ones); ms to the last byte."""
    durations = ([], [])
    for turn in range(warmup + samples):
        order = ((0, hub_client, hub_path, check_hub), (1, peer_client, peer_path, check_peer))
        for side, client, path, check in (order if turn % 2 == 0 else order[::-1]):
            url = path(turn)
            started = time.perf_counter()
            response = client.get(url)
            response.read()
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200 or (check and not check(response)):
                raise RuntimeError(f"GET {url} answered {response.status_code}: {response.text[:200]}")
            if turn >= warmup:
                durations[side].append(elapsed)
    return durations


# --- The run ---------------------------------------------------------------------------------------

def run() -> dict:
    version, skipped = ensure_open_webui()
    if skipped:
        log(skipped)
        return {"skipped": skipped}
    began = time.monotonic()
    speed = cpu.python_speed_ms()
    log(f"a million Python additions take {speed} ms on this machine now; Open WebUI {version}")
    conversations = max(SIZES)
    workdir = Path(tempfile.mkdtemp(prefix="hub-bench-peers-"))
    model = ModelServer(workdir / "model.log")
    failed = True
    try:
        model.wait()
        with running_open_webui(workdir, model) as (peer_process, peer_port):
            hub_port = free_port()
            env = hub_env(workdir / "hub-data", hub_port, model)
            hub_data = hub_fill(env, conversations)  # while Open WebUI starts
            started_in = wait_for_open_webui(peer_process, peer_port, workdir / "open-webui.log")
            log(f"open webui serving on port {peer_port} ({started_in:.0f} s after its start)")
            with pages.running_hub(env, workdir / "runhub.log") as hub_process:
                log(f"hub serving on port {hub_port}; both idle for {IDLE_SECONDS} s")
                time.sleep(IDLE_SECONDS)
                memory = {"hub": tree_rss_mb(hub_process.pid), "open_webui": tree_rss_mb(peer_process.pid)}
                log(f"idle memory: hub {memory['hub']} MB, open webui {memory['open_webui']} MB")
                peer_data = open_webui_fill(f"http://127.0.0.1:{peer_port}", conversations)
                figures = compare(hub_process.pid, hub_port, hub_data, peer_process.pid, peer_port, peer_data,
                                  model)
        failed = False
    finally:
        model.stop()
        if failed:
            log(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    result = {
        "config": {"open_webui": version, "sizes": list(SIZES), "rounds": ROUNDS, "chats": CHATS,
                   "messages_per_chat": MESSAGES, "reply_chars": len(REPLY), "chunk": CHUNK,
                   "pieces_per_second": RATE, "open_samples": OPEN_SAMPLES, "search_samples": SEARCH_SAMPLES},
        "python_speed_ms": speed,
        **figures,
        "idle_memory_mb": {**memory, "ratio": ratio(memory["hub"], memory["open_webui"])},
        "elapsed_s": round(time.monotonic() - began, 1),
    }
    log("side by side:\n" + table(flat_figures(result)))
    return result


def compare(hub_pid, hub_port, hub_data, peer_pid, peer_port, peer_data, model) -> dict:
    import httpx

    peer_base = f"http://127.0.0.1:{peer_port}"
    clients = []

    async def open_clients():
        return [httpx.AsyncClient(base_url=peer_base, timeout=ROUND_TIMEOUT_SECONDS) for _ in peer_data["streams"]]

    async def close_clients():
        await asyncio.gather(*(client.aclose() for client in clients))

    loop = asyncio.new_event_loop()
    try:
        clients = loop.run_until_complete(open_clients())

        def hub_run(size):
            return lambda round_id: loop.run_until_complete(hub_round(hub_port, hub_data["streams"][:size], round_id))

        def peer_run(size):
            return lambda round_id: loop.run_until_complete(open_webui_round(
                peer_port, peer_data["streams"][:size], clients, peer_data["model_item"], round_id))

        log("warming up: two conversations on each")
        measure(hub_pid, model, hub_run(2))
        measure(peer_pid, model, peer_run(2))
        by_n = {}
        for size in SIZES:
            rounds = {"hub": [], "open_webui": []}
            for index in range(ROUNDS):
                log(f"N={size} round {index + 1}/{ROUNDS}: hub")
                rounds["hub"].append(measure(hub_pid, model, hub_run(size)))
                log(f"N={size} round {index + 1}/{ROUNDS}: open webui")
                rounds["open_webui"].append(measure(peer_pid, model, peer_run(size)))
                log(f"  hub {brief(rounds['hub'][-1])}; open webui {brief(rounds['open_webui'][-1])}")
            hub, peer = rounds_summary(rounds["hub"]), rounds_summary(rounds["open_webui"])
            by_n[str(size)] = with_ratios(hub, peer)
    finally:
        loop.run_until_complete(close_clients())
        loop.close()

    rng = random.Random(SEED + 1)
    with httpx.Client(base_url=f"http://127.0.0.1:{hub_port}", headers={"Cookie": hub_data["cookie"]},
                      timeout=60) as hub_client, \
            httpx.Client(base_url=peer_base, headers={"Authorization": f"Bearer {peer_data['token']}"},
                         timeout=60) as peer_client:
        log(f"opening chats: {OPEN_SAMPLES} of each, alternating, after {OPEN_WARMUP}")
        picks = [rng.randrange(CHATS) for _ in range(OPEN_WARMUP + OPEN_SAMPLES)]
        hub_open, peer_open = timed_requests(
            hub_client, peer_client, lambda turn: f"/chats/{hub_data['chat_ids'][picks[turn]]}/",
            lambda turn: f"/api/v1/chats/{peer_data['chat_ids'][picks[turn]]}",
            samples=OPEN_SAMPLES, warmup=OPEN_WARMUP, check_hub=lambda r: "hub-initial" in r.text,
            check_peer=lambda r: len(r.json()["chat"]["history"]["messages"]) == MESSAGES)
        log(f"message search: {SEARCH_SAMPLES} of each, alternating, after {SEARCH_WARMUP}")
        hub_search, peer_search = timed_requests(
            hub_client, peer_client, lambda turn: f"/api/v1/search/messages/?q={SEARCH_WORDS[turn % 6]}",
            lambda turn: f"/api/v1/chats/search?text={SEARCH_WORDS[turn % 6]}&page=1",
            samples=SEARCH_SAMPLES, warmup=SEARCH_WARMUP, check_hub=lambda r: r.json()["results"],
            check_peer=lambda r: r.json())
    return {
        "by_n": by_n,
        "open_chat": with_ratios(timing_summary(hub_open), timing_summary(peer_open)),
        "message_search": with_ratios(timing_summary(hub_search), timing_summary(peer_search)),
    }


def brief(figures: dict) -> str:
    return (f"relay p50/p99 {figures['relay_p50_ms']}/{figures['relay_p99_ms']} ms, first word max "
            f"{figures['first_word_max_s']} s, lost {figures['lost']}, cpu/reply {figures['cpu_s_per_reply']} s")


def flat_figures(result: dict) -> dict:
    """The rows of the printed table."""
    rows = {}
    for size, figures in result.get("by_n", {}).items():
        for key in ("relay_p50_ms", "relay_p99_ms", "first_word_p50_s", "first_word_max_s", "lost",
                    "cpu_s_per_reply"):
            rows[f"N={size} {key}"] = figures[key]
        why = {side: figures["lost_why"][side] for side in ("hub", "open_webui") if figures["lost_why"][side]}
        if why:
            rows[f"N={size} lost because"] = json.dumps(why)[:200]
    for name in ("open_chat", "message_search"):
        for key in ("p50_ms", "p95_ms"):
            if name in result:
                rows[f"{name} {key}"] = result[name][key]
    if "idle_memory_mb" in result:
        memory = result["idle_memory_mb"]
        rows["idle memory MB"] = {"hub": memory["hub"], "open_webui": memory["open_webui"], "ratio": memory["ratio"]}
    return rows


def main() -> int:
    """`python -m bench.peers`: the same as `python -m bench peers`."""
    print(json.dumps({"peers": run()}, indent=2))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
