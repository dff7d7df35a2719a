"""Bad input corpus: every bad input gives a clear error or a stored status row.

Each table row is one bad input with the error (type + message) or the status rows it must
produce. Generation cases run the real T2T probe against the OpenAI-compatible stub server on
127.0.0.1 and count landed rows: a row is never lost (landed == planned in every case).

Tally (kept in sync with the tables below; the module prints it at the end with ``-s``):
inputs tried, clear errors / status rows, rows lost.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.helpers.openai_server import OpenAIStubServer

TALLY = {"inputs": 0, "clear": 0, "rows_planned": 0, "rows_landed": 0}


@pytest.fixture(scope="module", autouse=True)
def _tally():
    yield
    lost = TALLY["rows_planned"] - TALLY["rows_landed"]
    print(f"\nbad inputs: {TALLY['inputs']} tried, {TALLY['clear']} clear errors or status rows, {lost} rows lost")


def _count(clear: bool = True, planned: int = 0, landed: int = 0) -> None:
    TALLY["inputs"] += 1
    TALLY["clear"] += int(clear)
    TALLY["rows_planned"] += planned
    TALLY["rows_landed"] += landed


# --------------------------------------------------------------------------- CrowS-Pairs CSV
HEADER = '"",sent_more,sent_less,stereo_antistereo,bias_type,annotations,anon_writer,anon_annotators\n'
GOOD = '0,"He is poor.","He is rich.",stereo,socioeconomic,[],a,[]\n'
CSV_CASES = [
    ("ragged_row", HEADER + GOOD + '1,"x","y",stereo,age,[],a,[],EXTRA\n', r"line 3: ragged row: 9 fields, header has 8"),
    ("truncated_mid_record", HEADER + GOOD + '1,"She is ol', r"line 3: bad quoting or truncated record"),
    ("truncated_after_header", HEADER, r"line 2: no sentence pair after the header"),
    ("empty_file", "", r"line 1: empty file"),
    (
        "unknown_bias_type",
        HEADER + '0,"He is poor.","He is rich.",stereo,astrology,[],a,[]\n',
        r"line 2: unknown bias_type 'astrology' \(expected one of age, ",
    ),
    ("missing_column", '"",sent_more,stereo_antistereo,bias_type\n0,"He is poor.",stereo,age\n', r"line 1: missing required column\(s\) sent_less"),
    ("not_utf8", (HEADER + '0,"He is p\udcffoor.","He is rich.",stereo,socioeconomic,[],a,[]\n'), r"line 2: not valid UTF-8 \(byte 0xff\)"),
    ("empty_sentence", HEADER + '0,"","He is rich.",stereo,socioeconomic,[],a,[]\n', r"line 2: empty sent_more"),
    ("repeated_index", HEADER + GOOD + '0,"He is old.","He is young.",stereo,age,[],a,[]\n', r"line 3: index 0 repeats line 2"),
]


@pytest.mark.parametrize("name,content,message", CSV_CASES, ids=[c[0] for c in CSV_CASES])
def test_bad_crows_pairs_csv_is_a_clear_error(tmp_path, name, content, message):
    from ingestion.crows_pairs import CrowsPairsFormatError, load_crows_pairs

    path = tmp_path / f"{name}.csv"
    path.write_bytes(content.encode("utf-8", errors="surrogateescape"))
    with pytest.raises(CrowsPairsFormatError, match=rf"^{name}\.csv {message}"):
        load_crows_pairs(path)
    _count()


# --------------------------------------------------------------------------- descriptor phrases
TEN_KB = "very " * 2048
PHRASE_CASES = [
    # (id, phrase, expected key or (exception, message))
    ("empty", "", (ValueError, "empty descriptor phrase")),
    ("whitespace", "   \t ", (ValueError, "empty descriptor phrase")),
    ("punctuation_only", "!!!", (ValueError, "has no word characters")),
    ("ten_kb", TEN_KB, (ValueError, r"is 10239 characters long \(max 200\)")),
    ("not_a_string", None, (TypeError, "must be a str, not NoneType")),
    ("unicode_latin", "Roma persön", "roma persön"),
    ("unicode_cjk", "女性", "女性"),
    ("unicode_emoji", "👩‍🦽 person", "👩‍🦽 person"),
    ("quote", "O'Brien's people", "o'brien's person"),
    ("sql_metacharacters", "Robert'); DROP TABLE students;--", "robert'); drop table student"),
    ("path_traversal", "../../etc/passwd", "etc/passwd"),
    ("dot_dot", "..", (ValueError, "has no word characters")),
]


@pytest.mark.parametrize("name,phrase,expected", PHRASE_CASES, ids=[c[0] for c in PHRASE_CASES])
def test_descriptor_phrase_is_normalised_or_refused_clearly(name, phrase, expected):
    from ingestion.biasdora.descriptors import normalise_descriptor

    if isinstance(expected, tuple):
        exc, message = expected
        with pytest.raises(exc, match=message):
            normalise_descriptor(phrase)
    else:
        assert normalise_descriptor(phrase) == expected
    _count()


SELECTION_CASES = [
    (
        "sql_metacharacters",
        "'; drop table fct_associations; --",
        r"descriptor\(s\) not in the descriptor list: \[\"'; drop table fct_associations; --\"\]",
    ),
    ("path_traversal", "../../etc/passwd", r"not in the descriptor list: \['../../etc/passwd'\]"),
    ("unicode", "女性", r"not in the descriptor list: \['女性'\]"),
    ("ten_kb", TEN_KB.strip(), r"not in the descriptor list: \['very very"),
    ("quote", 'child" or "1"="1', r"not in the descriptor list"),
]


@pytest.mark.parametrize("name,descriptors,message", SELECTION_CASES, ids=[c[0] for c in SELECTION_CASES])
def test_bad_descriptors_flag_is_a_clear_error(name, descriptors, message):
    """``dora audit --descriptors ...``: parsed by the CLI, resolved by the T2T asset's templates."""
    from orchestration.cli.flags import csv_list
    from orchestration.cli.parser import build_parser
    from orchestration.defs.biasdora.config import AuditConfig
    from orchestration.defs.biasdora.t2t.assets import build_templates

    args = build_parser().parse_args(["audit", "--descriptors", descriptors])
    with pytest.raises(ValueError, match=message):
        build_templates(AuditConfig(descriptors=csv_list(args.descriptors), settings=["singular"], per_dimension=0))
    _count()


