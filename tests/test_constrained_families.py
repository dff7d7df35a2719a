"""Constrained answers for the families that pick among fixed answers (ModSCAN's text analogues,
VLStereoSet's mcq), over the local OpenAI-compatible stub server: with a choice constraint the
server honours (``grammar``), without one (the option falls back to free answers), and the
default (free: no constraint field sent, no capability probe, audit ids unchanged)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ingestion.landing import read_landing
from models_inference.backends.server_caps import forget_capabilities
from tests.helpers.openai_server import OpenAIStubServer
from tests.helpers.vlstereoset_files import landed_synthetic_items


@pytest.fixture(autouse=True)
def _api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-constrained")
    forget_capabilities()  # a stub may reuse a port another test's server had: probe afresh
    yield
    forget_capabilities()


def _grammar_choices(grammar: str) -> list[str]:
    return [json.loads(f'"{c}"') for c in re.findall(r'"((?:[^"\\]|\\.)*)"', grammar)]


# ----------------------------------------------------------------------------- ModSCAN text analogues


def _modscan_config(**kw):
    from models_inference.probes.modscan.text import TextProbeConfig

    return TextProbeConfig(runs=1, instances_per_scenario=1, conditions=("original",), **kw)


def _text_backend(server):
    from models_inference.backends.text import load_text_backend

    return load_text_backend("stub-model", backend="openai", base_url=server.base_url, concurrency=2, max_retries=0)


def _modscan_rows(audit_id: str) -> list[dict]:
    return [r for r in read_landing("modscan_responses").to_pylist() if r["audit_id"] == audit_id]


def _prompt(req: dict) -> str:
    return req["messages"][-1]["content"]


def test_modscan_constrained_sends_the_grammar_of_each_querys_choices(dora_home):
    from models_inference.probes.modscan.prompts import term_phrases
    from models_inference.probes.modscan.tables import RACE_PHRASES
    from models_inference.probes.modscan.text import probe_text_analogues, text_audit_id

    # the "model" names the first offered term, and the side of whoever is on the left
    with OpenAIStubServer() as server:
        server.constraints = {"grammar"}
        server.constrained_reply = lambda req, choices: choices[0]
        backend = _text_backend(server)
        cfg = _modscan_config(answer_mode="constrained")
        summary = probe_text_analogues(backend, cfg, progress=False)
        sent = [r["json"] for r in server.requests]
    rows = _modscan_rows(summary.audit_id)
    assert len(rows) == len(sent) == 2 + 6  # persona: 2 attributes; faces: 3 scenarios x 2 attributes
    assert {r["answer_mode"] for r in rows} == {"grammar"} and {r["status"] for r in rows} == {"ok"}
    by_prompt = {r["prompt"]: r for r in rows}
    for req in sent:
        row = by_prompt[_prompt(req)]
        offered = _grammar_choices(req["grammar"])
        if row["probe"] == "modscan_text_faces":
            assert offered == ["left", "right"]
            assert (row["raw_output"], row["parsed_choice"], row["chosen_group"]) == ("left", "left", row["left_group"])
            assert row["parse_method"] == "side_words"
        else:  # the terms as the prompt writes them, in the query's shuffled order
            order = tuple(row["term_order"].split("|"))
            assert offered == list(term_phrases(row["attribute"], order))
            assert "{" + ", ".join(offered) + "}" in row["prompt"]
            assert row["chosen_group"] == order[0] and row["raw_output"] == offered[0]
            if row["attribute"] == "race":
                assert offered[0] == RACE_PHRASES[order[0]] and row["parse_method"] == "race_phrases"
        assert "answer constrained to" in row["deviation"] and "NOT FROM PAPER" in row["deviation"]
        assert json.loads(row["generation_params"])["answer_mode"] == "constrained"
    # constrained is part of the identity: another audit than the free one of the same model
    assert summary.audit_id == text_audit_id(backend, cfg) != text_audit_id(backend, _modscan_config())


def test_modscan_constrained_answer_outside_the_choices_keeps_its_status(dora_home):
    from models_inference.probes.modscan.text import probe_text_analogues

    with OpenAIStubServer() as server:
        server.constraints = {"grammar"}
        # honoured for the capability probe, not for the audit's queries (a server that did not keep to them)
        server.constrained_reply = lambda req, choices: choices[0] if "alpha" in choices else "neither"
        summary = probe_text_analogues(
            _text_backend(server), _modscan_config(answer_mode="constrained", probes=("modscan_text_faces",)), progress=False
        )
    rows = _modscan_rows(summary.audit_id)
    assert rows and {(r["status"], r["answer_mode"], r["parsed_choice"]) for r in rows} == {("na_no_term", "grammar", None)}


def test_modscan_constrained_without_a_server_constraint_falls_back_to_free(dora_home):
    from models_inference.probes.modscan.text import probe_text_analogues

    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: "The nurse is the one on the left."
        summary = probe_text_analogues(
            _text_backend(server), _modscan_config(answer_mode="constrained", probes=("modscan_text_faces",)), progress=False
        )
        sent = [r["json"] for r in server.requests]
        probed = len(server.probe_requests)
    rows = _modscan_rows(summary.audit_id)
    assert probed > 0  # the capability probe asked, and found no constraint
    assert len(rows) == len(sent) == 6 and not any(k in req for req in sent for k in ("grammar", "response_format", "regex"))
    assert {(r["answer_mode"], r["status"], r["parsed_choice"]) for r in rows} == {("free", "ok", "left")}
    assert all("answer constrained" not in r["deviation"] for r in rows)
    # the requested mode still names the audit: asked for constrained, answered freely here
    assert all(json.loads(r["generation_params"])["answer_mode"] == "constrained" for r in rows)


def test_modscan_default_is_free_sends_no_constraint_and_keeps_the_audit_id(dora_home):
    from models_inference.audit_log import readable_audit_id
    from models_inference.probes.modscan.text import probe_text_analogues, text_audit_id

    with OpenAIStubServer() as server:
        server.constraints = {"grammar"}  # honoured if asked: it must not be asked
        server.chat_reply = lambda req: "A male." if "{" in _prompt(req) else "On the right."
        backend = _text_backend(server)
        cfg = _modscan_config()
        summary = probe_text_analogues(backend, cfg, progress=False)
        sent = [r["json"] for r in server.requests]
        probed = server.probe_requests
    assert not probed and not any(k in req for req in sent for k in ("grammar", "response_format", "regex"))
    rows = _modscan_rows(summary.audit_id)
    assert {r["answer_mode"] for r in rows} == {"free"} and "answer_mode" not in json.loads(rows[0]["generation_params"])
    # the id a free audit had before the option existed
    old = readable_audit_id(
        "modscan-text",
        [("stub-model", 40), ("stub-model", 20)],
        {"backend": "openai", "model": "stub-model", "max_new_tokens": 24, "temperature": 0.7, "top_p": 0.95, "prompt_style": "chat"},
    )
    assert summary.audit_id == text_audit_id(backend, cfg) == old


class _LocalStub:
    """A local backend's shape: ``choose`` and ``choice_token_ids`` (single tokens only)."""

    backend_name = "transformers"

    def choose(self, *args, **kwargs):  # pragma: no cover - only its presence matters here
        raise AssertionError

    def choice_token_ids(self, choices):
        from ingestion.errors import ModelNotAvailableError

        if any(" " in c for c in choices):
            raise ModelNotAvailableError("not single tokens")
        return {c: [i] for i, c in enumerate(choices)}


