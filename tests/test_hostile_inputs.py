"""A corpus of hostile and odd inputs (bad flags, odd homes, corrupt state, escapes
from ``dora query``, junk model output, malformed replies). Each case asserts its one-line error
(or its status row) and that no landed row is lost. ``test_corpus_size`` states the count that
the README quotes.

The argparse-level flag cases call the console script's entry point (``orchestration.cli.main``)
in this process; one of them also runs as a real ``dora`` process, which must answer in well under
a second on an idle machine (the bound asserted here is looser: the CI machine is shared). The
other CLI cases run ``dora`` as a subprocess.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ingestion.landing import read_landing, write_shard
from tests.helpers.dora_cli import dora_process_imports
from tests.helpers.openai_server import OpenAIStubServer

REPO = Path(__file__).resolve().parents[1]


def _env(home: Path, **extra) -> dict:
    env = dict(os.environ)
    env.update(
        DORA_HOME=str(home),
        DAGSTER_HOME=str(home / "dagster"),
        PYTHONPATH=str(REPO),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        DBT_SEND_ANONYMOUS_USAGE_STATS="false",
    )
    env.update(extra)
    return env


def _t2t_row(audit_id="a1", letter="b", run=1, status="ok") -> dict:
    return {
        "audit_id": audit_id,
        "model_id": "m",
        "model_version": "v",
        "backend": "fake",
        "setting": "singular",
        "descriptor": "child",
        "bias_dimension": "age",
        "letter": letter,
        "run": run,
        "seed": 1,
        "prompt_style": "completion",
        "prompt": "This child is " + letter,
        "raw_output": "rave",
        "word": letter + "rave",
        "parse_status": status,
        "generated_at": datetime.now(timezone.utc),
    }


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home with one landed shard (2 rows) and a small real warehouse."""
    h = tmp_path / "home"
    monkeypatch.setenv("DORA_HOME", str(h))
    write_shard("t2t_completions", [_t2t_row(letter="b"), _t2t_row(letter="c")], partition="a1")
    with duckdb.connect(str(h / "warehouse.duckdb")) as con:
        con.execute("create table t as select 1 as x, 'nan'::double as nan_value, 'inf'::double as inf_value")
    return h


def _landed_rows(h: Path) -> int:
    glob = str(h / "landing" / "t2t_completions" / "**" / "*.parquet")
    with duckdb.connect() as con:
        return con.sql("select count(*) from read_parquet(?, union_by_name=true)", params=[glob]).fetchall()[0][0]