def test_unknown_setting_is_a_clear_error():
    from ingestion.biasdora.templates import curated_t2t_templates
    from models_inference.probes.biasdora.t2t import select_templates

    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['sideways'\]; expected some of"):
        select_templates(curated_t2t_templates(), settings=["sideways"])
    _count()


# --------------------------------------------------------------------------- generation helpers
def _stub_backend(server, **kw):
    from models_inference.backends.openai_chat import OpenAIChatBackend

    return OpenAIChatBackend("stub-model", base_url=server.base_url, concurrency=2, **kw)


def _landed(audit_id: str):
    from ingestion.landing import read_landing

    return read_landing("t2t_completions", filters={"audit_id": audit_id}).to_pylist()


def _files_outside(root: Path, before: set[Path]) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p not in before and p.is_file())


# --------------------------------------------------------------------------- descriptors from a CSV
@pytest.mark.slow
def test_hostile_descriptors_from_a_crows_pairs_csv_land_verbatim_and_stay_inside_dora_home(dora_home, tmp_path, monkeypatch):
    """Quote-, SQL-metacharacter-, unicode- and path-traversal descriptors extracted from a
    CrowS-Pairs CSV go through the probe, the landing zone and dbt unchanged and harmless."""
    from analytics.dbt_runner import invoke_dbt
    from ingestion.biasdora.descriptors import extract_descriptors
    from ingestion.biasdora.templates import render_t2t_templates
    from ingestion.crows_pairs import load_crows_pairs
    from models_inference.probes.biasdora.t2t import T2TProbeConfig, probe_t2t

    csv = tmp_path / "hostile.csv"
    csv.write_text(
        HEADER
        + '0,"The \'; DROP TABLE fct_associations; -- people are lazy.","The white people are lazy.",stereo,race-color,[],a,[]\n'
        + '1,"The Roma persön is poor.","The German person is poor.",stereo,nationality,[],a,[]\n'
        + '2,"The ../../etc/passwd people are weird.","The normal people are weird.",stereo,socioeconomic,[],a,[]\n'
        + '3,"The ""quoted"" kids are loud.","The quiet kids are loud.",stereo,age,[],a,[]\n'
        + '4,"Robert\'); DROP TABLE students;-- is a thief.","John is a thief.",stereo,race-color,[],a,[]\n'
    )
    descriptors = extract_descriptors(load_crows_pairs(csv))
    keys = set(descriptors.column("descriptor").to_pylist())
    hostile = {k for k in keys if any(ch in k for ch in "';/\"") or not k.isascii()}
    assert len(hostile) >= 3, keys
    templates = [t for t in render_t2t_templates(descriptors, settings=["singular"]) if t.descriptor in hostile]
    outside_before = {p for p in tmp_path.parent.rglob("*")}
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: "[brave]"
        cfg = T2TProbeConfig(runs=1, letters="b", prompt_style="chat")
        summary = probe_t2t(templates, _stub_backend(server), cfg, audit_id="../../host'ile", progress=False)
    planned = len(templates)
    rows = _landed("../../host'ile")
    assert summary.generated == planned == len(rows)
    assert {r["descriptor"] for r in rows} == {t.descriptor for t in templates}
    new_files = _files_outside(tmp_path.parent, outside_before)
    assert new_files and all(dora_home.resolve() in p.resolve().parents for p in new_files), new_files
    invoke_dbt(["run", "--select", "+fct_associations", "--quiet"], dora_home)
    with duckdb.connect(str(dora_home / "warehouse.duckdb"), read_only=True) as con:
        aid = ["../../host'ile"]
        stored = {r[0] for r in con.execute("select descriptor from stg_t2t_completions where audit_id = ?", aid).fetchall()}
        assocs = {r[0] for r in con.execute("select descriptor from fct_associations where audit_id = ?", aid).fetchall()}
        assert con.execute("select count(*) from information_schema.tables where table_name = 'fct_associations'").fetchone()[0] == 1
    assert stored == assocs == {t.descriptor for t in templates}
    _count(planned=planned, landed=len(rows))


