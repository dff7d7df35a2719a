"""Batch results land in their own audit exactly once, and the API's other behaviours are met:
every batch file names its audit and file (custom ids, batch metadata), so ``dora batch import``
lands an output only where it belongs and an output already landed lands nothing; a batch or
file gone at the API (404) is closed as lost and its rows sent again; vLLM's ``run-batch``
gets only what it takes; a chat-only endpoint is refused before anything is uploaded;
submission is paced; outputs in any order, ``finalizing``, vLLM's nested error lines and
``finish_reason: "abort"`` are read as the live path reads them.

Against the local Files + Batches server and the vLLM-shaped runner (tests/helpers/batch_server.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from ingestion.errors import BatchError, CompletionsUnsupportedError
from ingestion.landing import read_landing
from models_inference.backends.batch_ledger import load_ledger
from models_inference.backends.batch_requests import BatchOptions
from models_inference.backends.openai_chat import OpenAIChatBackend
from models_inference.probes.biasdora.t2t import T2TProbeConfig, audit_id_for, probe_t2t
from tests.helpers.batch_server import BatchStubServer, offline_run, vllm_run_batch
from tests.test_batch_api import CHAT, TEMPLATES, _answered, _events, _expected_keys, _rows, key_of_line, letter_reply

FLAGS = ["--prompt-style", "chat", "--descriptors", "child", "--settings", "noun", "--letters", "bks", "--runs", "2"]


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")


def _backend(server) -> OpenAIChatBackend:
    return OpenAIChatBackend("stub-model", base_url=server.base_url)


def _wait(**kw) -> BatchOptions:
    return BatchOptions(wait=True, poll_seconds=0.01, **kw)


def _lines(path) -> list[str]:
    """The lines of a JSONL file (split on newlines only)."""
    return [line for line in Path(path).read_text(encoding="utf-8").split("\n") if line]


def _export(main, capsys, out, model: str, *extra) -> tuple[str, list[str]]:
    """Export ``model``'s audit; returns (its audit id, the files written)."""
    assert main(["batch", "export", "--out", str(out), "--model", model, *FLAGS, *extra]) == 0
    printed = capsys.readouterr().out
    (audit,) = re.findall(r"audit (\S+): \d+ requests", printed)
    return audit, re.findall(r"^  (\S+\.jsonl) \(", printed, re.M)


# ----------------------------------------------------------------------------- one audit, one file


