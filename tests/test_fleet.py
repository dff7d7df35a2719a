"""A fleet of OpenAI-compatible servers behind one target (issue 16): spread and failover."""

import threading

import pytest

from models_inference.backends.base import GenerationRequest, RenderedPrompt, SamplingParams
from models_inference.backends.fleet import FleetChatBackend, ServerFleet, fleet_urls
from models_inference.backends.text import load_text_backend
from tests.openai_server import OpenAIStubServer


def requests(n):
    return [GenerationRequest(RenderedPrompt("chat", f"prompt {i}"), seed=i, max_new_tokens=8) for i in range(n)]


def test_fleet_urls():
    assert fleet_urls("http://a:1/v1, http://b:2/v1") == ["http://a:1/v1", "http://b:2/v1"]
    assert fleet_urls(None) == [] and fleet_urls(["https://x/v1"]) == ["https://x/v1"]
    with pytest.raises(ValueError, match="not an http"):
        fleet_urls("http://a/v1,ftp://b")


def test_two_servers_spread_by_outstanding_requests_and_survive_one_dying(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fleet-test-key")
    with OpenAIStubServer() as slow, OpenAIStubServer() as fast:
        slow.delay_next(0.15, times=1000)  # every answer of `slow` takes 150 ms, of `fast` 30 ms
        fast.delay_next(0.03, times=1000)
        for server, name in ((slow, "slow"), (fast, "fast")):
            server.chat_reply = lambda req, name=name: f"[{name}]"
        backend = load_text_backend("stub-model", backend="openai", base_url=f"{slow.base_url},{fast.base_url}",
                                    concurrency=4, max_retries=0, timeout=5)
        assert isinstance(backend, FleetChatBackend)
        first = backend.generate(requests(40), SamplingParams())
        assert all(r.error is None for r in first)
        counts = {s["base_url"]: s["served"] for s in backend.fleet.report()}
        assert counts[slow.base_url] + counts[fast.base_url] == 40
        assert counts[fast.base_url] > 2 * counts[slow.base_url] > 0  # least outstanding: the fast one takes more

        # `slow` dies mid-run (when `fast` answers its 10th request of the run, so requests
        # remain): nothing is lost, they go to `fast`, and the failure is reported
        killed = threading.Event()
        answered = []

        def fast_reply(req):
            answered.append(1)
            if len(answered) == 10 and not killed.is_set():
                slow._httpd.shutdown()
                slow._httpd.server_close()
                killed.set()
            return "[fast]"

        fast.chat_reply = fast_reply
        tick = None
        second = backend.generate(requests(80), SamplingParams(), on_batch=tick)
        assert killed.is_set()
        assert [r.error for r in second] == [None] * 80
        assert {r.text for r in second} <= {"[slow]", "[fast]"}
        report = {s["base_url"]: s for s in backend.fleet.report()}
        assert report[slow.base_url]["failures"] >= 1 and backend.fleet.failovers >= 1
        assert "sk-fleet-test-key" not in str(report)
        assert report[fast.base_url]["served"] > counts[fast.base_url]


def test_every_server_down_gives_error_rows_not_exceptions(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fleet-test-key")
    with OpenAIStubServer() as a, OpenAIStubServer() as b:
        a.fail_next(503, times=100)
        b.fail_next(503, times=100)
        backend = FleetChatBackend(model_id="stub-model", base_urls=(a.base_url, b.base_url), max_retries=0, timeout=5)
        out = backend.generate(requests(3), SamplingParams())
    assert all(r.error and "503" in r.error for r in out)
    assert all(s["failures"] >= 1 for s in backend.fleet.report())
    # a client error (4xx) is the request's own: no failover
    with OpenAIStubServer() as c, OpenAIStubServer() as d:
        c.fail_next(400, times=1)
        d.fail_next(400, times=1)
        fleet = ServerFleet([c.base_url, d.base_url], max_retries=0, timeout=5)
        with pytest.raises(Exception, match="400"):
            fleet.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert fleet.failovers == 0
