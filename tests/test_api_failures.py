"""The API backends against a local OpenAI-compatible server on 127.0.0.1.

The completion style goes to ``/v1/completions`` (and is refused on a chat-only server), failed
calls become ``error`` rows that the next Dagster run retries, an audit with too many failed calls ends
``failed`` naming the cause, a malformed 200 reply is an error row (the chunk still lands),
timeouts are not re-sent, and ``api_model`` versions come from the ``/models`` listing.
"""

from __future__ import annotations

import pytest

from ingestion.errors import AuditFailedError, AuditIdentityError, CompletionsUnsupportedError
from ingestion.landing import read_landing
from models_inference.backends.openai_chat import OpenAIChatBackend
from models_inference.probes.biasdora.t2t import T2TProbeConfig, T2TTemplate, audit_id_for, probe_t2t
from tests.helpers.openai_server import OpenAIStubServer

TEMPLATES = [
    T2TTemplate("singular", "alcoholic person", "disability", "An alcoholic person is"),
    T2TTemplate("noun", "child", "age", "This child is a/an"),
]
#: What llama-server's SmolLM2 continued on /v1/completions, by prefilled letter.
CONTINUATIONS = {"b": "umbling, and", "k": "ind.", "s": "ad person"}


def _continue(req: dict) -> str:
    return CONTINUATIONS[req["prompt"].rstrip()[-1]]


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-issue17")


def _landed():
    return read_landing("t2t_completions").to_pylist()


def test_completion_style_uses_the_completions_endpoint(dora_home, api_key):
    with OpenAIStubServer() as server:
        server.completion_reply = _continue
        backend = OpenAIChatBackend("stub-model", base_url=server.base_url)
        summary = probe_t2t(TEMPLATES, backend, T2TProbeConfig(runs=1, letters="bks", prompt_style="completion"), progress=False)
        sent = [r for r in server.requests if r["path"].endswith("/completions")]
    assert all(not r["path"].endswith("/chat/completions") for r in sent) and len(sent) == 6
    assert all(r["json"]["prompt"].rstrip()[-1] in "bks" and r["json"]["max_tokens"] == 6 for r in sent)
    rows = {(r["descriptor"], r["letter"]): r for r in _landed()}
    assert rows[("alcoholic person", "b")]["word"] == "bumbling" and rows[("alcoholic person", "b")]["parse_status"] == "ok"
    assert rows[("child", "k")]["word"] == "kind" and rows[("child", "s")]["word"] == "sad"
    assert summary.statuses == {"ok": 6}


def test_completion_style_on_a_chat_only_server_is_a_clear_error(dora_home, api_key):
    with OpenAIStubServer() as server:
        server.chat_only = True
        backend = OpenAIChatBackend("gpt-4o", base_url=server.base_url)
        with pytest.raises(CompletionsUnsupportedError, match=r"no text-completions endpoint.*--prompt-style chat"):
            probe_t2t(TEMPLATES, backend, T2TProbeConfig(runs=1, letters="b", prompt_style="completion"), progress=False)
        assert not any(r["path"].endswith("/chat/completions") for r in server.requests)  # never a prose answer
    events = read_landing("audits").to_pylist()
    assert [e["status"] for e in sorted(events, key=lambda e: e["event_at"])] == ["started", "failed"]


def test_dead_server_fails_the_audit_and_the_next_run_retries_every_error_row(dora_home, api_key):
    cfg = T2TProbeConfig(runs=2, letters="bks", prompt_style="completion")
    with OpenAIStubServer() as server:
        port = server.port
        server.completion_reply = _continue
        backend = OpenAIChatBackend("stub-model", base_url=server.base_url, max_retries=1, concurrency=2)
    # the server is gone: connection refused for every call
    with pytest.raises(
        AuditFailedError,
        match=r"^BiasDora T2T: 12 of 12 calls failed \(100% > --max-error-share 0\.1\): APIConnectionError: .*\(connection refused\) at http://127\.0\.0\.1:\d+/v1/completions\. .*re-run",
    ):
        probe_t2t(TEMPLATES, backend, cfg, progress=False)
    assert {r["parse_status"] for r in _landed()} == {"error"}
    status = sorted(read_landing("audits").to_pylist(), key=lambda e: e["event_at"])[-1]["status"]
    assert status == "failed"
    with OpenAIStubServer(port=port) as server:  # restarted at the same URL
        server.completion_reply = _continue
        again = probe_t2t(TEMPLATES, backend, cfg, progress=False)
    assert (again.already_landed, again.generated) == (0, 12) and again.statuses == {"ok": 12}
    rows = _landed()
    assert len(rows) == 24  # the 12 error rows stay as history, each key answered once
    answered = [(r["setting"], r["descriptor"], r["letter"], r["run"]) for r in rows if r["parse_status"] != "error"]
    assert len(answered) == len(set(answered)) == 12
    third = probe_t2t(TEMPLATES, backend, cfg, progress=False)
    assert (third.already_landed, third.generated) == (12, 0)