def test_two_models_exported_with_the_same_flags_each_output_lands_in_its_own_audit(dora_home, tmp_path, capsys):
    from orchestration.cli import main

    audit_a, (file_a,) = _export(main, capsys, tmp_path / "a", "model-a")
    audit_b, (file_b,) = _export(main, capsys, tmp_path / "b", "model-b")
    assert audit_a != audit_b
    lines = [json.loads(line) for line in _lines(file_a)]
    assert all(len(line["custom_id"]) < 64 for line in lines) and len({line["custom_id"] for line in lines}) == 6
    vllm_run_batch(file_a, tmp_path / "a.out", letter_reply)
    vllm_run_batch(file_b, tmp_path / "b.out", letter_reply)
    # the output of model-a's file, into model-b's audit: refused in one line, nothing landed
    assert main(["batch", "import", str(tmp_path / "a.out"), "--audit", audit_b]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"not of audit {audit_b}" in err and read_landing("t2t_completions").num_rows == 0
    # model-b's requests answered by a runner serving model-a: refused (the answers name their model)
    vllm_run_batch(file_b, tmp_path / "b-by-a.out", letter_reply, model="model-a")
    assert main(["batch", "import", str(tmp_path / "b-by-a.out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "answered by model 'model-a'" in err and "asked 'model-b'" in err
    # each output lands in its own audit, every row once
    assert main(["batch", "import", str(tmp_path / "a.out")]) == 0
    assert main(["batch", "import", str(tmp_path / "b.out")]) == 0
    assert capsys.readouterr().out.count("6 rows landed from 1 file(s)") == 2
    for audit, model in ((audit_a, "model-a"), (audit_b, "model-b")):
        rows = _rows(audit)
        assert len(rows) == 6 and {r["model_id"] for r in rows} == {model} and set(Counter(_answered(rows)).values()) == {1}
    # importing again lands nothing new and says so in one line
    assert main(["batch", "import", str(tmp_path / "a.out")]) == 0
    again = capsys.readouterr().out
    assert again.count("\n") == 1 and "landed already (6 rows" in again and len(_rows(audit_a)) == 6
    # one output holding the lines of two files is refused: an output answers one file
    (tmp_path / "both.out").write_text((tmp_path / "a.out").read_text() + (tmp_path / "b.out").read_text())
    assert main(["batch", "import", str(tmp_path / "both.out")]) == 2
    assert "holds the answers of 2 exported files" in capsys.readouterr().err


def test_an_old_output_imported_again_after_a_newer_export_duplicates_and_closes_nothing(dora_home, tmp_path, capsys):
    from orchestration.cli import main

    audit, (first,) = _export(main, capsys, tmp_path / "1", "stub-model")
    failing = {json.loads(line)["custom_id"] for line in _lines(first)[:2]}
    offline_run(first, tmp_path / "1.out", letter_reply, status=lambda cid: 500 if cid in failing else 200)
    assert main(["batch", "import", str(tmp_path / "1.out")]) == 0
    capsys.readouterr()
    _, (second,) = _export(main, capsys, tmp_path / "2", "stub-model")  # the 2 failed requests, again
    assert len(_lines(second)) == 2
    assert main(["batch", "import", str(tmp_path / "1.out")]) == 0  # the old output, once more
    assert "landed already" in capsys.readouterr().out
    assert [e.state for e in load_ledger(audit).entries] == ["closed", "exported"]  # the newer export stays open
    errors = [r for r in _rows(audit) if r["parse_status"] == "error"]
    assert len(errors) == 2  # not landed twice
    offline_run(second, tmp_path / "2.out", letter_reply)
    assert main(["batch", "import", str(tmp_path / "2.out")]) == 0
    assert "2 rows landed from 1 file(s)" in capsys.readouterr().out
    assert set(_answered(_rows(audit)).values()) == {1} and len(_answered(_rows(audit))) == 6


# ----------------------------------------------------------------------------- lost files and batches


def test_an_expired_output_file_closes_the_entry_as_lost_and_its_rows_are_sent_again(dora_home, api_key, capsys):
    with BatchStubServer() as server:
        server.chat_reply = letter_reply
        first = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=BatchOptions())
        assert first.pending == 12
        server.expire_outputs = True  # gone by the time the batch is landed (OpenAI deletes batch files after 30 days)
        second = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=BatchOptions())
        assert len(second.lost) == 1 and "expired or was deleted" in second.lost[0] and "closed as lost" in second.lost[0]
        assert second.generated == 0 and second.not_run == 12 and second.pending == 12  # sent again, in a new batch
        assert "closed as lost" in capsys.readouterr().err
        server.expire_outputs = False
        third = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=_wait())
        assert len(server.created) == 2
    entries = load_ledger(first.audit_id).entries
    assert [e.state for e in entries] == ["closed", "closed"] and entries[0].error.startswith("lost: BiasDora T2T: file ")
    assert third.generated == 12 and set(_answered(_rows(first.audit_id)).values()) == {1} and len(_rows(first.audit_id)) == 12
    assert _events(first.audit_id)[-1] == "finished"


def test_a_batch_unknown_to_the_key_is_lost_and_dora_batches_cancel_closes_a_stuck_entry(dora_home, api_key, capsys):
    from orchestration.cli import main

    with BatchStubServer() as server:
        server.chat_reply = letter_reply
        first = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=BatchOptions(max_requests=6))
        one, two = server.created
        server.forget(one)  # gone: another key's batch, or deleted
        assert main(["batches", first.audit_id, "--cancel"]) == 0
        out = capsys.readouterr().out
        assert "closed (lost: BiasDora T2T: batch batch-" in out and "unknown to this API key" in out and f"batch {two}: cancelling" in out
        entries = load_ledger(first.audit_id).entries
        assert (entries[0].state, entries[1].state) == ("closed", "submitted")
        server.forget(two)  # and the second is lost while the run polls it
        again = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=_wait(max_requests=6))
        assert len(again.lost) == 1 and "is unknown to this API key" in again.lost[0]
    assert again.generated == 12 and set(_answered(_rows(first.audit_id)).values()) == {1} and len(_rows(first.audit_id)) == 12


