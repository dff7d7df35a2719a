"""The capability probe and what rests on it, against the stub server on 127.0.0.1: each server
kind's constraint is found (and one that is ignored is not), the judge answers under it with
its distribution and records the mode, a server without constraints is asked freely and
parsed, and completion-style T2T is packed as ``n`` and prompt lists with every row intact."""

from __future__ import annotations

import pytest

from ingestion.biasdora.templates import T2TTemplate
from ingestion.landing import read_landing
from models_inference.backends.server_caps import (
    constrained_answer,
    constraint_fields,
    forget_capabilities,
    gbnf_alternatives,
    server_root,
)
from models_inference.backends.text import load_text_backend
from models_inference.probes.biasdora.judge import judge_associations, load_judge
from models_inference.probes.biasdora.ratings import parse_constrained_rating
from tests.helpers.openai_server import OpenAIStubServer, stub_logprob

ASSOCS = [
    {"audit_id": "t2t-x", "model_id": "m", "model_version": "v", "modality": "t2t", "setting": "singular", "descriptor": d, "word": w}
    for d in ("child", "old person")
    for w in ("lazy", "kind", "loud")
]


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-caps")
    forget_capabilities()
    with OpenAIStubServer() as srv:
        yield srv
    forget_capabilities()


def backend(server, **kw):
    return load_text_backend("stub-model", backend="openai", base_url=server.base_url, max_retries=0, **kw)


def test_request_fields_of_each_constraint():
    assert gbnf_alternatives(["1", "2"]) == 'root ::= "1" | "2"'
    assert constraint_fields("grammar", ["1", "2"]) == {"extra_body": {"grammar": 'root ::= "1" | "2"'}}
    assert constraint_fields("structured_outputs", ["a"]) == {"extra_body": {"structured_outputs": {"choice": ["a"]}}}
    assert constraint_fields("regex", ["a.b", "c"]) == {"extra_body": {"regex": r"(a\.b|c)"}}
    schema = constraint_fields("json_schema", ["1", "2"])["response_format"]["json_schema"]
    assert schema["strict"] and schema["schema"]["properties"]["answer"]["enum"] == ["1", "2"]
    assert constrained_answer("json_schema", '{"answer": "4"}') == "4"
    assert constrained_answer("json_schema", '{"answer": "4"') == '{"answer": "4"'  # cut: kept for its status
    assert server_root("http://h:1/v1/") == "http://h:1" and server_root(None) is None
    with pytest.raises(ValueError, match="unknown constraint"):
        constraint_fields("telepathy", ["1"])


def test_constrained_answers_are_ratings_or_statuses():
    assert parse_constrained_rating(" 3 ").rating == 3
    assert parse_constrained_rating("").status == "empty"
    # a reply that broke its constraint is never read for a number
    assert parse_constrained_rating("Rating: 4").status == "no_rating"
    assert parse_constrained_rating('{"answer": "4"').status == "no_rating"


@pytest.mark.parametrize("constraint", ["grammar", "structured_outputs", "regex", "json_schema"])
def test_probe_finds_the_constraint_the_server_honours(server, constraint):
    server.constraints = {constraint}
    caps = backend(server).capabilities()
    assert caps.choice_constraint == constraint and caps.server == "unknown"
    assert caps.top_logprobs == 20  # the stub refuses more than 20, as OpenAI does
    assert not caps.completions_n and not caps.prompt_lists  # the stub ignores n and lists by default
    assert server.requests == []  # the probe's requests are kept apart from the audit's


def test_a_server_that_ignores_constraints_has_none(server):
    server.chat_reply = lambda req: "alpha"  # answers every request alike: still not a constraint...
    caps = backend(server).capabilities()
    # ... unless the reply is one of the probe's choices: 'alpha' is, so the stub answering it
    # to everything is taken for the first constraint tried; a reply that is not a choice is not
    assert caps.choice_constraint == "grammar"
    forget_capabilities()
    server.chat_reply = lambda req: "Hello there!"
    assert backend(server).capabilities().choice_constraint is None


def test_llama_server_kind_and_slots_from_props(server):
    server.props = {"model_path": "/m.gguf", "total_slots": 6, "default_generation_settings": {}}
    server.constraints = {"grammar"}
    caps = backend(server).capabilities()
    assert (caps.server, caps.slots, caps.choice_constraint) == ("llama.cpp", 6, "grammar")


