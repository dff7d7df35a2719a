"""Versions of `api_model` targets served by llama-server / vLLM, whose `created` is the request time.

The stub server (`tests/helpers/openai_server.py`) plays each server: llama-server's listing
entries (`owned_by: "llamacpp"`, `meta`) and `GET /props`, vLLM's (`owned_by: "vllm"`, `root`,
`max_model_len`), an unknown server answering the request time, and OpenAI's fixed `created`.
The clock model_ref compares `created` with and the stub's clock are faked together, so "a day
apart" is two reads 86400 s apart. No model is loaded.
"""

from __future__ import annotations

import hashlib
import re

import pytest

from ingestion.errors import VersionError
from ingestion.registry import parse_registry
from models_inference import model_ref
from models_inference.model_ref import resolve_version, resolve_version_with_source
from tests.helpers.openai_server import OpenAIStubServer

DAY = 86400
T0 = 1767225600  # 2026-01-01 00:00 UTC
META = {"vocab_type": 2, "n_vocab": 49152, "n_ctx_train": 8192, "n_embd": 576, "n_params": 134515008, "size": 85880832}


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("DORA_TEST_KEY", "sk-test")


@pytest.fixture
def clock(monkeypatch):
    """A fake clock shared by model_ref and the stub: ``clock.now`` is the current time."""

    class Clock:
        now = float(T0)

        def __call__(self) -> float:
            return self.now

    fake = Clock()
    monkeypatch.setattr(model_ref, "_now", fake)
    return fake


def _target(server: OpenAIStubServer, model: str):
    return parse_registry(
        "targets:\n"
        f"  - {{name: srv, backend: openai, model: '{model}', base_url: '{server.base_url}', api_key_env: DORA_TEST_KEY,"
        " version: {source: api_model}}\n"
    ).targets[0]


def _twice_a_day_apart(server: OpenAIStubServer, clock, model: str) -> tuple[tuple[str, str], tuple[str, str]]:
    server.created_now, server.clock = True, clock
    first = resolve_version_with_source(_target(server, model))
    clock.now += DAY
    return first, resolve_version_with_source(_target(server, model))


def test_llama_server_remote_gguf_gives_one_version_a_day_apart(clock):
    path = "/srv/models/SmolLM2-135M-Instruct.Q4_1.gguf"  # not on this machine
    with OpenAIStubServer() as server:
        server.models = [{"id": "smol", "owned_by": "llamacpp", "meta": META}]  # started with --alias smol
        server.props = {"model_path": path, "build_info": "b11434-abc", "total_slots": 1, "default_generation_settings": {"n_ctx": 4096}}
        (v1, line), (v2, _) = _twice_a_day_apart(server, clock, "smol")
        assert v1 == v2
        assert re.fullmatch(r"smol@gguf-[0-9a-f]{12}", v1)
        assert "llama-server" in line and "SmolLM2-135M-Instruct.Q4_1.gguf" in line and "n_params=134515008" in line
        assert "/props" in {r["path"] for r in server.requests}
        # another GGUF behind the same alias is another version
        server.props = {**server.props, "model_path": "/srv/models/other.gguf"}
        assert resolve_version(_target(server, "smol")) != v1
        server.models = [{"id": "smol", "owned_by": "llamacpp", "meta": {**META, "n_params": 1}}]
        server.props = {**server.props, "model_path": path}
        assert resolve_version(_target(server, "smol")) != v1


def test_llama_server_without_alias_and_without_props_uses_the_id_path(clock):
    path = "/srv/models/m.gguf"
    with OpenAIStubServer() as server:
        server.models = [{"id": path, "owned_by": "llamacpp", "meta": META}]
        server.props = {"model_path": path}
        (with_props, _), _ = _twice_a_day_apart(server, clock, path)
        server.props = None  # /props unreachable: the id is the same GGUF path
        assert resolve_version(_target(server, path)) == with_props


def test_llama_server_local_model_path_gives_the_file_hash(clock, tmp_path):
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"GGUF" + bytes(range(256)) * 4)
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
    with OpenAIStubServer() as server:
        server.models = [{"id": "tiny", "owned_by": "llamacpp", "meta": META}]
        server.props = {"model_path": str(weights)}
        (v1, line), (v2, _) = _twice_a_day_apart(server, clock, "tiny")
        assert v1 == v2 == f"tiny@sha256-{digest}"
        assert v1.split("@", 1)[1] == model_ref.weights_hash(weights)  # the file_hash source's string
        assert "sha256 of its weights" in line and str(weights) in line