# ----------------------------------------------------------------------------- what each runner and endpoint takes


def test_vllm_export_refuses_completion_requests_in_one_line_and_openai_runner_writes_them(dora_home, tmp_path, capsys):
    from orchestration.cli import main

    flags = ["--model", "stub-model", *FLAGS]
    flags[flags.index("chat")] = "completion"
    assert main(["batch", "export", "--out", str(tmp_path / "v"), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "vllm run-batch does not take /v1/completions" in err and "nothing was written" in err
    assert not (tmp_path / "v").exists()
    assert main(["batch", "export", "--out", str(tmp_path / "o"), "--runner", "openai", *flags]) == 0
    out = capsys.readouterr().out
    (path,) = re.findall(r"^  (\S+\.jsonl) \(6 requests, /v1/completions\)", out, re.M)
    assert "vllm run-batch" not in out
    with pytest.raises(ValueError, match="url"):  # what vLLM's run-batch does with such a file
        vllm_run_batch(path, tmp_path / "o.out", letter_reply)


def test_vllm_chat_requests_carry_max_tokens_and_its_nested_error_lines_keep_their_message(dora_home, tmp_path, capsys):
    from orchestration.cli import main

    audit, (path,) = _export(main, capsys, tmp_path / "x", "stub-model")
    assert {("max_tokens" in json.loads(line)["body"]) for line in _lines(path)} == {True}
    vllm_run_batch(path, tmp_path / "x.out", letter_reply, chat_template=False)  # a model without a chat template
    assert main(["batch", "import", str(tmp_path / "x.out")]) == 0
    rows = _rows(audit)
    assert len(rows) == 6 and {r["parse_status"] for r in rows} == {"error"}
    assert {r["raw_output"] for r in rows} == {
        "batch request failed: 400: As of transformers v4.44, default chat template is no longer allowed, "
        "so you must provide a chat template if the tokenizer does not define one."
    }


def test_batch_mode_refuses_completion_prompts_to_a_chat_only_endpoint_before_uploading(dora_home, api_key):
    cfg = T2TProbeConfig(runs=1, letters="b", prompt_style="completion")
    with BatchStubServer() as server:
        server.chat_only = True
        with pytest.raises(CompletionsUnsupportedError, match=r"has no text-completions endpoint .*\(nothing was uploaded\)"):
            probe_t2t(TEMPLATES, _backend(server), cfg, progress=False, batch=_wait())
        assert ("POST", "/v1/files") not in server.calls and server.created == []


# ----------------------------------------------------------------------------- pacing and failures


def test_submission_is_paced_and_a_token_limit_failure_requeues_the_file(dora_home, api_key):
    with BatchStubServer() as server:
        server.chat_reply, server.token_limit_failures = letter_reply, 2
        summary = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=_wait(max_requests=4, max_open=1))
        statuses = [server.batches[b]["status"] for b in server.created]
        assert server.most_open == 1 and statuses == ["failed", "failed", "completed", "completed", "completed"]
        assert [server.batches[b]["errors"]["data"][0]["code"] for b in server.created[:2]] == ["token_limit_exceeded"] * 2
    assert (summary.requeued, summary.generated, summary.statuses) == (2, 12, Counter({"ok": 12}))
    assert [len(e.failed_batches) for e in load_ledger(summary.audit_id).entries] == [2, 0, 0]
    assert set(_answered(_rows(summary.audit_id)).values()) == {1} and _events(summary.audit_id)[-1] == "finished"


def test_one_run_reports_every_batch_failed_as_a_whole(dora_home, api_key):
    with BatchStubServer() as server:
        server.chat_reply, server.outcomes = letter_reply, ["failed", "completed", "failed"]
        with pytest.raises(BatchError) as exc:
            probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=_wait(max_requests=4))
        first, _, third = server.created
    message = str(exc.value)
    assert "\n" not in message and f"batch {first} (4 requests" in message and f"batch {third} (4 requests" in message
    assert message.count("invalid_json_line") == 2 and message.endswith("none of their requests ran: fix the cause, then run the same command again")
    audit_id = audit_id_for(_backend(server), CHAT.resolved(_backend(server)), TEMPLATES)
    assert len(_rows(audit_id)) == 4  # the batch that completed landed