def test_answer_mode_for_local_and_free_backends():
    from models_inference.probes.modscan.text import answer_mode_for

    assert answer_mode_for(_LocalStub(), ("left", "right")) == "constrained"
    assert answer_mode_for(_LocalStub(), ("an Asian", "a White")) == "free"  # multi-token race phrases
    assert answer_mode_for(object(), ("left", "right")) == "free"  # no choose at all


def test_modscan_answer_mode_flag():
    from orchestration.cli.flags import op_run_configs
    from orchestration.cli.parser import build_parser
    from orchestration.defs.modscan.assets import text_probe_config

    def config(*argv):
        return op_run_configs(build_parser().parse_args(["audit", *argv]))["modscan_responses"]

    assert config().answer_mode == "free"
    chosen = config("--modscan-answer-mode", "constrained")
    assert chosen.answer_mode == "constrained" and text_probe_config(chosen).answer_mode == "constrained"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["audit", "--modscan-answer-mode", "grammar"])


# ----------------------------------------------------------------------------- VLStereoSet mcq


def _stereotype_letter(req: dict, choices: list) -> str:
    """A "biased" model: the letter of the option holding the stereotypical attribute (the
    capability probe, a text-only turn, gets its first choice)."""
    content = req["messages"][0]["content"]
    if isinstance(content, str):
        return choices[0]
    text = content[0]["text"]
    for line in text.splitlines():
        if any(w in line for w in ("caring", "gentle")) and line[0] in choices:
            return line[0]
    return choices[-1]


def _vls_scores(audit_id: str) -> list[dict]:
    return [r for r in read_landing("vlstereoset_scores").to_pylist() if r["audit_id"] == audit_id]