# --------------------------------------------------------------------------- CLI: bad flags (argparse level)
FLAG_CASES = [
    ("per_dimension_negative", ["audit", "--per-dimension", "-1"], r"--per-dimension: -1 is out of range"),
    ("runs_huge", ["audit", "--runs", "1000000000"], r"--runs: 1000000000 is out of range: expected 1..1000"),
    ("runs_zero", ["audit", "--runs", "0"], r"--runs: 0 is out of range"),
    ("letters_repeated", ["audit", "--letters", "aa"], r"--letters: 'aa' repeats a letter"),
    ("letters_not_a_z", ["audit", "--letters", "A1"], r"--letters: 'A1': expected lower-case letters a-z"),
    ("settings_empty", ["audit", "--settings", ""], r"--settings: no T2T setting given"),
    ("settings_unknown", ["audit", "--settings", "singular,sideways"], r"--settings: unknown T2T setting sideways"),
    ("t2i_model_typo", ["audit", "--t2i-model", "stabel-diffusion"], r"--t2i-model stabel-diffusion: not a local folder"),
    # the family's model flags are checked through their Flag(local_model=) declarations
    ("i2t_model_typo", ["audit", "--i2t-model", "./no-such-describer"], r"--i2t-model ./no-such-describer: no such file or folder"),
    ("judge_model_typo", ["audit", "--judge-model", "qwen-judgee"], r"--judge-model qwen-judgee: not a local folder"),
    ("model_missing_path", ["audit", "--model", "./no-such-model"], r"--model ./no-such-model: no such file or folder"),
    ("audit_id_traversal", ["audit", "--audit-id", "../escape"], r"--audit-id: '\.\./escape': an audit id is"),
    ("api_timeout_zero", ["audit", "--api-timeout", "0"], r"--api-timeout: 0 is out of range"),
    ("api_concurrency_zero", ["audit", "--api-concurrency", "0"], r"--api-concurrency: 0 is out of range"),
    ("error_share_above_one", ["audit", "--max-error-share", "2"], r"--max-error-share: 2 is out of range"),
    ("batch_size_zero", ["audit", "--batch-size", "0"], r"--batch-size: 0 is out of range"),
    ("images_zero", ["audit", "--images-per-descriptor", "0"], r"--images-per-descriptor: 0 is out of range"),
    ("t2i_size_junk", ["audit", "--t2i-size", "big"], r"--t2i-size: 'big': expected <width>x<height>"),
    ("judge_runs_zero", ["audit", "--judge-runs", "0"], r"--judge-runs: 0 is out of range"),
    ("i2t_settings_unknown", ["audit", "--i2t-settings", "poetic"], r"--i2t-settings: unknown I2T setting poetic"),
    ("runs_not_a_number", ["audit", "--runs", "ten"], r"--runs: 'ten' is not an integer"),
    ("ui_port_out_of_range", ["ui", "--port", "99999"], r"--port: 99999 is out of range: expected 1..65535"),
    ("report_top_negative", ["report", "--top", "-1"], r"--top: -1 is out of range"),
    ("diff_top_zero", ["diff", "x", "--top", "0"], r"--top: 0 is out of range"),
]