PATH_CASES = [
    ("parent_dirs", "../../../escape"),
    ("absolute", "/etc/escape"),
    ("dot_dot", ".."),
    ("nul_and_slashes", "a/\x00/b"),
]


@pytest.mark.parametrize("name,partition", PATH_CASES, ids=[c[0] for c in PATH_CASES])
def test_landing_paths_stay_inside_dora_home(dora_home, name, partition):
    from datetime import datetime, timezone

    from ingestion.contracts import SCHEMAS
    from ingestion.landing import write_shard

    row = {name: None for name in SCHEMAS["audits"].names}
    row.update(audit_id=partition, status="started", event_at=datetime.now(timezone.utc))
    try:
        path = write_shard("audits", [row], partition=partition, name=partition)
    except ValueError as exc:  # nothing usable left: a clear refusal, nothing written
        assert "cannot build a file name" in str(exc)
    else:
        assert dora_home.resolve() / "landing" / "audits" in path.resolve().parents
    _count()


# --------------------------------------------------------------------------- models
@pytest.mark.slow  # one `dora audit` process per case: ~5 s
def test_model_that_does_not_exist_is_a_clear_error():
    from ingestion.errors import ModelNotAvailableError
    from models_inference.backends.text import TransformersBackend

    with pytest.raises(
        ModelNotAvailableError,
        match=r"(?s)cannot load model 'no-such-org/no-such-model-6' offline: .*Use 'smollm2-135m', a local folder or \.gguf file",
    ):
        TransformersBackend.load("no-such-org/no-such-model-6")
    _count()