def test_a_few_failures_finish_the_audit_and_are_retried(dora_home, api_key):
    cfg = T2TProbeConfig(runs=5, letters="bks", prompt_style="completion")  # 30 calls
    with OpenAIStubServer() as server:
        server.completion_reply = _continue
        server.fail_next(401, times=2)  # not retried by the client: 2 error rows (< 10 %)
        backend = OpenAIChatBackend("stub-model", base_url=server.base_url, concurrency=1)
        first = probe_t2t(TEMPLATES, backend, cfg, progress=False)
        assert first.statuses == {"ok": 28, "error": 2}
        second = probe_t2t(TEMPLATES, backend, cfg, progress=False)
    assert (second.already_landed, second.generated) == (28, 2) and second.statuses == {"ok": 2}


@pytest.mark.parametrize("kind", ["no_choices", "not_json"])
def test_malformed_200_reply_is_an_error_row_and_the_chunk_lands(dora_home, api_key, kind):
    with OpenAIStubServer() as server:
        server.completion_reply = _continue
        server.malformed_next(kind)
        backend = OpenAIChatBackend("stub-model", base_url=server.base_url, concurrency=1, max_retries=0)
        summary = probe_t2t(TEMPLATES, backend, T2TProbeConfig(runs=1, letters="bks", prompt_style="completion"), progress=False, max_error_share=0.5)
    assert summary.generated == 6 and summary.statuses == {"ok": 5, "error": 1}
    assert len(_landed()) == 6


def test_timeout_is_not_resent(dora_home, api_key):
    with OpenAIStubServer() as server:
        server.completion_reply = _continue
        server.delay_next(2.0)
        backend = OpenAIChatBackend("stub-model", base_url=server.base_url, concurrency=1, timeout=0.5, max_retries=3)
        summary = probe_t2t(TEMPLATES, backend, T2TProbeConfig(runs=1, letters="bks", prompt_style="completion"), progress=False, max_error_share=0.5)
        posts = [r for r in server.requests if r["path"].endswith("/completions")]
    # the timed-out one sent once (the count, not the run's seconds, which a loaded machine stretches)
    assert summary.statuses == {"ok": 5, "error": 1} and len(posts) == 6
    assert "APITimeoutError" in [r for r in _landed() if r["parse_status"] == "error"][0]["raw_output"]


def test_audit_identity_covers_full_version_and_selection(dora_home, api_key):
    a = OpenAIChatBackend("m", model_version="release-2025-01-candidate-a")
    b = OpenAIChatBackend("m", model_version="release-2025-01-candidate-b")
    cfg = T2TProbeConfig(runs=1, letters="b", prompt_style="completion").resolved(a)
    assert audit_id_for(a, cfg, TEMPLATES) != audit_id_for(b, cfg, TEMPLATES)
    assert audit_id_for(a, cfg, TEMPLATES) != audit_id_for(a, cfg, TEMPLATES[:1])
    bigger = T2TProbeConfig(runs=2, letters="b", prompt_style="completion").resolved(a)
    assert audit_id_for(a, cfg, TEMPLATES) != audit_id_for(a, bigger, TEMPLATES)
    with OpenAIStubServer() as server:
        server.completion_reply = _continue
        first = OpenAIChatBackend("stub-model", base_url=server.base_url)
        done = probe_t2t(TEMPLATES, first, T2TProbeConfig(runs=1, letters="b", prompt_style="completion"), progress=False)
        other = OpenAIChatBackend("other-model", base_url=server.base_url)
        with pytest.raises(AuditIdentityError, match=r"already exists with another identity \(model_id: 'stub-model' vs 'other-model'"):
            probe_t2t(TEMPLATES, other, T2TProbeConfig(runs=1, letters="b", prompt_style="completion"), audit_id=done.audit_id, progress=False)
        with pytest.raises(AuditIdentityError, match="identity"):  # same model, bigger selection
            probe_t2t(TEMPLATES, first, T2TProbeConfig(runs=3, letters="b", prompt_style="completion"), audit_id=done.audit_id, progress=False)
    assert len(_landed()) == 2  # nothing was added to the first audit


def test_interrupted_then_complete_audit_ends_finished(dora_home, api_key):
    from models_inference.audit_log import audit_events

    cfg = T2TProbeConfig(runs=1, letters="bks", prompt_style="completion")
    with OpenAIStubServer() as server:
        server.completion_reply = _continue
        backend = OpenAIChatBackend("stub-model", base_url=server.base_url)
        done = probe_t2t(TEMPLATES, backend, cfg, progress=False)
        # a later run of the same audit was interrupted after everything had landed
        from models_inference.audit_log import AuditInfo

        AuditInfo(done.audit_id, "stub-model", "stub-model", "t2t").land_event("failed", 0)
        probe_t2t(TEMPLATES, backend, cfg, progress=False)
    assert audit_events(done.audit_id)[-1]["status"] == "finished"


def test_api_model_version_falls_back_to_the_listing(monkeypatch):
    from ingestion.errors import VersionError
    from ingestion.registry import parse_registry
    from models_inference.model_ref import resolve_version

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.models = ["smollm2"]
        text = f"""targets:
  - name: local
    backend: openai
    base_url: {server.base_url}
    model: smollm2
    version: {{source: api_model}}
  - name: missing
    backend: openai
    base_url: {server.base_url}
    model: nope
    version: {{source: api_model}}
"""
        reg = parse_registry(text)
        assert resolve_version(reg.targets[0]) == "smollm2@2025-01-01"
        with pytest.raises(VersionError, match=r"not served by the endpoint.*explicit version"):
            resolve_version(reg.targets[1])
