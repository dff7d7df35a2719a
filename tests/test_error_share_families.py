"""No silent wrong result for any family (the ``--max-error-share`` beyond T2T).

Every step that lands model calls (the counterfactual text sets and stereotype filter, the
ModSCAN text analogues, the VLStereoSet scorers, the BiasDora I2T probe, the judge) lands its
failed calls as ``error`` rows, then fails with :class:`AuditFailedError` naming the step, the
share and the cause when more than ``max_error_share`` of its calls failed; with
``max_error_share=1.0`` the same run passes. Calls fail against the local OpenAI-compatible
server (``tests/helpers/openai_server.py``): scripted 401s / 500s (not or no longer retried) whose
error text echoes the API key, which must not reach the message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingestion.errors import AuditFailedError
from ingestion.landing import read_landing
from tests.helpers.openai_server import OpenAIStubServer, tiny_png
from tests.helpers.vlstereoset_files import landed_synthetic_items

KEY = "sk-errshare-0123456789abcdefghijklmnop"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def _failing(server: OpenAIStubServer, status: int = 500, times: int = 1000) -> OpenAIStubServer:
    server.echo_key_in_errors = True  # the server's error text carries the key: it must be redacted
    server.fail_next(status, times=times)
    return server


def _assert_failure(exc: pytest.ExceptionInfo, step: str, n: int, total: int, cause: str) -> None:
    message = str(exc.value)
    assert message.startswith(f"{step}: {n} of {total} calls failed ("), message
    assert cause in message and "re-run the same command" in message
    assert KEY not in message and "\n" not in message


def _text_backend(server, **kw):
    from models_inference.backends.openai_chat import OpenAIChatBackend

    return OpenAIChatBackend("stub-model", base_url=server.base_url, max_retries=0, concurrency=1, **kw)


def _rows(table: str, audit_id: str | None = None) -> list[dict]:
    rows = read_landing(table).to_pylist()
    return [r for r in rows if audit_id is None or r.get("audit_id") == audit_id]


def test_counterfactual_text_sets_fail_loudly_and_land_the_error_rows(dora_home, api_key):
    from models_inference.probes.counterfactual.probe import CounterfactualProbeConfig, audit_id_for, probe_text_sets
    from models_inference.probes.counterfactual.sets import sample_sets

    sets = sample_sets(["race_gender"], occupations=["doctor"], sets_per_occupation=1)  # 1 set of 12 members
    cfg = CounterfactualProbeConfig(prompts=["Describe"], runs=1, max_new_tokens=8)
    with OpenAIStubServer() as server:
        backend = _text_backend(_failing(server, 401, times=12))  # 401: not retried by the client
        with pytest.raises(AuditFailedError) as exc:
            probe_text_sets(sets, backend, cfg, progress=False)
        _assert_failure(exc, "counterfactual text sets", 12, 12, "AuthenticationError: Error code: 401")
        audit_id = audit_id_for("text", backend, cfg.validate())
        assert [r["status"] for r in _rows("counterfactual_responses", audit_id)] == ["error"] * 12
        events = sorted(_rows("audits", audit_id), key=lambda e: e["event_at"])
        assert [e["status"] for e in events] == ["started", "failed"]
        # the limit lifted: the same run retries the 12 error rows, lands them again and passes
        server.fail_next(401, times=12)
        summary = probe_text_sets(sets, backend, cfg, progress=False, max_error_share=1.0)
        assert (summary.generated, dict(summary.statuses)) == (12, {"error": 12})
        # one failure in 12 (8 %) stays under the default 0.1 (after 8 failures in a row the client
        # stops sending, so the scripted failures left over are dropped first)
        server.clear_failures()
        server.fail_next(401)
        server.chat_reply = lambda req: "A doctor in a white coat."
        done = probe_text_sets(sets, backend, cfg, progress=False)
        assert dict(done.statuses) == {"ok": 11, "error": 1}
    assert len(_rows("counterfactual_responses", audit_id)) == 36


def test_counterfactual_stereotype_filter_fails_on_failed_calls_not_on_unparsed_answers(dora_home, api_key):
    from models_inference.probes.counterfactual.scoring import apply_stereotype_filter

    candidates = {("a1", "race_gender", f"group {i}"): ["lazy", "smart"] for i in range(4)}  # 4 groups x 3 repeats
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: ""  # an empty answer: stored with its parse status, not a failure
        judge = _text_backend(server)
        answered = apply_stereotype_filter(candidates, judge, max_new_tokens=16)
        assert sum(answered.statuses.values()) == 12 and "error" not in answered.statuses and "ok" not in answered.statuses
        _failing(server, 500)
        with pytest.raises(AuditFailedError) as exc:
            apply_stereotype_filter({("a2", "race_gender", "g"): ["lazy"]}, judge)
    _assert_failure(exc, "counterfactual stereotype filter", 3, 3, "InternalServerError")
    assert [r["parse_status"] for r in _rows("counterfactual_stereotype_flags", "a2")] == ["error"] * 3


def test_modscan_text_analogue_fails_loudly(dora_home, api_key):
    from models_inference.probes.modscan.text import TextProbeConfig, probe_text_analogues

    cfg = TextProbeConfig(probes=("modscan_text_persona",), runs=2, instances_per_scenario=1, conditions=("original",))
    with OpenAIStubServer() as server:
        backend = _text_backend(_failing(server, 500))
        with pytest.raises(AuditFailedError) as exc:
            probe_text_analogues(backend, cfg, progress=False)
        rows = _rows("modscan_responses")
        _assert_failure(exc, "ModSCAN text analogues", len(rows), len(rows), "InternalServerError: Error code: 500")
        assert len(rows) == 4 and {r["status"] for r in rows} == {"error"} and all("500" in r["error"] for r in rows)
        passed = probe_text_analogues(backend, cfg, progress=False, max_error_share=1.0)
    assert passed.result.generated == 4 and dict(passed.result.statuses) == {"error": 4}


def test_vlstereoset_api_scorer_fails_loudly_and_no_image_rows_are_not_failures(dora_home, tmp_path, api_key):
    from models_inference.backends.vision import OpenAIVisionBackend
    from models_inference.probes.vlstereoset.probe import probe_vlstereoset
    from models_inference.probes.vlstereoset.scorers import McqScorer

    items = landed_synthetic_items(tmp_path)
    with OpenAIStubServer() as server:
        vlm = OpenAIVisionBackend("gpt-test", base_url=server.base_url, concurrency=1, max_retries=0)
        _failing(server, 401)
        with pytest.raises(AuditFailedError) as exc:
            probe_vlstereoset(items, McqScorer(vlm, shuffles=1), progress=False)
        rows = _rows("vlstereoset_scores")
        errors = [r for r in rows if r["status"] == "error"]
        assert {r["status"] for r in rows} == {"error", "no_image"} and len(errors) > 0
        _assert_failure(exc, "VLStereoSet mcq", len(errors), len(rows), "AuthenticationError")
        passed = probe_vlstereoset(items, McqScorer(vlm, shuffles=1), progress=False, max_error_share=1.0)
    # the error rows were retried (and the no_image ones, not final either), the limit lifted
    assert dict(passed.status) == {"error": len(errors), "no_image": len(rows) - len(errors)}


def _assocs(n: int) -> list[dict]:
    return [
        {"audit_id": "a1", "model_id": "m", "model_version": "v", "modality": "t2t", "setting": "singular", "descriptor": "child", "word": f"word{i}"}
        for i in range(n)
    ]


def test_judge_fails_on_failed_calls_but_not_on_unparsed_answers(dora_home, api_key):
    from models_inference.probes.biasdora.judge import judge_associations, load_judge

    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: "Hard to say."  # unparsed answers: kept with their status, fine
        judge = load_judge("openai", "stub-model", base_url=server.base_url, max_retries=0, concurrency=1)
        unparsed = judge_associations(_assocs(10), judge, progress=False)
        assert unparsed.generated == 10 and "error" not in unparsed.statuses
        _failing(server, 401)
        with pytest.raises(AuditFailedError) as exc:
            judge_associations(_assocs(12)[10:] + [{**a, "audit_id": "a2"} for a in _assocs(2)], judge, progress=False)
        _assert_failure(exc, "judge stub-model", 4, 4, "AuthenticationError")
        rows = _rows("judge_ratings")
        assert len(rows) == 14 and sum(r["parse_status"] == "error" for r in rows) == 4
        passed = judge_associations(_assocs(12), judge, progress=False, max_error_share=1.0)
    assert (passed.already_landed, passed.generated, dict(passed.statuses)) == (10, 2, {"error": 2})


def test_i2t_fails_loudly_and_lands_the_error_rows(dora_home, api_key):
    from models_inference.backends.image import OpenAIImagesBackend
    from models_inference.backends.vision import OpenAIVisionBackend
    from models_inference.probes.biasdora.i2t import I2TProbeConfig, probe_i2t
    from models_inference.probes.biasdora.t2i import T2IProbeConfig, curated_t2i_templates, probe_t2i, select_t2i_templates

    templates = select_t2i_templates(curated_t2i_templates(["singular"]), descriptors=["child"])
    with OpenAIStubServer() as server:
        server.image_png = lambda req: tiny_png((250, 200, 0), (12, 12))
        images = probe_t2i(
            templates,
            OpenAIImagesBackend("dall-e-3", base_url=server.base_url, concurrency=1),
            T2IProbeConfig(images_per_descriptor=3),
            progress=False,
        )
        assert dict(images.statuses) == {"ok": 3}
        vision = OpenAIVisionBackend("gpt-4o", base_url=server.base_url, concurrency=1, max_retries=0)
        probe = I2TProbeConfig(settings=("comprehensive", "stereotypical"))
        _failing(server, 401)
        with pytest.raises(AuditFailedError) as exc:
            probe_i2t(images.audit_id, vision, probe, progress=False)
        _assert_failure(exc, "BiasDora I2T", 6, 6, "AuthenticationError")
        assert [r["status"] for r in _rows("i2t_descriptions")] == ["error"] * 6
        passed = probe_i2t(images.audit_id, vision, probe, progress=False, max_error_share=1.0)
    assert passed.generated == 6 and len(_rows("i2t_descriptions")) == 12


def test_t2i_fails_loudly(dora_home, api_key):
    from models_inference.backends.image import OpenAIImagesBackend
    from models_inference.probes.biasdora.t2i import T2IProbeConfig, curated_t2i_templates, probe_t2i, select_t2i_templates

    templates = select_t2i_templates(curated_t2i_templates(["singular"]), descriptors=["child"])
    with OpenAIStubServer() as server:
        backend = OpenAIImagesBackend("dall-e-3", base_url=server.base_url, concurrency=1, max_retries=0)
        _failing(server, 401)
        with pytest.raises(AuditFailedError) as exc:
            probe_t2i(templates, backend, T2IProbeConfig(images_per_descriptor=2), progress=False)
    _assert_failure(exc, "BiasDora T2I", 2, 2, "AuthenticationError")
    assert [r["status"] for r in _rows("t2i_images")] == ["error"] * 2


@pytest.mark.slow
def test_dora_audit_probe_counterfactual_fails_with_one_line(tmp_path):
    """Through ``dora audit`` (subprocess, Dagster): exit 1, one line naming the family and cause."""
    home = tmp_path / "home"
    env = dict(os.environ)
    env.update(
        DORA_HOME=str(home),
        DAGSTER_HOME=str(home / "dagster"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        DBT_SEND_ANONYMOUS_USAGE_STATS="false",
        PYTHONPATH=str(REPO),
        OPENAI_API_KEY=KEY,
    )
    with OpenAIStubServer() as server:
        _failing(server, 401)
        args = [
            sys.executable,
            "-m",
            "orchestration.cli",
            "audit",
            "--family",
            "counterfactual",
            "--backend",
            "openai",
            "--base-url",
            server.base_url,
            "--model",
            "stub-model",
            "--cf-prompts",
            "Describe",
            "--cf-judge-backend",
            "none",
            "--no-progress",
            "--max-error-share",
            "0.5",
        ]
        first = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 1, first.stderr[-3000:]
    lines = [line for line in first.stderr.splitlines() if line.startswith("dora audit:")]
    assert len(lines) == 1, first.stderr[-3000:]
    assert lines[0].startswith(
        "dora audit: error: counterfactual text sets: 12 of 12 calls failed (100% > --max-error-share 0.5): AuthenticationError: Error code: 401"
    ), lines[0]
    assert KEY not in first.stderr and "Traceback" not in first.stderr
    import pyarrow.parquet as pq

    shards = list((home / "landing" / "counterfactual_responses").rglob("*.parquet"))
    statuses = [s for p in shards for s in pq.read_table(p, columns=["status"]).column("status").to_pylist()]
    assert statuses == ["error"] * 12  # landed before the step failed