def test_missing_gguf_file_is_a_clear_error(tmp_path):
    from ingestion.errors import ModelNotAvailableError
    from models_inference.backends.text import TransformersBackend

    with pytest.raises(ModelNotAvailableError, match="cannot load model .*missing.gguf"):
        TransformersBackend.load(str(tmp_path / "missing.gguf"))
    _count()


@pytest.mark.parametrize("kind", ["config_only_folder", "header_only_gguf"])
def test_an_incomplete_local_model_is_a_clear_error(tmp_path, kind):
    """A folder with only config.json (transformers trips with an AttributeError) and a .gguf
    file with only its magic bytes (a ValueError): one known error each, not a crash."""
    from ingestion.errors import ModelNotAvailableError
    from models_inference.backends.text import TransformersBackend

    if kind == "config_only_folder":
        model = tmp_path / "model"
        model.mkdir()
        (model / "config.json").write_text('{"model_type": "llama"}')
    else:
        model = tmp_path / "header.gguf"
        model.write_bytes(b"GGUF\x03\x00\x00\x00")
    # the cause in a few words (what the folder lacks), not the loader's internal exception
    with pytest.raises(
        ModelNotAvailableError, match=rf"cannot load model '{tmp_path}/.*' offline: (?!\w+Error: ).+\. Use .*; a model folder needs config\.json"
    ):
        TransformersBackend.load(str(model))


def test_unknown_backend_and_missing_key_are_clear_errors(monkeypatch):
    from ingestion.errors import ModelNotAvailableError
    from models_inference.backends.base import SamplingParams
    from models_inference.backends.text import load_text_backend

    with pytest.raises(ValueError, match="unknown backend 'vllm'; expected 'transformers' or 'openai'"):
        load_text_backend("x", backend="vllm")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelNotAvailableError, match="set OPENAI_API_KEY in the environment"):
        load_text_backend("gpt-4o", backend="openai").generate([], SamplingParams())
    _count()
    _count()


# --------------------------------------------------------------------------- model output
def _templates():
    from models_inference.probes.biasdora.t2t import T2TTemplate

    return [
        T2TTemplate("singular", "alcoholic person", "disability", "An alcoholic person is"),
        T2TTemplate("verb", "child", "age", "This child is"),
    ]


OUTPUT_CASES = [
    # (id, reply, expected parse status of every row)
    ("empty", "", "empty"),
    ("whitespace", "  \n\t ", "empty"),
    ("binary", "\x00\x01\x02\x1b[31m\ufffd\x7f", "no_brackets"),
    ("ten_k_tokens", "word " * 10000, "no_brackets"),
    ("ten_k_tokens_then_answer", "hmm " * 10000 + "[brave]", "wrong_letter"),
    ("giant_bracket", "[b" + "a" * 20000 + "]", "no_word"),
]


@pytest.mark.parametrize("name,reply,status", OUTPUT_CASES, ids=[c[0] for c in OUTPUT_CASES])
def test_bad_model_output_is_kept_as_a_status_row(dora_home, monkeypatch, name, reply, status):
    from models_inference.probes.biasdora.t2t import T2TProbeConfig, probe_t2t

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: reply
        cfg = T2TProbeConfig(runs=1, letters="cx", prompt_style="chat")
        summary = probe_t2t(_templates(), _stub_backend(server), cfg, audit_id=f"output-{name}", progress=False)
    rows = _landed(f"output-{name}")
    assert summary.planned == 4 == len(rows)
    assert {r["parse_status"] for r in rows} == {status}
    assert all(r["raw_output"] == reply and r["word"] in (None, "brave") for r in rows)
    _count(planned=summary.planned, landed=len(rows))


