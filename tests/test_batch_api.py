"""Batch mode (``--api-batch``): the OpenAI Batch API and the same JSONL for offline runners,
against a local Files + Batches server on 127.0.0.1 (tests/helpers/batch_server.py).

A paper-shaped T2T audit splits into files of at most 50,000 requests; a batch run lands every
key exactly once through partial errors, an expired batch (its unrun lines retried), a batch
the API fails as a whole (one line naming the cause), cancellation, and kills at each stage
(between upload and creation, between creation and its record, before landing, while
landing); the judge and the counterfactual text sets run in batch mode; ``dora audit
--dry-run --api-batch`` prices the steps; ``dora batches`` lists and cancels; export / import
round-trips an audit's requests through the JSONL format.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from ingestion.errors import BatchError
from ingestion.landing import read_landing
from models_inference.backends.base import GenerationRequest, RenderedPrompt, SamplingParams
from models_inference.backends.batch_ledger import load_ledger
from models_inference.backends.batch_requests import (
    CHAT_URL,
    COMPLETIONS_URL,
    MAX_FILE_BYTES,
    BatchOptions,
    key_of,
    plan_files,
    request_body,
    result_of,
    split_sizes,
)
from models_inference.backends.openai_chat import OpenAIChatBackend
from models_inference.probes.biasdora.t2t import T2TProbeConfig, T2TTemplate, audit_id_for, probe_t2t
from tests.helpers.batch_server import BatchStubServer, offline_run
from tests.helpers.dora_cli import REPO

TEMPLATES = [
    T2TTemplate("singular", "alcoholic person", "disability", "An alcoholic person is"),
    T2TTemplate("noun", "child", "age", "This child is a/an"),
]
#: 2 templates x 3 letters x 2 runs
CHAT = T2TProbeConfig(runs=2, letters="bks", prompt_style="chat")


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")


def letter_reply(body: dict) -> str:
    """A chat answer "[<letter>ind]" to a T2T prompt ("... [k__]. Answer : "), "4" otherwise."""
    found = re.search(r"\[(\w)__\]", body["messages"][-1]["content"])
    return f"[{found.group(1)}ind]" if found else "4"


def _backend(server) -> OpenAIChatBackend:
    return OpenAIChatBackend("stub-model", base_url=server.base_url)


def _wait(**kw) -> BatchOptions:
    return BatchOptions(wait=True, poll_seconds=0.01, **kw)


def _rows(audit_id: str) -> list[dict]:
    return read_landing("t2t_completions", filters={"audit_id": audit_id}).to_pylist()


def _answered(rows: list[dict]) -> Counter:
    """Rows that are answers (not 'error'), per resume key."""
    return Counter((r["setting"], r["descriptor"], r["descriptor_row"], r["letter"], r["run"]) for r in rows if r["parse_status"] != "error")


def _expected_keys(config: T2TProbeConfig = CHAT) -> set:
    return {(t.setting, t.descriptor, 1, c, r) for t in TEMPLATES for c in config.letters for r in range(1, config.runs + 1)}


def key_of_line(cid: str) -> list:
    """The resume key of a request line's ``custom_id`` (``<ledger tag>-<file>-<line>``), read
    back from the ledger that wrote it."""
    from models_inference.backends.batch_ledger import ledger_names
    from models_inference.backends.batch_lines import parse_custom_id

    _, entry_id, n = parse_custom_id(cid)
    for name in ledger_names():
        for entry in load_ledger(name).entries:
            if entry.id == entry_id:
                return json.loads(entry.keys[n])
    raise KeyError(cid)


def _events(audit_id: str) -> list[str]:
    rows = read_landing("audits", filters={"audit_id": audit_id}).to_pylist()
    return [e["status"] for e in sorted(rows, key=lambda e: e["event_at"])]


# ----------------------------------------------------------------------------- files within the limits


def test_a_paper_sized_key_set_splits_into_files_within_the_limits():
    n = 529_620  # the paper's T2T audit: 2,037 probe rows x 26 letters x 10 runs
    files = split_sizes([690] * n)
    assert [b - a for a, b in files] == [50_000] * 10 + [29_620]
    assert files[0][0] == 0 and files[-1][1] == n and all(files[i][1] == files[i + 1][0] for i in range(len(files) - 1))
    assert len(split_sizes([690] * n, max_requests=10_000)) == 53  # --api-batch-max-requests 10000
    assert [b - a for a, b in split_sizes([1_000_000] * 450)] == [200, 200, 50]  # 200 MB binds before 50,000
    with pytest.raises(BatchError, match=r"request 3 is 300,000,000 bytes, more than the 200,000,000"):
        split_sizes([1, 1, 1, 300_000_000])


@pytest.mark.slow  # builds the 529,620 request lines of the paper's audit (~7 s)
def test_the_paper_scale_t2t_audit_plans_eleven_files_holding_every_key_once():
    from ingestion.biasdora.templates import curated_t2t_templates
    from models_inference.probes.biasdora.t2t import select_templates, t2t_batch_work

    templates = select_templates(curated_t2t_templates(), per_dimension=0)
    work = t2t_batch_work(templates, OpenAIChatBackend("gpt-4o"), T2TProbeConfig(runs=10))
    files = plan_files(work, work.planned, BatchOptions(), keep_lines=False)
    assert len(work.planned) == 529_620
    assert [f.requests for f in files] == [50_000] * 10 + [29_620]
    assert all(f.endpoint == CHAT_URL and 0 < f.bytes < MAX_FILE_BYTES for f in files)
    keys = [k for f in files for k in f.keys]
    assert len(set(keys)) == 529_620 and {key_of(k) for k in keys} == {work.key(i) for i in work.planned}


def test_requests_carry_the_live_fields_and_replies_are_read_as_live():
    from models_inference.probes.biasdora.judge import RATING_CHOICES
    from models_inference.probes.biasdora.prompts import render_judge_prompt

    backend = OpenAIChatBackend("gpt-4o")
    req = GenerationRequest(render_judge_prompt("child", "lazy"), 2**40 + 5, 10, choices=RATING_CHOICES)
    url, body = request_body(backend, req, SamplingParams(0.7, 0.95), constraint="json_schema", choices=RATING_CHOICES)
    assert url == CHAT_URL and body["response_format"]["json_schema"]["schema"]["properties"]["answer"]["enum"] == list("12345")
    # OpenAI's current field: its reasoning models refuse max_tokens
    assert "max_tokens" not in body and (body["max_completion_tokens"], body["seed"], body["top_p"], body["logprobs"], body["top_logprobs"]) == (
        24,
        (2**40 + 5) % 2**31,
        0.95,
        True,
        20,
    )
    assert request_body(backend, req, SamplingParams(0.7, 0.95), token_field="max_tokens")[1]["max_tokens"] == 10  # a server that needs it
    reply = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": '{"answer": "4"}'},
                "logprobs": {
                    "content": [
                        {
                            "token": "4",
                            "logprob": -0.1,
                            "bytes": None,
                            "top_logprobs": [{"token": "4", "logprob": -0.1, "bytes": None}, {"token": "3", "logprob": -2.4, "bytes": None}],
                        }
                    ]
                },
            }
        ],
    }
    res = result_of(
        {"custom_id": "x", "response": {"status_code": 200, "body": reply}}, url, backend, constraint="json_schema", choices=RATING_CHOICES
    )
    assert res.text == "4" and res.error is None and res.choice_logprobs == pytest.approx({"4": -0.1, "3": -2.4})
    assert result_of({"custom_id": "x", "response": None, "error": {"code": "batch_expired", "message": "late"}}, url, backend) is None
    failed = result_of(
        {
            "custom_id": "x",
            "response": {"status_code": 429, "body": {"error": {"message": "Rate limit for key sk-abcdefghijklmnopqrstuvwxyz0123456789"}}},
        },
        url,
        backend,
    )
    assert failed.error == "HTTP 429: Rate limit for key ***"
    broken = result_of({"custom_id": "x", "response": {"status_code": 200, "body": {"choices": []}}}, url, backend)
    assert broken.error and "\n" not in broken.error
    url, body = request_body(backend, GenerationRequest(RenderedPrompt("completion", "An alcoholic person is k"), 7, 6), SamplingParams(0.7, 1.0))
    assert url == COMPLETIONS_URL and body == {
        "model": "gpt-4o",
        "temperature": 0.7,
        "max_tokens": 6,
        "seed": 7,
        "prompt": "An alcoholic person is k",
    }


# ----------------------------------------------------------------------------- batch runs


def test_a_batch_row_is_the_row_one_request_per_row_lands(dora_home, api_key, tmp_path, monkeypatch):
    """Completion style (``/v1/completions``): the same rows, seeds, prompts and parses either way."""
    from tests.helpers.openai_server import OpenAIStubServer

    cfg = T2TProbeConfig(runs=2, letters="bk", prompt_style="completion")
    with OpenAIStubServer() as live:
        live.completion_reply = lambda req: "ind, and" if req["prompt"].endswith("k") else "umbling"
        probe_t2t(TEMPLATES, OpenAIChatBackend("stub-model", base_url=live.base_url, batch_completions=False), cfg, progress=False)
        sent_live = sorted((r["json"]["prompt"], r["json"]["seed"]) for r in live.requests)
    live_rows = read_landing("t2t_completions").to_pylist()
    monkeypatch.setenv("DORA_HOME", str(tmp_path / "batch_home"))
    with BatchStubServer() as server:
        server.completion_reply = lambda body: "ind, and" if body["prompt"].endswith("k") else "umbling"
        summary = probe_t2t(TEMPLATES, _backend(server), cfg, progress=False, batch=_wait())
        sent = sorted((line["body"]["prompt"], line["body"]["seed"]) for b in server.created for line in server.lines_of(b))
        assert {line["url"] for b in server.created for line in server.lines_of(b)} == {COMPLETIONS_URL}
    batch_rows = read_landing("t2t_completions").to_pylist()
    assert sent == sent_live and len(sent) == 8
    drop = ("generated_at",)
    assert sorted(({k: v for k, v in r.items() if k not in drop} for r in batch_rows), key=str) == sorted(
        ({k: v for k, v in r.items() if k not in drop} for r in live_rows), key=str
    )
    assert summary.statuses == {"ok": 8} and {r["word"] for r in batch_rows} == {"kind", "bumbling"}


def test_partial_errors_and_an_expired_batch_are_retried_and_every_key_lands_once(dora_home, api_key):
    cfg = T2TProbeConfig(runs=4, letters="bks", prompt_style="chat")  # 24 rows: files of 10, 10, 4
    failed_once: set[tuple] = set()

    def status(cid: str, body: dict) -> int:  # every 'k' run 1 fails the first time it runs
        key = tuple(key_of_line(cid))
        if key[3] == "k" and key[4] == 1 and key not in failed_once:
            failed_once.add(key)
            return 500
        return 200

    with BatchStubServer() as server:
        server.chat_reply, server.line_status = letter_reply, status
        server.outcomes = ["completed", "expired"]  # the second file expires with its first half run
        summary = probe_t2t(TEMPLATES, _backend(server), cfg, progress=False, batch=_wait(max_requests=10))
        inputs = [[tuple(key_of_line(line["custom_id"])) for line in server.lines_of(b)] for b in server.created]
        states = [server.batches[b]["status"] for b in server.created]
    assert [len(i) for i in inputs] == [10, 10, 4, 6, 1] and states == ["completed", "expired", *["completed"] * 3]
    # the expired batch's 5 unrun requests and the first failure went into the 4th batch; the
    # second failure (a request the expired batch never ran) into the 5th
    assert set(inputs[1][5:]) < set(inputs[3]) and inputs[0][4] in inputs[3] and inputs[4] == [inputs[1][6]]
    rows = _rows(summary.audit_id)
    answered = _answered(rows)
    assert set(answered) == _expected_keys(cfg) and set(answered.values()) == {1}
    errors = [r for r in rows if r["parse_status"] == "error"]
    assert len(errors) == 2 and {r["raw_output"] for r in errors} == {"HTTP 500: scripted 500"}
    assert (summary.generated, summary.not_run, summary.statuses) == (26, 5, Counter({"ok": 24, "error": 2}))
    ledger = load_ledger(summary.audit_id)
    assert [(e.state, e.landed, e.not_run) for e in ledger.entries] == [
        ("closed", 10, 0),
        ("closed", 5, 5),
        ("closed", 4, 0),
        ("closed", 6, 0),
        ("closed", 1, 0),
    ]
    assert _events(summary.audit_id) == ["started", "finished"]


def test_a_batch_the_api_fails_as_a_whole_fails_the_audit_in_one_line(dora_home, api_key):
    with BatchStubServer() as server:
        server.chat_reply, server.max_requests = letter_reply, 5  # the server takes 5 requests per file
        with pytest.raises(BatchError) as exc:
            probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=_wait(max_requests=8))
        message = str(exc.value)
        assert "\n" not in message and re.fullmatch(
            r"BiasDora T2T: batch batch-\d+ \(8 requests, file b[0-9a-f]{16}\.jsonl\) failed as a whole: too_many_tasks: "
            r"The batch input file has 8 requests; the limit is 5 requests per batch\.; none of its requests ran: fix the "
            r"cause, then run the same command again",
            message,
        ), message
        audit_id = audit_id_for(_backend(server), CHAT.resolved(_backend(server)), TEMPLATES)
        # the run lands the other batch (4 requests) before it names the failed one
        assert _events(audit_id) == ["started", "failed"] and len(_rows(audit_id)) == 4
        # within the server's limit the same audit lands: the 8 again as 5 + 3
        summary = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=_wait(max_requests=5))
        assert [len(server.lines_of(b)) for b in server.created] == [8, 4, 5, 3]
    assert summary.statuses == {"ok": 8} and set(_answered(_rows(audit_id)).values()) == {1} and len(_rows(audit_id)) == 12
    assert _events(audit_id)[-1] == "finished"


def test_without_wait_a_run_returns_and_dora_batches_lists_and_cancels(dora_home, api_key, capsys):
    from orchestration.cli import main

    with BatchStubServer() as server:
        server.chat_reply, server.polls_to_finish = letter_reply, 3
        first = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=BatchOptions(max_requests=6))
        assert (first.generated, first.pending, first.files, len(server.created)) == (0, 12, 2, 2)
        assert _events(first.audit_id) == ["started"] and _rows(first.audit_id) == []
        capsys.readouterr()
        assert main(["batches", first.audit_id, "--format", "json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert [(r["batch"], r["state"], r["status"], r["requests"]) for r in listed] == [(b, "submitted", "in_progress", 6) for b in server.created]
        assert main(["batches", first.audit_id, "--cancel"]) == 0
        assert "cancelling (6 requests)" in capsys.readouterr().out
        assert [server.batches[b]["status"] for b in server.created] == ["cancelling", "cancelling"]
        # the next run lands what the cancelled batches ran (3 of 6 each) and sends the rest in a new batch
        second = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=BatchOptions(max_requests=6))
        assert (second.generated, second.not_run, second.pending, len(server.created)) == (6, 6, 6, 3)
        third = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=_wait(max_requests=6))
        assert (third.generated, third.pending, len(server.created)) == (6, 0, 3)
        assert probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=_wait()).generated == 0
        assert len(server.created) == 3  # nothing missing: nothing sent
    assert set(_answered(_rows(first.audit_id)).values()) == {1} and len(_rows(first.audit_id)) == 12
    assert main(["batches", "t2t-nope"]) == 2
    assert "no batch ledger for 't2t-nope'" in capsys.readouterr().err


def test_a_run_killed_while_landing_lands_that_batch_again_into_the_same_shard(dora_home, api_key, monkeypatch):
    import models_inference.backends.batch_api as batch_api

    landed = batch_api.write_shard

    def killed(*args, **kwargs):
        landed(*args, **kwargs)
        raise KeyboardInterrupt  # after the shard, before the ledger closes its entry

    failed_once: set[tuple] = set()

    def status(cid: str, body: dict) -> int:  # the 's' requests fail the first time they run
        key = tuple(key_of_line(cid))
        if key[3] == "s" and key not in failed_once:
            failed_once.add(key)
            return 500
        return 200

    with BatchStubServer() as server:
        server.chat_reply, server.line_status = letter_reply, status
        monkeypatch.setattr(batch_api, "write_shard", killed)
        with pytest.raises(KeyboardInterrupt):
            probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, max_error_share=None, batch=_wait(max_requests=6, retries=0))
        audit_id = audit_id_for(_backend(server), CHAT.resolved(_backend(server)), TEMPLATES)
        assert [e.state for e in load_ledger(audit_id).entries] == ["landing", "submitted"] and len(_rows(audit_id)) == 6
        monkeypatch.setattr(batch_api, "write_shard", landed)
        probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, max_error_share=None, batch=_wait(max_requests=6, retries=0))
        assert [len(server.lines_of(b)) for b in server.created] == [6, 6, 4]  # the 4 failed requests sent once more
    rows = _rows(audit_id)
    assert set(_answered(rows)) == _expected_keys() and set(_answered(rows).values()) == {1}
    errors = Counter((r["descriptor"], r["letter"], r["run"]) for r in rows if r["parse_status"] == "error")
    assert len(errors) == 4 and set(errors.values()) == {1}  # the first batch's error rows landed once, not twice


CHILD = """
import sys
from models_inference.backends.batch_api import BatchOptions
from models_inference.backends.text import OpenAIChatBackend
from models_inference.probes.biasdora.t2t import T2TProbeConfig, T2TTemplate, probe_t2t
templates = [T2TTemplate("singular", "alcoholic person", "disability", "An alcoholic person is"),
           T2TTemplate("noun", "child", "age", "This child is a/an")]