def test_llama_server_detected_by_props_alone(clock):
    """An older llama-server (no `owned_by: llamacpp`) whose `created` is the request time."""
    with OpenAIStubServer() as server:
        server.models = ["m"]
        server.props = {"model_path": "/srv/m.gguf"}
        (v1, _), (v2, _) = _twice_a_day_apart(server, clock, "m")
        assert v1 == v2 and v1.startswith("m@gguf-")


def test_vllm_gives_one_version_a_day_apart(clock):
    with OpenAIStubServer() as server:
        server.models = [{"id": "qwen", "owned_by": "vllm", "root": "Qwen/Qwen2.5-0.5B-Instruct", "parent": None, "max_model_len": 4096}]
        (v1, line), (v2, _) = _twice_a_day_apart(server, clock, "qwen")
        assert v1 == v2 and re.fullmatch(r"qwen@vllm-[0-9a-f]{12}", v1)
        assert "vLLM" in line and "Qwen/Qwen2.5-0.5B-Instruct" in line and "4096" in line
        assert all(r["path"] != "/props" for r in server.requests)  # vLLM has no /props: not asked
        server.models = [{**server.models[0], "root": "Qwen/Qwen2.5-1.5B-Instruct"}]
        assert resolve_version(_target(server, "qwen")) != v1


def test_unknown_server_with_request_time_and_nothing_stable_is_refused(clock):
    with OpenAIStubServer() as server:
        server.models = ["mystery"]
        server.created_now, server.clock = True, clock
        with pytest.raises(VersionError) as info:
            resolve_version(_target(server, "mystery"))
    message = str(info.value)
    assert "\n" not in message
    assert "would change on every poll" in message and "no stable identity" in message
    assert 'version: {value: "..."}' in message and "--alias" in message


def test_llama_server_with_alias_and_no_props_is_refused(clock):
    with OpenAIStubServer() as server:
        server.models = [{"id": "smol", "owned_by": "llamacpp", "meta": META}]
        with pytest.raises(VersionError, match=r"'srv'.*no model_path.*alias"):
            resolve_version(_target(server, "smol"))


def test_openai_like_server_keeps_the_creation_date(clock):
    with OpenAIStubServer() as server:
        server.models = [{"id": "gpt-4o", "created": 1715367049, "owned_by": "system"}]  # 2024-05-10 UTC
        version, line = resolve_version_with_source(_target(server, "gpt-4o"))
        clock.now += DAY
        assert resolve_version(_target(server, "gpt-4o")) == version == "gpt-4o@2024-05-10"
        assert line == "api_model: creation date of 'gpt-4o' (the GET /models listing: 2024-05-10 UTC)"
        assert all(r["path"] != "/props" for r in server.requests)


def test_source_lines_of_the_other_sources(tmp_path):
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"weights")
    registry = parse_registry(
        "targets:\n"
        "  - {name: pinned, model: m, version: {source: explicit, value: v2}}\n"
        f"  - {{name: local, model: '{weights}', version: {{source: file_hash}}}}\n"
        "  - {name: snap, backend: openai, model: gpt-4o, version: {source: api_model, value: gpt-4o-2024-08-06}}\n"
    )
    assert resolve_version_with_source(registry.target("pinned")) == ("v2", "explicit: version.value in the registry")
    assert resolve_version_with_source(registry.target("local")) == (model_ref.weights_hash(weights), f"file_hash: sha256 of {weights}")
    assert resolve_version_with_source(registry.target("snap"))[1] == "api_model: version.value in the registry (no request)"


def test_the_sensor_logs_the_source_of_each_version(clock):
    from orchestration.defs.audits.runs import current_versions

    class Log:
        def __init__(self):
            self.lines: list[str] = []

        def info(self, text):
            self.lines.append(text)

        error = info

    with OpenAIStubServer() as server:
        server.models = [{"id": "qwen", "owned_by": "vllm", "root": "Qwen/Qwen2.5-0.5B-Instruct", "max_model_len": 4096}, "mystery"]
        server.created_now, server.clock = True, clock
        registry = parse_registry(
            "targets:\n"
            f"  - {{name: vllm, backend: openai, model: qwen, base_url: '{server.base_url}', api_key_env: DORA_TEST_KEY,"
            " version: {source: api_model}}\n"
            f"  - {{name: odd, backend: openai, model: mystery, base_url: '{server.base_url}', api_key_env: DORA_TEST_KEY,"
            " version: {source: api_model}}\n"
        )
        log = Log()
        found, errors = current_versions(registry, log)
    version = found["vllm"][1]
    assert f"dora: target 'vllm' is at version {version} (api_model: vLLM: digest of root " in log.lines[0]
    assert list(found) == ["vllm"] and len(errors) == 1 and "would change on every poll" in errors[0]
    assert "cannot read the version of target 'odd'" in log.lines[1]