def test_mcq_constrained_over_a_grammar_server(dora_home, tmp_path):
    from models_inference.backends.vision import load_vision_backend
    from models_inference.probes.vlstereoset.probe import probe_vlstereoset, vlstereoset_audit_id
    from models_inference.probes.vlstereoset.scorers import McqScorer

    items = landed_synthetic_items(tmp_path)
    with OpenAIStubServer() as server:
        server.constraints = {"grammar"}
        server.constrained_reply = _stereotype_letter
        vlm = load_vision_backend("gpt-test", backend="openai", base_url=server.base_url)
        scorer = McqScorer(vlm, shuffles=3, answer_mode="constrained")
        assert scorer.mode_used == "grammar" and scorer.config()["answer_mode"] == "grammar"
        summary = probe_vlstereoset(items, scorer, progress=False)
        sent = [r["json"] for r in server.requests]
        free_id = vlstereoset_audit_id(items[0]["dataset_id"], McqScorer(vlm, shuffles=3))
    assert len(sent) == 2 * 4 * 3  # 2 items with images x 4 conditions x 3 orders
    offered = {tuple(_grammar_choices(req["grammar"])) for req in sent}
    assert offered == {("A", "B", "C"), ("A", "B")}  # original: 3 captions; the other conditions: 2
    assert all(req["messages"][0]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,") for req in sent)
    rows = _vls_scores(summary.audit_id)
    details = [json.loads(r["detail_json"]) for r in rows if r["status"] == "ok"]
    assert details and {d["answer_mode"] for d in details} == {"grammar"}
    orig = {(r["item_id"], r["caption_kind"]): r["score"] for r in rows if r["condition"] == "original" and r["status"] == "ok"}
    assert orig[("r00001", "stereotype")] == 1.0 and orig[("r00001", "unrelated")] == 0.0
    assert summary.audit_id != free_id  # the constraint is part of the audit's config, so of its id


def test_mcq_constrained_without_a_server_constraint_is_the_free_audit(dora_home, tmp_path):
    from models_inference.backends.vision import load_vision_backend
    from models_inference.probes.vlstereoset.probe import probe_vlstereoset, vlstereoset_audit_id
    from models_inference.probes.vlstereoset.scorers import McqScorer

    items = landed_synthetic_items(tmp_path)
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: _stereotype_letter(req, ["A", "B", "C"])
        vlm = load_vision_backend("gpt-test", backend="openai", base_url=server.base_url)
        scorer = McqScorer(vlm, shuffles=1, answer_mode="constrained")
        assert scorer.mode_used == "free" and "answer_mode" not in scorer.config()
        summary = probe_vlstereoset(items, scorer, progress=False)
        sent = [r["json"] for r in server.requests]
        assert summary.audit_id == vlstereoset_audit_id(items[0]["dataset_id"], McqScorer(vlm, shuffles=1))
    assert sent and not any(k in req for req in sent for k in ("grammar", "response_format", "regex"))
    rows = [r for r in _vls_scores(summary.audit_id) if r["status"] == "ok"]
    assert rows and {json.loads(r["detail_json"])["answer_mode"] for r in rows} == {"free"}


def test_mcq_default_is_free_without_a_probe(dora_home, tmp_path):
    from models_inference.backends.vision import load_vision_backend
    from models_inference.probes.vlstereoset.probe import probe_vlstereoset
    from models_inference.probes.vlstereoset.scorers import McqScorer

    items = landed_synthetic_items(tmp_path)
    with OpenAIStubServer() as server:
        server.constraints = {"grammar"}
        server.chat_reply = lambda req: "B"
        vlm = load_vision_backend("gpt-test", backend="openai", base_url=server.base_url)
        scorer = McqScorer(vlm, shuffles=1)
        probe_vlstereoset(items, scorer, progress=False)
        sent = [r["json"] for r in server.requests]
        probed = server.probe_requests
    assert scorer.mode_used == "free" and not probed
    assert sent and not any(k in req for req in sent for k in ("grammar", "response_format", "regex"))
    with pytest.raises(ValueError, match="answer_mode"):
        McqScorer(vlm, answer_mode="grammar")


def test_vlstereoset_mcq_answer_mode_flag():
    from orchestration.cli.flags import op_run_configs
    from orchestration.cli.parser import build_parser

    ops = op_run_configs(build_parser().parse_args(["audit", "--vlstereoset-mcq-answer-mode", "constrained"]))
    assert ops["vlstereoset_probe"].mcq_answer_mode == "constrained"
    assert op_run_configs(build_parser().parse_args(["audit"]))["vlstereoset_probe"].mcq_answer_mode == "free"


@pytest.mark.parametrize("yml", ["staging/modscan/stg_modscan_responses.yml", "staging/biasdora/stg_judge_ratings.yml"])
def test_staging_accepts_every_row_answer_mode(yml):
    """The staging rule on ``answer_mode`` lists what the probes and the judge can write (free,
    constrained, each server constraint)."""
    import yaml

    from models_inference.backends.server_caps import ROW_ANSWER_MODES

    path = Path(__file__).resolve().parents[1] / "dbt_project/models" / yml
    (model,) = yaml.safe_load(path.read_text())["models"]
    rules = model["data_tests"][0]["model_rules"]["arguments"]["rules"]
    (rule,) = [r for r in rules if r.startswith("answer_mode in")]
    assert sorted(re.findall(r"'(\w+)'", rule)) == sorted(ROW_ANSWER_MODES)
