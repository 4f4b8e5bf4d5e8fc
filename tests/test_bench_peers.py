"""The side-by-side benchmark's own logic: relay per model piece, lost streams, ratios, the table,
and that it never installs Open WebUI unless asked (and never in CI). Nothing here starts it."""

import httpx
import pytest

from agents_app.fake_provider import FakeProvider
from bench import __main__ as bench_main
from bench import peers


def test_each_piece_is_timed_from_its_send_to_the_arrival_that_completed_it():
    sent = [10.0, 10.05, 10.10, 10.15]  # four pieces of 8 characters, the last one of 3
    arrivals = [(10.002, 8), (10.06, 12), (10.12, 24), (10.20, 27)]
    latencies = peers.piece_latencies(arrivals, sent, chunk=8, length=27)
    assert latencies == pytest.approx([0.002, 0.07, 0.02, 0.05])


def test_a_piece_never_arrived_is_not_timed():
    assert peers.piece_latencies([(1.0, 8)], [0.5, 0.6], chunk=8, length=16) == [0.5]


def watch(prompt, *, text=peers.REPLY, done=True, error=None, sent=100.0, first=100.2):
    return {"prompt": prompt, "sent": sent, "first": first, "text": text, "done": done, "error": error,
            "arrivals": [(first, len(text))]}


def test_a_round_counts_lost_streams_with_their_reasons():
    watches = [watch("a"), watch("b", error="HTTP 400: database is locked"), watch("c", text="word000 ", done=False)]
    figures = peers.stream_summary(watches, {"a": [100.1] * 100}, cpu_seconds=0.9)
    assert figures["lost"] == 2
    assert figures["lost_why"] == {"HTTP 400: database is locked": 1, "no end within the round": 1}
    assert figures["cpu_s_per_reply"] == 0.3
    assert figures["first_word_max_s"] == pytest.approx(0.2)
    assert figures["relay_pieces"] == 100


def test_figures_side_by_side_carry_the_ratio_and_render_as_a_table():
    pair = peers.with_ratios({"p50_ms": 10.0, "lost": 0}, {"p50_ms": 40.0, "lost": 0})
    assert pair == {"p50_ms": {"hub": 10.0, "open_webui": 40.0, "ratio": 0.25},
                    "lost": {"hub": 0, "open_webui": 0, "ratio": None}}
    text = peers.table({"open_chat p50_ms": pair["p50_ms"]})
    assert text.splitlines()[0].split() == ["figure", "Hub", "Open", "WebUI", "Hub", "/", "OWUI"]
    assert text.splitlines()[2].split() == ["open_chat", "p50_ms", "10.0", "40.0", "0.25"]


def test_without_the_venv_or_the_knob_it_is_skipped(monkeypatch, tmp_path):
    monkeypatch.setattr(peers, "VENV", tmp_path / "open-webui")
    monkeypatch.setattr(peers, "INSTALL", False)
    monkeypatch.setattr(peers, "install", lambda: pytest.fail("installed without being asked"))
    version, why = peers.ensure_open_webui()
    assert version is None and "BENCH_PEERS_INSTALL=1" in why
    assert peers.run() == {"skipped": why}


def test_ci_never_installs_it(monkeypatch, tmp_path):
    monkeypatch.setattr(peers, "VENV", tmp_path / "open-webui")
    monkeypatch.setattr(peers, "INSTALL", True)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(peers, "install", lambda: pytest.fail("installed in CI"))
    assert peers.ensure_open_webui() == (None, "Open WebUI is never installed in CI")


def test_a_bare_bench_run_leaves_peers_out(monkeypatch):
    ran = []
    monkeypatch.setattr(bench_main, "run_in_own_process", lambda name: ran.append(name) or {})
    bench_main.main([])
    assert "peers" not in ran and "embedded" in ran


def test_the_fake_model_server_stamps_each_streamed_piece():
    with FakeProvider(text="abcdefghij", chunk_size=4) as fake:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        response = httpx.post(f"{fake.openai_url}/chat/completions", json=body, timeout=10)
        assert response.status_code == 200
        sent = fake.requests[0].sent_at
    # the opening event, three pieces, the finish and [DONE], in order
    assert len(sent) == 6 and sent == sorted(sent)
