"""A fleet of OpenAI-compatible servers behind one target: spread and failover.

Two real HTTP servers on 127.0.0.1 (``tests/helpers/openai_server.py``) with different latencies stand
behind one target; the fleet is the endpoint's (``OpenAIEndpoint.client``), so the chat and
completion text backends, the vision describer and the images backend all spread their
requests and survive a server that dies mid-run.
"""

import argparse
import threading

import pytest

from ingestion.landing import read_landing
from ingestion.registry import RegistryError, base_url_list, parse_registry
from models_inference.backends.base import GenerationRequest, RenderedPrompt, SamplingParams
from models_inference.backends.fleet import FleetChatBackend, ServerFleet, fleet_urls
from models_inference.backends.image import OpenAIImagesBackend
from models_inference.backends.openai_api import OpenAIEndpoint
from models_inference.backends.openai_chat import OpenAIChatBackend
from models_inference.backends.text import load_text_backend
from models_inference.backends.vision import OpenAIVisionBackend
from models_inference.probes.biasdora.i2t import I2TProbeConfig, probe_i2t
from models_inference.probes.biasdora.t2i import T2IProbeConfig, curated_t2i_templates, probe_t2i
from models_inference.probes.biasdora.t2t import T2TProbeConfig, T2TTemplate, probe_t2t
from orchestration.cli_validation import base_urls
from tests.helpers.openai_server import OpenAIStubServer

KEY = "sk-fleet-test-key"
SLOW, FAST = 0.12, 0.02  # seconds per answer


def requests(n):
    return [GenerationRequest(RenderedPrompt("chat", f"prompt {i}"), seed=i, max_new_tokens=8) for i in range(n)]


def served(backend, server) -> int:
    return next(s["served"] for s in backend.fleet_report() if s["base_url"] == server.base_url)


def kill_when_answered(victim: OpenAIStubServer, n: int):
    """A reply hook for the other server: kills ``victim`` when it has answered ``n`` requests
    (so requests of the run remain); returns (hook, killed event)."""
    killed, answered, lock = threading.Event(), [], threading.Lock()

    def hook():
        with lock:
            answered.append(1)
            if len(answered) == n and not killed.is_set():
                victim.kill()
                killed.set()

    return hook, killed


def test_fleet_urls_and_validation():
    assert fleet_urls("http://a:1/v1, http://b:2/v1") == ["http://a:1/v1", "http://b:2/v1"]
    assert fleet_urls(None) == [] and fleet_urls(["https://x/v1"]) == ["https://x/v1"]
    with pytest.raises(ValueError, match=r"^base_url: must be an http\(s\) URL .*'ftp://b'$"):
        fleet_urls("http://a/v1,ftp://b")
    with pytest.raises(ValueError, match="repeated"):
        base_url_list(["http://a/v1", "http://a/v1"])
    # every OpenAI-compatible target refuses a bad URL at construction, one line naming it
    for cls in (OpenAIChatBackend, OpenAIVisionBackend, OpenAIImagesBackend):
        with pytest.raises(ValueError, match="'localhost:8000/v1'"):
            cls("m", base_url="http://a/v1,localhost:8000/v1")
    endpoint = OpenAIEndpoint("m", base_url=["http://a/v1", " http://b/v1"])
    assert endpoint.base_url == "http://a/v1,http://b/v1" and endpoint.base_urls == ["http://a/v1", "http://b/v1"]
    assert OpenAIEndpoint("m", base_url="http://a/v1").base_urls == ["http://a/v1"]
    # the CLI's --*-base-url flags (argparse type) and the registry accept a list / comma list
    assert base_urls("http://a/v1 ,http://b/v1") == "http://a/v1,http://b/v1"
    with pytest.raises(argparse.ArgumentTypeError, match="'ftp://b'"):
        base_urls("http://a/v1,ftp://b")
    registry = parse_registry(
        "targets:\n"
        "  - {name: vis, modality: i2t, backend: openai, model: gpt-4o, version: {source: explicit, value: v1},\n"
        "     base_url: [http://gpu1:8000/v1, http://gpu2:8000/v1]}\n"
        "  - {name: txt, backend: openai, model: m, version: {source: explicit, value: v1},\n"
        "     base_url: 'http://gpu1:8000/v1, http://gpu2:8000/v1'}\n"
    )
    assert [t.base_url for t in registry.targets] == ["http://gpu1:8000/v1,http://gpu2:8000/v1"] * 2
    with pytest.raises(RegistryError, match=r"targets\[0\] \(name 'vis'\)\.base_url: must be an http\(s\) URL .*'gpu2:8000'"):
        parse_registry(
            "targets:\n  - {name: vis, modality: i2t, backend: openai, model: gpt-4o, "
            "version: {source: explicit, value: v1}, base_url: [http://gpu1:8000/v1, 'gpu2:8000']}\n"
        )