@pytest.mark.parametrize("raw", ["", "\x00\x01", "\ufffd" * 3, "a" * 5000, "word " * 10000])
def test_completion_style_parser_never_raises(raw):
    from models_inference.probes.biasdora.parsing import PARSE_STATUSES, parse_answer

    for finished in (True, False):
        assert parse_answer(raw, "b", "verb", "completion", finished=finished).status in PARSE_STATUSES
    _count()


# --------------------------------------------------------------------------- API errors
API_CASES = [
    # (id, script(server), backend kwargs, expected statuses, error text that must be stored)
    ("401", lambda s: s.fail_next(401, times=8), {"max_retries": 0}, {"error"}, "AuthenticationError"),
    (
        "401_key_echoed",
        lambda s: (setattr(s, "echo_key_in_errors", True), s.fail_next(401, times=8)),
        {"max_retries": 0},
        {"error"},
        "invalid api key ***",
    ),
    ("429_retried", lambda s: s.fail_next(429, times=2), {"max_retries": 3}, {"ok"}, None),
    ("500_retried", lambda s: s.fail_next(500, times=2), {"max_retries": 3}, {"ok"}, None),
    ("500_persistent", lambda s: s.fail_next(500, times=40), {"max_retries": 1}, {"error"}, "InternalServerError"),
    # a timed-out request is not re-sent (the server may still be working on it): an
    # error row that the next Dagster run retries
    ("timeout_not_resent", lambda s: s.delay_next(2.0, times=1), {"max_retries": 2, "timeout": 0.5}, {"ok", "error"}, "APITimeoutError"),
    ("timeout_persistent", lambda s: s.delay_next(1.5, times=40), {"max_retries": 1, "timeout": 0.3}, {"error"}, "APITimeoutError"),
]


@pytest.mark.parametrize("name,script,kwargs,statuses,stored", API_CASES, ids=[c[0] for c in API_CASES])
def test_api_errors_become_error_rows_or_are_retried(dora_home, monkeypatch, name, script, kwargs, statuses, stored):
    from models_inference.probes.biasdora.t2t import T2TProbeConfig, probe_t2t

    monkeypatch.setenv("OPENAI_API_KEY", "sk-dora-key-that-must-not-be-stored")
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: "[crave]"
        script(server)
        cfg = T2TProbeConfig(runs=1, letters="c", prompt_style="chat")
        # rows only here (the failed-audit threshold: tests/test_api_failures.py, test_hostile_inputs.py)
        summary = probe_t2t(_templates(), _stub_backend(server, **kwargs), cfg, audit_id=f"api-{name}", progress=False, max_error_share=None)
    rows = _landed(f"api-{name}")
    assert summary.planned == 2 == len(rows)
    got = {r["parse_status"] for r in rows}
    assert got <= statuses | {"not_ing"} and got & statuses, got  # 'crave' is not an -ing verb
    for r in rows:
        if r["parse_status"] == "error":
            assert stored in r["raw_output"]
        assert "sk-dora-key-that-must-not-be-stored" not in (r["raw_output"] or "")
    _count(planned=summary.planned, landed=len(rows))


