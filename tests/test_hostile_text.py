"""Hostile text reaching dora's messages: arguments that are not UTF-8, a backslash in
``DORA_HOME``, landing URLs that cannot be shared or are not installed, newlines and huge
values in what a message repeats. Each answer is one line on stderr, a non-zero exit and no
traceback. The cases call the console script's entry point (``orchestration.cli.main``) in this
process, as ``tests/test_hostile_inputs.py`` does for its flag cases.
"""

from __future__ import annotations

import duckdb
import pytest

from orchestration.cli import main


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home with a small healthy warehouse, no object-storage landing."""
    h = tmp_path / "home"
    h.mkdir()
    with duckdb.connect(str(h / "warehouse.duckdb")) as con:
        con.execute("create table t as select 1 as x")
    monkeypatch.setenv("DORA_HOME", str(h))
    monkeypatch.setenv("DAGSTER_HOME", str(h / "dagster"))
    monkeypatch.delenv("DORA_LANDING_URL", raising=False)
    return h


def _run(args) -> tuple[int, str]:
    """``dora <args>`` in this process: (exit code, stderr)."""
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code
    return code, ""


def _one_line(capsys, args) -> tuple[int, str]:
    code, _ = _run(args)
    err = capsys.readouterr().err
    assert code not in (0, None), err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return code, lines[0]


# ----------------------------------------------------------------------------- 1. non-UTF-8 arguments
# Python hands an argument's undecodable bytes (b"\xff") to dora as lone surrogates ("\udcff").
@pytest.mark.parametrize(
    "args,flag",
    [
        (["report", "--audit-id", "\udcff"], "--audit-id"),
        (["diff", "\udcff"], "argument 2"),
        (["diff", "a", "--to=b\udcfe"], "--to"),
        (["tables", "caf\udce9"], "argument 2"),
        (["query", "select '\udcff'"], "argument 2"),
    ],
    ids=["report_audit_id", "diff_ref", "diff_to_equals", "tables_name", "query_sql"],
)
def test_non_utf8_argument_is_one_line(home, capsys, args, flag):
    code, line = _one_line(capsys, args)
    assert code == 2
    assert line.startswith(f"dora {args[0]}: error: {flag}: ") and "is not valid UTF-8 text (byte 0x" in line, line
    assert not any("\udc80" <= c <= "\udcff" for c in line)  # the byte is written as \xNN
    assert not (home / "dagster").exists()


# ----------------------------------------------------------------------------- 2. a backslash in DORA_HOME
def test_backslash_in_dora_home_is_refused_before_the_warehouse_moves(tmp_path, monkeypatch, capsys):
    made = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(made)) as con:  # built elsewhere: DuckDB would open <tmp>/back/slash/... instead
        con.execute("create table t as select 1 as x")
    h = tmp_path / "back\\slash"
    h.mkdir()
    made.rename(h / "warehouse.duckdb")
    monkeypatch.setenv("DORA_HOME", str(h))
    monkeypatch.setenv("DAGSTER_HOME", str(h / "dagster"))
    code, line = _one_line(capsys, ["query", "select 1"])
    assert code == 2 and line.startswith("dora query: DORA_HOME ") and "contains '\\'" in line, line

    from ingestion.build_state import recover_warehouse
    from ingestion.errors import DoraError

    with pytest.raises(DoraError, match=r"contains '\\'"):
        recover_warehouse(["dbt_build"])
    assert sorted(p.name for p in h.iterdir()) == ["warehouse.duckdb"]  # nothing moved aside


# ----------------------------------------------------------------------------- 3. landing URLs
@pytest.mark.parametrize(
    "url,message",
    [
        ("memory://landing", "the 'memory' filesystem is not shared between processes"),
        ("simplecache::s3://bucket/landing", "the 'simplecache' filesystem is not shared between processes"),
        ("nosuchfs://bucket/landing", "fsspec knows no filesystem 'nosuchfs'"),
    ],
    ids=["memory", "chained_cache", "unknown"],
)
def test_unusable_landing_url_is_one_line(home, monkeypatch, capsys, url, message):
    monkeypatch.setenv("DORA_LANDING_URL", url)
    code, line = _one_line(capsys, ["query", "select 1"])
    assert code == 2 and line.startswith(f"dora query: $DORA_LANDING_URL='{url}': {message}"), line


def test_landing_url_without_its_package_names_it(home, monkeypatch, capsys):
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gcsfs is installed here")
    monkeypatch.setenv("DORA_LANDING_URL", "gs://bucket/landing")
    code, line = _one_line(capsys, ["query", "select 1"])
    assert code == 2 and "the 'gs' filesystem is not installed" in line and line.endswith("pip install gcsfs"), line


def test_object_storage_url_is_still_accepted(monkeypatch):
    from ingestion.landing_location import landing_url

    monkeypatch.setenv("DORA_LANDING_URL", "s3://bucket/landing/")
    assert landing_url() == "s3://bucket/landing"


# ----------------------------------------------------------------------------- 4. newlines and long input
def test_huge_relation_name_is_cut(home, capsys):
    code, line = _one_line(capsys, ["tables", "x" * 100_000])
    assert code == 2 and "x" * 200 + "... (100000 characters)'" in line and len(line) < 400, line[:500]


def test_relation_name_with_a_newline_stays_one_line(home, capsys):
    code, line = _one_line(capsys, ["tables", "a\nb"])
    assert code == 2 and "no relation 'a\\nb'" in line, line


def test_dora_home_path_with_a_newline_stays_one_line(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")  # the home cannot be created under a file
    monkeypatch.setenv("DORA_HOME", str(blocker / "new\nline"))
    code, line = _one_line(capsys, ["query", "select 1"])
    assert code == 2 and "new\\nline" in line, line


def test_flag_path_with_a_newline_stays_one_argparse_line(home, tmp_path, capsys):
    out = tmp_path / "re\nport"
    out.write_text("keep me")
    code, _ = _run(["report", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("dora report: error: --out ") and "re\\nport" in err, err
    assert out.read_text() == "keep me"


def test_shown_helper():
    from ingestion.errors import shown

    assert shown("plain/path") == "plain/path"
    assert shown("a\nb") == "'a\\nb'"
    assert shown("\udcff") == "'\\xff'"
    assert shown("name", quote=True) == "'name'"
    assert shown("y" * 300) == "y" * 200 + "... (300 characters)"