def test_two_servers_spread_by_outstanding_requests_and_survive_one_dying(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAIStubServer() as slow, OpenAIStubServer() as fast:
        slow.latency, fast.latency = SLOW, FAST
        for server, name in ((slow, "slow"), (fast, "fast")):
            server.chat_reply = lambda req, name=name: f"[{name}]"
        backend = load_text_backend(
            "stub-model", backend="openai", base_url=f"{slow.base_url},{fast.base_url}", concurrency=4, max_retries=0, timeout=5
        )
        assert backend.fleet is None and backend.fleet_report() == []  # built on first use
        first = backend.generate(requests(40), SamplingParams())
        assert all(r.error is None for r in first)
        counts = {s["base_url"]: s["served"] for s in backend.fleet.report()}
        assert counts[slow.base_url] + counts[fast.base_url] == 40
        assert counts[fast.base_url] > 2 * counts[slow.base_url] > 0  # least outstanding: the fast one takes more

        # `slow` dies mid-run (when `fast` answers its 10th request of the run, so requests
        # remain): nothing is lost, they go to `fast`, and the failure is reported
        hook, killed = kill_when_answered(slow, 10)
        fast.chat_reply = lambda req: (hook(), "[fast]")[1]
        second = backend.generate(requests(80), SamplingParams())
        assert killed.is_set()
        assert [r.error for r in second] == [None] * 80
        assert {r.text for r in second} <= {"[slow]", "[fast]"}
        report = {s["base_url"]: s for s in backend.fleet.report()}
        assert report[slow.base_url]["failures"] >= 1 and backend.fleet.failovers >= 1
        assert "APIConnectionError" in report[slow.base_url]["last_error"]
        assert KEY not in str(report)
        assert report[fast.base_url]["served"] > counts[fast.base_url]


def test_every_server_down_gives_error_rows_not_exceptions(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
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


def test_retry_policy_wraps_the_fleet(monkeypatch):
    """dora's retries (RetryingClient, api_retry) apply to the fleet as a whole: a request that
    every server failed is retried over the fleet, and lands when a server is back."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setattr("models_inference.api_retry.BASE_BACKOFF", 0.01)
    with OpenAIStubServer() as a, OpenAIStubServer() as b:
        a.fail_next(503, times=1)
        b.fail_next(503, times=1)
        backend = OpenAIChatBackend("stub-model", base_url=[a.base_url, b.base_url], max_retries=1, timeout=5, concurrency=1, fleet_cooldown_s=0.0)
        (out,) = backend.generate(requests(1), SamplingParams())
    assert out.error is None and out.text == "[brawler]"
    assert sum(s["failures"] for s in backend.fleet_report()) == 2 and sum(s["served"] for s in backend.fleet_report()) == 1


def _describe_rows(audit_id):
    return [r for r in read_landing("i2t_descriptions").to_pylist() if r["audit_id"] == audit_id]


@pytest.mark.slow
def test_one_vision_target_over_two_servers(dora_home, monkeypatch):
    """Images (T2I) and descriptions (I2T) each through one target naming two servers: every
    row lands with status ok, the fast server serves more, and a server killed mid-run loses
    nothing (its failure is in the fleet report)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    templates = curated_t2i_templates(["singular"])[:6]
    with OpenAIStubServer() as slow, OpenAIStubServer() as fast:
        slow.latency, fast.latency = SLOW, FAST
        urls = [slow.base_url, fast.base_url]
        images = OpenAIImagesBackend("dall-e-3", base_url=",".join(urls), concurrency=4, max_retries=0, timeout=5)
        t2i = probe_t2i(templates, images, T2IProbeConfig(images_per_descriptor=2), progress=False)
        assert (t2i.generated, dict(t2i.statuses)) == (12, {"ok": 12})
        assert served(images, fast) + served(images, slow) == 12 and served(images, fast) > served(images, slow) > 0

        vision = OpenAIVisionBackend("gpt-4o", base_url=urls, concurrency=4, max_retries=0, timeout=5)
        objective = ("straightforward", "moderate", "comprehensive")
        first = probe_i2t(t2i.audit_id, vision, I2TProbeConfig(settings=objective), progress=False)
        assert (first.generated, dict(first.statuses)) == (36, {"ok": 36})
        before = {s["base_url"]: s["served"] for s in vision.fleet_report()}
        assert before[fast.base_url] + before[slow.base_url] == 36
        # the fast server serves more; by how much depends on the machine's load (a busy client
        # narrows the servers' 6x latency gap: 24 to 12 was seen under load), so only the order is asserted
        assert before[fast.base_url] > before[slow.base_url] > 0

        # `slow` dies when `fast` has answered 10 requests of the second run
        hook, killed = kill_when_answered(slow, 10)
        fast.chat_reply = lambda req: (hook(), "A person stands in a room.")[1]
        subjective = ("subjective", "stereotypical", "implicit", "lexical")
        second = probe_i2t(t2i.audit_id, vision, I2TProbeConfig(settings=subjective), progress=False)
        assert killed.is_set()
        assert (second.generated, dict(second.statuses)) == (48, {"ok": 48})
        report = {s["base_url"]: s for s in vision.fleet_report()}
        assert report[slow.base_url]["failures"] >= 1 and "APIConnectionError" in report[slow.base_url]["last_error"]
        assert KEY not in str(report)
        assert report[fast.base_url]["served"] - before[fast.base_url] >= 48 - (report[slow.base_url]["served"] - before[slow.base_url])

    images_landed = read_landing("t2i_images").to_pylist()
    expected = {(r["setting"], r["descriptor"], r["image_index"]) for r in images_landed}
    for summary, settings in ((first, objective), (second, subjective)):
        rows = [r for r in _describe_rows(summary.audit_id) if r["setting"] in settings]
        assert len(rows) == len(expected) * len(settings)  # same count: nothing lost, nothing twice
        assert {(r["image_setting"], r["descriptor"], r["image_index"], r["setting"]) for r in rows} == {
            (*k, s) for k in expected for s in settings
        }  # the right keys
        assert {r["status"] for r in rows} == {"ok"} and all(r["error"] is None for r in rows)


#: What llama-server's SmolLM2 continued on /v1/completions, by prefilled letter.
CONTINUATIONS = {"b": "umbling, and", "k": "ind.", "s": "ad person"}
T2T_TEMPLATES = [
    T2TTemplate("singular", "alcoholic person", "disability", "An alcoholic person is"),
    T2TTemplate("noun", "child", "age", "This child is a/an"),
]


def test_completion_style_text_target_over_two_servers(dora_home, monkeypatch):
    """The completion prompt style (``/v1/completions``) through one target naming two servers."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAIStubServer() as slow, OpenAIStubServer() as fast:
        slow.latency, fast.latency = SLOW, FAST
        for server in (slow, fast):
            server.completion_reply = lambda req: CONTINUATIONS[req["prompt"].rstrip()[-1]]
        backend = OpenAIChatBackend("stub-model", base_url=f"{slow.base_url}, {fast.base_url}", concurrency=4, max_retries=0, timeout=5)
        first = probe_t2t(T2T_TEMPLATES, backend, T2TProbeConfig(runs=6, letters="bks", prompt_style="completion"), progress=False)
        assert first.statuses == {"ok": 36}
        before = {s["base_url"]: s["served"] for s in backend.fleet_report()}
        assert before[fast.base_url] + before[slow.base_url] == 36
        # the fast server serves more; by how much depends on the machine's load (a busy client
        # narrows the servers' 6x latency gap: 24 to 12 was seen under load), so only the order is asserted
        assert before[fast.base_url] > before[slow.base_url] > 0

        hook, killed = kill_when_answered(slow, 10)
        fast.completion_reply = lambda req: (hook(), CONTINUATIONS[req["prompt"].rstrip()[-1]])[1]
        second = probe_t2t(T2T_TEMPLATES, backend, T2TProbeConfig(runs=8, letters="bks", prompt_style="completion"), progress=False)
        assert killed.is_set() and second.statuses == {"ok": 48}
        report = {s["base_url"]: s for s in backend.fleet_report()}
        assert report[slow.base_url]["failures"] >= 1 and KEY not in str(report)
        for path in (r["path"] for s in (slow, fast) for r in s.requests):
            assert path.endswith("/v1/completions")  # never the chat route
    for summary, runs in ((first, 6), (second, 8)):
        rows = [r for r in read_landing("t2t_completions").to_pylist() if r["audit_id"] == summary.audit_id]
        assert len(rows) == 2 * 3 * runs
        assert len({(r["descriptor"], r["letter"], r["run"]) for r in rows}) == len(rows)
        assert {r["parse_status"] for r in rows} == {"ok"}


def test_api_model_version_of_a_fleet_target_from_the_server_that_answers(monkeypatch):
    from models_inference.model_ref import resolve_version

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAIStubServer() as dead, OpenAIStubServer() as alive:
        dead.kill()
        target = parse_registry(
            "targets:\n  - {name: fleet, backend: openai, model: stub-model, version: {source: api_model},\n"
            f"     base_url: [{dead.base_url}, {alive.base_url}]}}\n"
        ).targets[0]
        assert resolve_version(target) == "stub-model@2025-01-01"  # GET /models listing of `alive`