def test_judge_under_a_grammar_rates_with_a_distribution(server, dora_home):
    server.constraints = {"grammar"}
    judge = load_judge("openai", "stub-model", base_url=server.base_url, max_retries=0)
    assert judge.answer_mode == "constrained" and judge.mode_used == "grammar"
    summary = judge_associations(ASSOCS, judge, progress=False)
    rows = read_landing("judge_ratings").to_pylist()
    assert summary.generated == len(rows) == 6
    best = max("12345", key=stub_logprob)
    for r in rows:
        assert (r["answer_mode"], r["parse_status"], r["rating"]) == ("grammar", "ok", int(best))
        probs = [r[f"p_rating_{k}"] for k in range(1, 6)]
        assert abs(sum(probs) - 1) < 1e-9 and max(probs) == r[f"p_rating_{best}"]
    sent = server.requests[0]["json"]
    assert sent["grammar"] == 'root ::= "1" | "2" | "3" | "4" | "5"' and sent["top_logprobs"] == 20
    assert judge_associations(ASSOCS, judge, progress=False).generated == 0  # resumed: nothing asked again


def test_judge_json_schema_and_a_broken_answer(server, dora_home):
    server.constraints = {"json_schema"}
    replies = iter(["2", "not a rating"] + ["3"] * 10)
    server.constrained_reply = lambda req, choices: next(replies) if "1" in choices else choices[0]  # the probe: a choice
    judge = load_judge("openai", "stub-model", base_url=server.base_url, max_retries=0, concurrency=1)
    judge_associations(ASSOCS[:2], judge, progress=False)
    rows = {r["word"]: (r["answer_mode"], r["parse_status"], r["rating"]) for r in read_landing("judge_ratings").to_pylist()}
    assert rows == {"lazy": ("json_schema", "ok", 2), "kind": ("json_schema", "no_rating", None)}
    sent = server.requests[0]["json"]
    assert sent["max_tokens"] >= 24  # room for the JSON object
    assert sent["response_format"]["json_schema"]["schema"]["properties"]["answer"]["enum"] == ["1", "2", "3", "4", "5"]


def test_judge_on_a_server_without_constraints_answers_freely(server, dora_home):
    server.chat_reply = lambda req: "I would say 4 out of 5."
    judge = load_judge("openai", "stub-model", base_url=server.base_url, max_retries=0)
    assert judge.mode_used == "free"
    judge_associations(ASSOCS[:2], judge, progress=False)
    rows = read_landing("judge_ratings").to_pylist()
    assert {(r["answer_mode"], r["parse_status"], r["rating"]) for r in rows} == {("free", "ok", 4)}
    assert "grammar" not in server.requests[0]["json"]


def test_t2t_completions_packed_as_n_and_prompt_lists(server, dora_home):
    from models_inference.probes.biasdora.t2t import T2TProbeConfig, probe_t2t

    server.completion_batching = True
    server.completion_reply = lambda req: {"b": "rawler, and", "k": "ind person"}.get(req["prompt"].rstrip()[-1], "x")
    templates = [
        T2TTemplate("singular", "alcoholic person", "disability", "An alcoholic person is"),
        T2TTemplate("noun", "child", "age", "This child is a/an"),
    ]
    be = backend(server, concurrency=2)
    assert be.capabilities().completions_n and be.capabilities().prompt_lists
    done = probe_t2t(templates, be, T2TProbeConfig(runs=3, letters="bk", prompt_style="completion"), progress=False)
    assert done.generated == 2 * 2 * 3 and done.statuses == {"ok": 12}
    sent = [r["json"] for r in server.requests]
    # 4 distinct prompts x 3 runs: one request (n=3, a list of 4 prompts) instead of 12
    assert len(sent) == 1 and sent[0]["n"] == 3 and len(sent[0]["prompt"]) == 4
    rows = read_landing("t2t_completions").to_pylist()
    assert len({(r["descriptor"], r["letter"], r["run"]) for r in rows}) == 12 and len({r["seed"] for r in rows}) == 12
    by_letter = {r["letter"]: r["raw_output"] for r in rows}
    assert by_letter == {"b": "rawler, and", "k": "ind person"}


def test_t2t_packing_off_sends_one_request_per_row(server, dora_home):
    from models_inference.probes.biasdora.t2t import T2TProbeConfig, probe_t2t

    server.completion_batching = True
    be = backend(server, batch_completions=False)
    templates = [T2TTemplate("singular", "alcoholic person", "disability", "An alcoholic person is")]
    probe_t2t(templates, be, T2TProbeConfig(runs=2, letters="b", prompt_style="completion"), progress=False)
    assert len(server.requests) == 2 and all("n" not in r["json"] for r in server.requests)