probe_t2t(templates, OpenAIChatBackend("stub-model", base_url=sys.argv[1]), T2TProbeConfig(runs=2, letters="bks", prompt_style="chat"),
              progress=False, batch=BatchOptions(max_requests=5, wait=True, poll_seconds=0.02))
"""


@pytest.mark.slow  # a process killed at each stage
@pytest.mark.parametrize(
    "method,path,when,state",
    [
        ("POST", "/v1/batches", "before", "uploaded"),  # uploaded, killed before the batch exists
        ("POST", "/v1/batches", "after", "uploaded"),  # the batch exists, killed before its id was recorded
        ("GET", "/v1/batches/", "before", "submitted"),  # recorded, killed before anything landed
    ],
    ids=["upload-create", "create-record", "create-land"],
)
def test_a_run_killed_at_each_stage_then_run_again_submits_each_file_once(dora_home, api_key, tmp_path, method, path, when, state):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    with BatchStubServer() as server:
        server.chat_reply = letter_reply
        server.hold(method, path, when)
        proc = subprocess.Popen(
            [sys.executable, str(script), server.base_url],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            assert server.held.wait(60), proc.stderr.read() if proc.poll() is not None else "not held"
        finally:
            proc.kill()
            proc.wait(30)
        server.release()
        audit_id = audit_id_for(_backend(server), CHAT.resolved(_backend(server)), TEMPLATES)
        assert [e.state for e in load_ledger(audit_id).entries] == [state, "prepared", "prepared"]
        summary = probe_t2t(TEMPLATES, _backend(server), CHAT, progress=False, batch=_wait(max_requests=5))
        inputs = [server.batches[b]["input_file_id"] for b in server.created]
        sent = [line["custom_id"] for b in server.created for line in server.lines_of(b)]
    assert len(inputs) == len(set(inputs)) == 3 and len(sent) == len(set(sent)) == 12  # no file, no row sent twice
    assert summary.statuses == {"ok": 12}
    rows = _rows(audit_id)
    assert len(rows) == 12 and set(_answered(rows)) == _expected_keys() and set(_answered(rows).values()) == {1}


# ----------------------------------------------------------------------------- the judge, the counterfactual text sets


def test_the_judge_runs_in_batch_mode_each_judgement_once(dora_home, api_key):
    from models_inference.probes.biasdora.judge import judge_associations, load_judge

    words = ["lazy", "kind", "loud", "smart", "rude", "calm"]
    assocs = [
        {
            "audit_id": "t2t-a",
            "model_id": "m",
            "model_version": "v",
            "modality": "t2t",
            "setting": "singular",
            "descriptor": "child",
            "word": w,
            "judge_target": "A child",
            "score_pool": "fisher",
        }
        for w in words
    ]
    with BatchStubServer() as server:
        server.chat_reply = lambda body: "4" if re.search(r"\b(lazy|rude|loud)\b", body["messages"][-1]["content"]) else "2"
        judge = load_judge("openai", "stub-judge", base_url=server.base_url, answer_mode="free")
        summary = judge_associations(assocs, judge, runs=2, progress=False, batch=_wait(max_requests=5))
        lines = [line for b in server.created for line in server.lines_of(b)]
        again = judge_associations(assocs, judge, runs=2, progress=False, batch=_wait(max_requests=5))
        assert len(server.created) == 3  # 12 judgements in files of 5, 5, 2; nothing sent again
    assert (summary.generated, summary.ratings, again.generated, again.already_landed) == (12, Counter({4: 6, 2: 6}), 0, 12)
    assert {(b["max_tokens"], b["temperature"], b["top_p"], b["logprobs"]) for b in (line["body"] for line in lines)} == {(10, 0.7, 0.95, True)}
    rows = read_landing("judge_ratings").to_pylist()
    assert Counter((r["word"], r["repeat"]) for r in rows) == Counter({(w, k): 1 for w in words for k in (1, 2)})
    assert {r["word"]: r["rating"] for r in rows} == {w: 4 if w in ("lazy", "rude", "loud") else 2 for w in words}


def test_counterfactual_text_sets_run_in_batch_mode(dora_home, api_key):
    from models_inference.probes.counterfactual.probe import CounterfactualProbeConfig, probe_text_sets
    from models_inference.probes.counterfactual.sets import sample_sets

    sets = sample_sets(["race_gender"], occupations=["doctor"], sets_per_occupation=1)  # 12 members
    cfg = CounterfactualProbeConfig(prompts=["Describe", "Hiring"], runs=1, max_new_tokens=8)
    with BatchStubServer() as server:
        server.chat_reply = lambda body: "7" if body["messages"][-1]["content"].endswith("Rating:") else "A doctor at work."
        summary = probe_text_sets(sets, _backend(server), cfg, progress=False, batch=_wait(max_requests=10))
        assert [len(server.lines_of(b)) for b in server.created] == [10, 10, 4]
    rows = read_landing("counterfactual_responses").to_pylist()
    assert (summary.generated, summary.pending, dict(summary.statuses)) == (24, 0, {"ok": 24})
    assert Counter((r["set_id"], r["a1"], r["a2"], r["prompt_label"]) for r in rows).most_common(1)[0][1] == 1 and len(rows) == 24
    assert {r["parsed_value"] for r in rows if r["prompt_label"] == "Hiring"} == {7.0}
    assert _events(summary.audit_id) == ["started", "finished"]


# ----------------------------------------------------------------------------- dry run, export / import


def test_dry_run_prices_the_batch_steps(dora_home, capsys):
    from orchestration.cli import main

    flags = [
        "audit",
        "--dry-run",
        "--family",
        "biasdora",
        "--api-batch",
        "--backend",
        "openai",
        "--model",
        "gpt-4o",
        "--prompt-style",
        "chat",
        "--descriptors",
        "child",
        "--settings",
        "noun",
        "--letters",
        "bks",
        "--runs",
        "3",
        "--api-batch-max-requests",
        "4",
        "--judge-backend",
        "openai",
    ]
    assert main(flags) == 0
    out = capsys.readouterr().out
    from models_inference.probes.biasdora.prompts import render_t2t_prompt

    prompt = render_t2t_prompt("This child is a/an", "noun", "b", "chat", answer_cue=True)
    per_request = sum(math.ceil(len(p) / 4) for p in (prompt.system, prompt.text)) + 3 * 2 + 3  # letters do not change the length
    line = next(li for li in out.splitlines() if li.startswith("BiasDora T2T "))
    assert line.split()[2:] == ["3", "9", f"{9 * per_request:,}", f"{9 * 100:,}"], out  # 9 requests in files of 4, 4, 1
    assert "estimated (~4 characters per token" in out and "no tokenizer of gpt-4o here" in out
    assert re.search(r"^judge +\? +\?", out, re.M) and "--judge-runs 1" in out


@pytest.mark.slow  # loads transformers for the tokenizer (~5 s)
def test_dry_run_counts_prompt_tokens_with_the_models_tokenizer(dora_home, tmp_path, capsys):
    from orchestration.cli import main
    from tests.helpers.tiny_models import word_tokenizer

    tokenizer, _ = word_tokenizer(["this", "child", "is", "a", "an", "b", "k"])
    tokenizer.save_pretrained(tmp_path / "served")
    assert (
        main(
            [
                "audit",
                "--dry-run",
                "--family",
                "biasdora",
                "--api-batch",
                "--backend",
                "openai",
                "--model",
                str(tmp_path / "served"),
                "--prompt-style",
                "completion",
                "--descriptors",
                "child",
                "--settings",
                "noun",
                "--letters",
                "bk",
                "--runs",
                "5",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    from models_inference.probes.biasdora.prompts import render_t2t_prompt

    prompt = render_t2t_prompt("This child is a/an", "noun", "b", "completion").as_text()  # "This child is a b"
    words = len(re.findall(r"\w+|[^\w\s]+", prompt))  # the tokenizer's whitespace pre-tokenizer: 5 tokens
    line = next(li for li in out.splitlines() if li.startswith("BiasDora T2T "))
    assert line.split()[2:] == ["1", "10", f"{10 * words}", f"{10 * 6}"] and "counted with" in out, out


def test_export_then_import_lands_every_key_once(dora_home, tmp_path, capsys):
    from orchestration.cli import main

    flags = [
        "--model",
        "stub-model",
        "--prompt-style",
        "chat",
        "--descriptors",
        "child",
        "--settings",
        "noun",
        "--letters",
        "bks",
        "--runs",
        "2",
        "--api-batch-max-requests",
        "4",
    ]
    assert main(["batch", "export", "--out", str(tmp_path / "out"), *flags]) == 0
    out = capsys.readouterr().out
    files = re.findall(r"^  (\S+\.jsonl) \((\d+) requests", out, re.M)
    assert [int(n) for _, n in files] == [4, 2] and "vllm run-batch -i" in out
    first, second = (path for path, _ in files)
    dropped = json.loads(open(first).readline())["custom_id"]
    assert offline_run(first, tmp_path / "1.out", letter_reply, skip=lambda cid: cid == dropped) == 3
    assert main(["batch", "import", str(tmp_path / "1.out")]) == 0
    assert "3 rows landed from 1 file(s)" in capsys.readouterr().out
    assert main(["batch", "import", str(tmp_path / "1.out")]) == 0  # the same output again lands nothing
    again = capsys.readouterr().out
    assert "landed already (3 rows" in again and again.strip().endswith("nothing landed again") and again.count("\n") == 1
    offline_run(second, tmp_path / "2.out", letter_reply)
    assert main(["batch", "import", str(tmp_path / "2.out")]) == 0
    # the request the runner dropped is exported again, alone
    assert main(["batch", "export", "--out", str(tmp_path / "again"), *flags]) == 0
    ((third, n),) = re.findall(r"^  (\S+\.jsonl) \((\d+) requests", capsys.readouterr().out, re.M)
    assert n == "1" and key_of_line(json.loads(open(third).readline())["custom_id"]) == key_of_line(dropped)
    offline_run(third, tmp_path / "3.out", letter_reply)
    assert main(["batch", "import", str(tmp_path / "3.out")]) == 0
    rows = read_landing("t2t_completions").to_pylist()
    keys = Counter((r["setting"], r["descriptor"], r["letter"], r["run"]) for r in rows)
    assert len(keys) == 6 and set(keys.values()) == {1} and {r["parse_status"] for r in rows} == {"ok"}
    backend = OpenAIChatBackend("stub-model")  # the audit of `dora audit --backend openai --model stub-model`
    assert {r["audit_id"] for r in rows} == {
        audit_id_for(backend, T2TProbeConfig(runs=2, letters="bks", prompt_style="chat").resolved(backend), [TEMPLATES[1]])
    }
    assert main(["batch", "export", "--out", str(tmp_path / "none"), *flags]) == 0
    assert "nothing to export" in capsys.readouterr().out
    (tmp_path / "foreign.out").write_text(json.dumps({"custom_id": '["x"]', "response": {"status_code": 200, "body": {}}, "error": None}) + "\n")
    assert main(["batch", "import", str(tmp_path / "foreign.out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dora batch: 1 line(s) of") and "name no request `dora batch export` wrote here" in err and "\n" not in err


def test_counterfactual_text_sets_export_and_import(dora_home, tmp_path, capsys):
    from orchestration.cli import main

    flags = ["--family", "counterfactual", "--model", "stub-model", "--cf-prompts", "Describe,Hiring", "--cf-seeds", "1"]
    assert main(["batch", "export", "--out", str(tmp_path / "out"), *flags]) == 0
    ((path, n),) = re.findall(r"^  (\S+\.jsonl) \((\d+) requests", capsys.readouterr().out, re.M)
    assert n == "24"  # one released doctor set of 12 members x 2 prompts
    offline_run(path, tmp_path / "out.jsonl", lambda body: "7" if body["messages"][-1]["content"].endswith("Rating:") else "Calm.")
    assert main(["batch", "import", str(tmp_path / "out.jsonl")]) == 0
    assert "counterfactual text sets" in capsys.readouterr().out
    rows = read_landing("counterfactual_responses").to_pylist()
    assert len(rows) == 24 and {r["status"] for r in rows} == {"ok"} and {r["backend"] for r in rows} == {"openai"}
    assert {r["parsed_value"] for r in rows if r["prompt_label"] == "Hiring"} == {7.0}


@pytest.mark.slow  # the T2T asset under Dagster (in process)
def test_the_t2t_asset_runs_the_audit_as_one_step_in_batch_mode(dora_home, api_key):
    import dagster as dg

    from orchestration.defs.audits.partitions import audit_partitions
    from orchestration.defs.biasdora.config import AuditConfig
    from orchestration.defs.biasdora.t2t.assets import t2t_completions

    instance, key = dg.DagsterInstance.ephemeral(), "adhoc:stub-model@stub-model"
    instance.add_dynamic_partitions(audit_partitions.name, [key])

    def materialize(config: AuditConfig) -> dict:
        result = dg.materialize([t2t_completions], run_config=dg.RunConfig(ops={"t2t_completions": config}), instance=instance, partition_key=key)
        assert result.success
        return {k: v.value for k, v in result.get_asset_materialization_events()[0].materialization.metadata.items()}

    with BatchStubServer() as server:
        server.chat_reply = letter_reply
        cfg = AuditConfig(
            model="stub-model",
            backend="openai",
            base_url=server.base_url,
            prompt_style="chat",
            descriptors=["child"],
            settings=["noun", "singular"],
            letters="ab",
            runs=2,
            progress=False,
            t2t_block_templates=1,
            api_batch=True,
            api_batch_max_requests=3,
        )
        first = materialize(cfg)  # two templates, one step: the audit's batches in one ledger
        assert (first["blocks"], first["batch_pending"], first["rows_generated"], len(server.created)) == (1, 8, 0, 3)
        assert _events(first["audit_id"]) == ["started"]  # not finished while batches are open
        done = materialize(cfg.model_copy(update={"api_batch_wait": True, "api_batch_poll": 0.01}))
        assert (done["rows_generated"], done["parse_status"], "batch_pending" in done) == (8, {"ok": 8}, False)
        assert load_ledger(first["audit_id"]).meta["record"]["step"] == "t2t"
    assert _events(first["audit_id"])[-1] == "finished"