# --------------------------------------------------------------------------- registry YAML
TARGET = "{name: a, modality: t2t, backend: transformers, model: m, version: {source: explicit, value: v1}"
REGISTRY_CASES = [
    ("not_yaml", "targets: [ {name: a", r"not valid YAML"),
    ("not_a_mapping", "- a\n- b", r"\(top level\): must be a mapping with a 'targets' list"),
    ("no_targets", 'schedule: {cron: "0 3 * * 1"}', r"targets: required field is missing"),
    (
        "bad_modality",
        "targets:\n  - " + TARGET.replace("t2t", "audio") + "}",
        r"targets\[0\] \(name 'a'\)\.modality: Input should be 't2t', 't2i' or 'i2t'",
    ),
    ("unknown_field", "targets:\n  - " + TARGET + ", colour: red}", r"targets\[0\] \(name 'a'\)\.colour: unknown field"),
    ("duplicate_names", "targets:\n  - " + TARGET + "}\n  - " + TARGET + "}", r"target name 'a' appears more than once"),
    ("path_traversal_name", "targets:\n  - " + TARGET.replace("name: a", 'name: "../../x"') + "}", r"'\.\./\.\./x' is not a target name"),
    ("bad_cron", 'schedule: {cron: "every day"}\ntargets:\n  - ' + TARGET + "}", r"schedule\.cron: must be a 5-field cron string"),
    (
        "unknown_setting",
        "targets:\n  - " + TARGET + ", probe: {settings: [sideways]}}",
        r"probe\.settings: unknown or no setting\(s\) \['sideways'\]",
    ),
]


@pytest.mark.parametrize("name,text,message", REGISTRY_CASES, ids=[c[0] for c in REGISTRY_CASES])
def test_invalid_registry_yaml_is_a_clear_error(tmp_path, name, text, message):
    registry = pytest.importorskip("ingestion.registry")
    path = tmp_path / "registry.yaml"
    path.write_text(text)
    with pytest.raises(registry.RegistryError, match=rf"invalid audit registry {path}:\n(.|\n)*{message}"):
        registry.load_registry(path)
    _count()


# --------------------------------------------------------------------------- judge API
JUDGE_CASES = [
    ("garbage", lambda s: None, "banana", {"no_rating"}),
    ("empty", lambda s: None, "", {"empty"}),
    ("out_of_range", lambda s: None, "7", {"out_of_range"}),
    ("ten_k_tokens", lambda s: None, "hmm " * 10000, {"no_rating"}),
    ("401_key_echoed", lambda s: (setattr(s, "echo_key_in_errors", True), s.fail_next(401, times=8)), "3", {"error"}),
    ("500_retried", lambda s: s.fail_next(500, times=1), "4", {"ok"}),
]


@pytest.mark.parametrize("name,script,reply,statuses", JUDGE_CASES, ids=[c[0] for c in JUDGE_CASES])
def test_judge_api_bad_answers_and_errors_are_rating_rows(dora_home, monkeypatch, name, script, reply, statuses):
    judge_mod = pytest.importorskip("models_inference.probes.biasdora.judge")
    from ingestion.landing import read_landing

    monkeypatch.setenv("OPENAI_API_KEY", "sk-dora-judge-key-never-stored")
    assocs = [
        {
            "audit_id": f"judge-{name}",
            "model_id": "m",
            "model_version": "v",
            "modality": "t2t",
            "setting": "singular",
            "descriptor": d,
            "word": "brave",
            "bias_dimension": "age",
        }
        for d in ("child", "old person")
    ]
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: reply
        script(server)
        from models_inference.backends.openai_chat import OpenAIChatBackend

        judge = judge_mod.Judge(OpenAIChatBackend("stub-judge", base_url=server.base_url, max_retries=1, concurrency=1, logprobs=False))
        # max_error_share=None: failed calls are stored as rows (the limit: tests/test_error_share_families.py)
        summary = judge_mod.judge_associations(assocs, judge, progress=False, max_error_share=None)
    rows = read_landing("judge_ratings", filters={"audit_id": f"judge-{name}"}).to_pylist()
    assert summary.planned == 2 == len(rows)
    assert {r["parse_status"] for r in rows} == statuses
    assert all("sk-dora-judge-key-never-stored" not in (r["raw_output"] or "") for r in rows)
    _count(planned=summary.planned, landed=len(rows))