# ----------------------------------------------------------------------------- reading outputs


def test_finalizing_and_shuffled_outputs_land_each_answer_on_its_own_row(dora_home, api_key):
    with BatchStubServer() as server:
        server.chat_reply, server.finalizing, server.shuffle = letter_reply, True, True
        summary = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=_wait())
        seen = [s for b in server.created for s in [server.batches[b]["finalizing_at"]]]
        order = [key_of_line(line["custom_id"]) for line in server.lines_of(server.created[0])]
    assert all(seen) and len(order) == 12
    rows = _rows(summary.audit_id)
    assert set(_answered(rows)) == _expected_keys() and {(r["letter"], r["word"]) for r in rows} == {("b", "bind"), ("k", "kind"), ("s", "sind")}


def test_finish_reason_abort_is_read_as_the_live_path_reads_it():
    from models_inference.backends.batch_requests import CHAT_URL, result_of

    body = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "[kind]"}, "finish_reason": "abort"}],
    }
    res = result_of({"custom_id": "x", "response": {"status_code": 200, "body": body}}, CHAT_URL, OpenAIChatBackend("m"))
    assert (res.text, res.error, res.finished) == ("[kind]", None, True)


def test_an_output_of_a_file_exported_before_ids_named_their_file_still_lands(dora_home, tmp_path, capsys):
    from orchestration.cli import main

    audit, (path,) = _export(main, capsys, tmp_path / "x", "stub-model")
    (entry,) = load_ledger(audit).entries
    lines = [json.loads(line) for line in _lines(path)]
    with open(path, "w") as fh:  # the line format of earlier versions: custom_id = the row's resume key
        fh.writelines(json.dumps({**line, "custom_id": entry.keys[n]}) + "\n" for n, line in enumerate(lines))
    offline_run(path, tmp_path / "x.out", letter_reply)
    assert main(["batch", "import", str(tmp_path / "x.out")]) == 0
    assert "6 rows landed from 1 file(s)" in capsys.readouterr().out
    assert set(_answered(_rows(audit)).values()) == {1} and len(_rows(audit)) == 6


def test_chat_requests_to_openai_carry_max_completion_tokens_live_and_in_batch(monkeypatch):
    from models_inference.backends.base import GenerationRequest, RenderedPrompt, SamplingParams
    from models_inference.backends.batch_requests import request_body
    from models_inference.backends.server_caps import token_limit_field
    from tests.helpers.openai_server import OpenAIStubServer

    assert token_limit_field(None) == token_limit_field("https://api.openai.com/v1") == "max_completion_tokens"
    assert token_limit_field("http://127.0.0.1:8000/v1") == "max_tokens"  # llama.cpp, vLLM, ...: the field they all take
    req = GenerationRequest(RenderedPrompt("chat", "Hi"), 3, 7)
    with OpenAIStubServer() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)  # the default endpoint, as the client resolves it: OpenAI's
        OpenAIChatBackend("gpt-4o").generate([req])
        OpenAIChatBackend("gpt-4o", base_url=server.base_url).generate([req])
        sent = [r["json"] for r in server.requests]
    assert [(s.get("max_completion_tokens"), s.get("max_tokens")) for s in sent] == [(7, None), (None, 7)]
    assert request_body(OpenAIChatBackend("gpt-4o"), req, SamplingParams())[1]["max_completion_tokens"] == 7


def test_a_batch_servers_vllm_shaped_error_lines_land_with_their_message(dora_home, api_key):
    with BatchStubServer() as server:
        server.chat_reply, server.error_shape = letter_reply, "vllm"
        server.line_status = lambda cid, body: 503 if "[s__]" in body["messages"][-1]["content"] else 200
        summary = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, max_error_share=None, batch=_wait(retries=0))
    rows = _rows(summary.audit_id)
    errors = [r["raw_output"] for r in rows if r["parse_status"] == "error"]
    assert len(rows) == 12 and errors == ["batch request failed: 503: scripted 503"] * 4  # not "None: None"
