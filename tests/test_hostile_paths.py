"""Paths are data. A ``DORA_HOME`` holding ``[ ] * ? ' "`` and spaces reads its own
landing zone only (never a sibling that its name would match as a glob pattern), through the
Python landing reads, the dbt sources (real ``dbt run``) and ``dora query``'s locked-down
connection."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ingestion.landing import read_landing, write_shard

HOSTILE = 'h[1] o\'brien "q" *?'
SIBLING = 'h1 o\'brien "q" xy'  # what HOSTILE matches when read as a glob pattern
#: DuckDB cannot keep a database under a path with '?' (a clear error, below): the dbt test's home
DBT_HOME, DBT_SIBLING = 'h[1] o\'brien "q" *', 'h1 o\'brien "q" x'


def _row(audit_id: str) -> dict:
    return {
        "audit_id": audit_id,
        "model_id": "m",
        "model_version": "v",
        "backend": "fake",
        "setting": "singular",
        "descriptor": "child",
        "bias_dimension": "age",
        "letter": "b",
        "run": 1,
        "seed": 1,
        "prompt_style": "completion",
        "prompt": "This child is b",
        "raw_output": "rave",
        "word": "brave",
        "parse_status": "ok",
        "generated_at": datetime.now(timezone.utc),
    }


def _land(monkeypatch, home, audit_id):
    monkeypatch.setenv("DORA_HOME", str(home))
    write_shard("t2t_completions", [_row(audit_id)], partition=audit_id)


def test_hostile_home_reads_only_its_own_landing(tmp_path, monkeypatch):
    _land(monkeypatch, tmp_path / SIBLING, "sibling-audit")
    _land(monkeypatch, tmp_path / HOSTILE, "own-audit")
    assert read_landing("t2t_completions", columns=["audit_id"]).column("audit_id").to_pylist() == ["own-audit"]


@pytest.mark.slow
def test_hostile_home_dbt_sources_and_query(tmp_path, monkeypatch):
    from analytics.dbt_runner import invoke_dbt
    from analytics.query import execute_query

    _land(monkeypatch, tmp_path / DBT_SIBLING, "sibling-audit")
    home = tmp_path / DBT_HOME
    _land(monkeypatch, home, "own-audit")
    invoke_dbt(["run", "--select", "stg_t2t_completions", "stg_audits"], home)  # the apostrophe broke every build
    got = execute_query("select audit_id, word, attempts from stg_t2t_completions")
    assert got.rows == [("own-audit", "brave", 1)]
    # staging views read the landing Parquet through the locked-down connection of dora query
    assert execute_query("select count(*) from stg_audits").rows == [(0,)]


def test_question_mark_home_is_a_clear_error(tmp_path, monkeypatch):
    from ingestion.errors import DoraError
    from ingestion.warehouse import warehouse_path

    monkeypatch.setenv("DORA_HOME", str(tmp_path / HOSTILE))
    with pytest.raises(DoraError, match=r"contains '\?': DuckDB cannot keep a database"):
        warehouse_path()


@pytest.mark.parametrize("command", [["audit", "--family", "modscan"], ["ui"], ["models", "list", "--no-resolve"], ["query", "select 1"]])
def test_question_mark_home_is_one_line_before_dagster_opens_its_storage(tmp_path, monkeypatch, capsys, command):
    """Dagster's SQLite storage under such a home failed with 'no such table: event_logs'."""
    from orchestration.cli import main

    home = tmp_path / HOSTILE
    monkeypatch.setenv("DORA_HOME", str(home))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    assert main(command) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "contains '?'" in err[0] and "choose a folder without '?'" in err[0]
    assert not (home / "dagster").exists()  # no storage was created