@pytest.mark.parametrize("name,args,message", FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_bad_flag_is_one_argparse_line(home, monkeypatch, capsys, name, args, message):
    """Through ``orchestration.cli.main``, the ``dora`` console script's own entry point, in this
    process: a new interpreter per case would spend ~1.5 s importing, the same for every case.
    The real process is ``test_bad_flag_in_a_real_process_is_one_line_exit_2_and_quick``."""
    import re

    from orchestration.cli import main

    monkeypatch.setenv("DORA_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    before = _landed_rows(home)
    with pytest.raises(SystemExit) as exit_:
        main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    lines = err.strip().splitlines()
    assert re.search(message, lines[-1]), lines
    assert "Traceback" not in err and not (home / "dagster").exists()  # refused before anything started
    assert _landed_rows(home) == before


def test_bad_flag_in_a_real_process_is_one_line_exit_2_and_quick(home):
    """The ``dora`` process itself: exit 2, the one argparse line last on stderr, no traceback,
    nothing started: no Dagster home, no model stack or dbt imported (argparse-level validation;
    checked by what was not done, not by seconds, which a loaded machine stretches)."""
    before = _landed_rows(home)
    proc, imported = dora_process_imports(home.parent, "audit", "--runs", "0")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith("--runs: 0 is out of range: expected 1..1000")
    assert "Traceback" not in proc.stderr and imported == [], imported
    assert not (home.parent / "dagster").exists() and not (home / "dagster").exists()
    assert _landed_rows(home) == before


def test_report_out_is_an_existing_file(home, tmp_path):
    out = tmp_path / "report.html"
    out.write_text("keep me")
    proc = subprocess.run(
        [sys.executable, "-m", "orchestration.cli", "report", "--out", str(out)], env=_env(home), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 2 and "is an existing file" in proc.stderr.splitlines()[-1]
    assert out.read_text() == "keep me"


# --------------------------------------------------------------------------- CLI: runtime one-liners
def _dora(home: Path, *args, **env):
    return subprocess.run([sys.executable, "-m", "orchestration.cli", *args], env=_env(home, **env), capture_output=True, timeout=600)


QUERY_ESCAPES = [
    ("read_system_file", "select * from read_text('/etc/passwd')", "root:"),
    ("read_environment", "select * from read_text('/proc/self/environ')", "DORA_HOME"),
    ("read_url", "select * from read_csv('http://127.0.0.1:9/x.csv')", None),
    ("glob_the_machine", "select * from glob('/etc/*')", "/etc/passwd"),
    ("attach_another_file", "select * from read_parquet('/etc/hostname')", None),
]


@pytest.mark.parametrize("name,sql,secret", QUERY_ESCAPES, ids=[c[0] for c in QUERY_ESCAPES])
def test_query_cannot_read_the_machine(home, name, sql, secret):
    proc = _dora(home, "query", sql, DORA_QUERY_SECRET="leak-me")
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "disabled by configuration" in err or "Permission Error" in err, err
    if secret:
        assert secret not in out and "leak-me" not in out


def test_query_cannot_unlock_its_configuration(home):
    from analytics.query import connect_read_only, lock_down

    con = connect_read_only(home / "warehouse.duckdb")
    lock_down(con, home / "landing")
    for sql in ("set enable_external_access = true", "reset lock_configuration", "load httpfs"):
        with pytest.raises(duckdb.Error):
            con.execute(sql)
    con.close()


def test_query_json_has_no_nan(home):
    proc = _dora(home, "query", "select nan_value, inf_value, x from t", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [{"nan_value": None, "inf_value": None, "x": 1}]


def test_query_into_a_closed_pipe_is_quiet(home):
    sql = "select range as i from range(200000)"
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestration.cli", "query", sql, "--format", "csv"], env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=600) == 0 and "Traceback" not in err, err


def test_query_with_invalid_utf8_sql(home):
    proc = _dora(home, "query", b"select '\xff'")
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1 and "UTF-8" in err, err


def test_dora_home_is_a_file(tmp_path):
    f = tmp_path / "home-file"
    f.write_text("x")
    proc = _dora(f, "query", "select 1")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1 and str(f) in err, err


def test_dora_home_with_question_mark(tmp_path):
    proc = _dora(tmp_path / "what?", "query", "select 1")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "contains '?'" in err and len(err.strip().splitlines()) == 1, err


def test_corrupt_warehouse_says_how_to_recover(home):
    (home / "warehouse.duckdb").write_bytes(b"this is not a database" * 100)
    proc = _dora(home, "query", "select 1")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "is corrupt" in err and "dora audit --rebuild" in err, err
    assert len(err.strip().splitlines()) == 1 and _landed_rows(home) == 2


def test_corrupt_warehouse_is_set_aside_on_rebuild(home):
    from ingestion.errors import WarehouseCorruptError
    from ingestion.warehouse import check_warehouse, set_aside_corrupt_warehouse

    (home / "warehouse.duckdb").write_bytes(b"")
    with pytest.raises(WarehouseCorruptError, match="empty"):
        check_warehouse()
    aside = set_aside_corrupt_warehouse()
    assert aside is not None and aside.exists() and not (home / "warehouse.duckdb").exists()
    check_warehouse()  # a missing warehouse is fine: dbt builds it from landing
    assert _landed_rows(home) == 2


def test_non_utf8_registry(home, tmp_path):
    reg = tmp_path / "registry.yaml"
    reg.write_bytes(b"targets:\n  - name: caf\xe9\n")
    proc = _dora(home, "models", "list", "--registry", str(reg), "--no-resolve")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "not UTF-8" in err and "Traceback" not in err, err


def test_duplicate_registry_key_is_refused():
    from ingestion.registry import RegistryError, parse_registry

    text = "targets:\n  - name: a\n    model: m1\n    model: m2\n    version: {source: explicit, value: v}\n"
    with pytest.raises(RegistryError, match="duplicate key 'model'"):
        parse_registry(text)


def test_registry_client_limits_are_validated():
    from ingestion.registry import RegistryError, parse_registry

    text = "targets:\n  - {name: a, backend: openai, model: m, timeout: -1, version: {source: explicit, value: v}}\n"
    with pytest.raises(RegistryError, match=r"timeout"):
        parse_registry(text)


def test_state_file_holding_a_list(home):
    from ingestion.build_state import is_unchanged, load_state

    (home / "state").mkdir(exist_ok=True)
    (home / "state" / "descriptors.json").write_text("[1]")
    assert load_state("descriptors") is None and is_unchanged("descriptors", "x") is None


def test_report_for_an_unknown_audit(home):
    from analytics.report import load_report_data

    with duckdb.connect(str(home / "warehouse.duckdb")) as con:
        con.execute(
            "create table agg_bias_by_dimension as select 'a1' as audit_id, 't2t' as modality, 'singular' as setting, 'age' as bias_dimension"
        )
        con.execute("create table dim_audits as select 'a1' as audit_id")
    with pytest.raises(LookupError, match=r"no audit 'nope' in the warehouse"):
        load_report_data("nope")


# --------------------------------------------------------------------------- landing: shards breaking the contract
def _bad_shard(h: Path, kind: str) -> Path:
    folder = h / "landing" / "t2t_completions" / "a1"
    path = folder / f"bad-{kind}.parquet"
    if kind == "run_as_string":
        rows = [dict(_t2t_row(letter="d"), run="1")]
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif kind == "extra_column":
        pq.write_table(pa.Table.from_pylist([dict(_t2t_row(letter="d"), colour="red")]), path)
    else:  # truncated / not Parquet
        path.write_bytes(b"PAR1 this is not a parquet file")
    return path


@pytest.mark.parametrize("kind", ["run_as_string", "extra_column", "not_parquet"])
def test_bad_shard_is_quarantined_and_good_rows_stay(home, kind):
    from models_inference.probes.biasdora.t2t import T2T_TABLE
    from models_inference.resumable import landed_keys

    path = _bad_shard(home, kind)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        keys = landed_keys(T2T_TABLE, "a1")
    # typed keys, nothing widened (the T2T key includes the probe row, descriptor_row = 1)
    assert keys == {("singular", "child", 1, "b", 1), ("singular", "child", 1, "c", 1)}
    moved = home / "quarantine" / "t2t_completions" / "a1" / path.name
    assert moved.exists() and not path.exists()  # moved, never deleted
    assert any(str(path) in str(w.message) and "moved to" in str(w.message) for w in caught)
    assert (moved.parent / (moved.name + ".reason.txt")).read_text().strip()


# --------------------------------------------------------------------------- junk model output
PARSE_CASES = [
    ("echoed_slot_h_n", "chat", "[h_n]", "h", "no_word"),
    ("echoed_slot_camash", "chat", "[c_A_m_A_sh]", "c", "no_word"),
    ("echoed_blank", "chat", "[b__]", "b", "no_word"),
    ("markdown_emphasis_ok", "chat", "[_brawler_]", "b", "ok"),
]


@pytest.mark.parametrize("name,style,raw,letter,status", PARSE_CASES, ids=[c[0] for c in PARSE_CASES])
def test_junk_answer_status(name, style, raw, letter, status):
    from models_inference.probes.biasdora.parsing import parse_answer

    assert parse_answer(raw, letter, "singular", style).status == status


JUDGE_CASES = [
    ("cut_at_scale", "On a scale of 1 to", None, "no_rating"),
    ("cut_at_between", "I would rate it between 1 and", None, "no_rating"),
    ("scale_then_rating", "On a scale of 1 to 5, I rate it 4", 4, "ok"),
]


@pytest.mark.parametrize("name,raw,rating,status", JUDGE_CASES, ids=[c[0] for c in JUDGE_CASES])
def test_junk_judge_answer(name, raw, rating, status):
    from models_inference.probes.biasdora.ratings import parse_rating

    assert parse_rating(raw) == (rating, status) or (parse_rating(raw).rating, parse_rating(raw).status) == (rating, status)


def test_judge_distribution_skips_the_echoed_scale(dora_home, monkeypatch):
    from models_inference.backends.openai_chat import OpenAIChatBackend
    from models_inference.probes.biasdora.judge import Judge, JudgeRequest, JudgeSampling

    def tok(t, alts):
        return {
            "token": t,
            "logprob": math.log(dict(alts).get(t, 0.2)),
            "bytes": list(t.encode()),
            "top_logprobs": [{"token": a, "logprob": math.log(q), "bytes": list(a.encode())} for a, q in alts],
        }

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        words = [tok(w, [(w, 1.0)]) for w in ("On", " a", " scale", " of")]
        server.chat_reply = lambda req: {
            "content": "On a scale of 1 to 5: 4",
            "logprobs": [
                *words,
                tok(" 1", [(" 1", 0.9), (" 2", 0.1)]),
                tok(" to", [(" to", 1.0)]),
                tok(" 5", [(" 5", 0.9), (" 4", 0.1)]),
                tok(":", [(":", 1.0)]),
                tok(" 4", [(" 4", 0.7), (" 3", 0.3)]),
            ],
        }
        judge = Judge(OpenAIChatBackend("gpt-4o", base_url=server.base_url, concurrency=1))
        answer = judge.judge([JudgeRequest("child", "brave", 1)], JudgeSampling())[0]
    assert answer.distribution is not None and answer.distribution.probs[3] == pytest.approx(0.7)


# --------------------------------------------------------------------------- malformed servers
@pytest.mark.parametrize("kind", ["no_choices", "not_json"])
def test_malformed_reply_lands_with_the_rest_of_the_chunk(dora_home, monkeypatch, kind):
    from models_inference.backends.openai_chat import OpenAIChatBackend
    from models_inference.probes.biasdora.t2t import T2TProbeConfig, T2TTemplate, probe_t2t

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: "[brave]"
        server.malformed_next(kind)
        backend = OpenAIChatBackend("m", base_url=server.base_url, concurrency=1, max_retries=0)
        templates = [T2TTemplate("singular", "child", "age", "This child is")]
        summary = probe_t2t(templates, backend, T2TProbeConfig(runs=4, letters="b", prompt_style="chat"), progress=False, max_error_share=0.5)
    rows = read_landing("t2t_completions").to_pylist()
    assert len(rows) == 4 and sorted(r["parse_status"] for r in rows) == ["error", "ok", "ok", "ok"]
    assert summary.generated == 4


def test_completion_style_on_chat_only_server(dora_home, monkeypatch):
    from ingestion.errors import CompletionsUnsupportedError
    from models_inference.backends.openai_chat import OpenAIChatBackend
    from models_inference.probes.biasdora.t2t import T2TProbeConfig, T2TTemplate, probe_t2t

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.chat_only = True
        backend = OpenAIChatBackend("gpt-4o", base_url=server.base_url)
        with pytest.raises(CompletionsUnsupportedError, match="--prompt-style chat"):
            probe_t2t(
                [T2TTemplate("singular", "child", "age", "This child is")],
                backend,
                T2TProbeConfig(runs=1, letters="b", prompt_style="completion"),
                progress=False,
            )


def test_version_prefix_collision_gets_two_audits():
    from models_inference.backends.openai_chat import OpenAIChatBackend
    from models_inference.probes.biasdora.t2t import T2TProbeConfig, audit_id_for

    a = OpenAIChatBackend("m", model_version="release-2025-01-candidate-a")
    b = OpenAIChatBackend("m", model_version="release-2025-01-candidate-b")
    cfg = T2TProbeConfig(prompt_style="chat").resolved(a)
    assert audit_id_for(a, cfg) != audit_id_for(b, cfg)


def test_corpus_size():
    """The number of hostile inputs this module covers (quoted in the README)."""
    n = (
        len(FLAG_CASES)
        + 1
        + len(QUERY_ESCAPES)
        + 1
        + 1
        + 1
        + 1
        + 1
        + 1
        + 1
        + 1
        + 1
        + 1
        + 1
        + 1
        + 1
        + 3
        + len(PARSE_CASES)
        + len(JUDGE_CASES)
        + 1
        + 2
        + 1
        + 1
    )
    assert n == 58
