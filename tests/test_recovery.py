"""The warehouse is rebuildable from the landing zone at any time, and the landing zone's odd
files never stop an audit.

- a deleted warehouse is rebuilt by a plain re-run, with a one-line notice;
- a corrupt one (not DuckDB, empty, or cut short after a valid header) is moved aside, never
  deleted, and rebuilt; one held by a writer is busy, not corrupt, and is left alone;
- ``--rebuild`` recomputes every incremental model (rows landed with timestamps older than a
  mart's watermark are counted);
- a shard with a good footer and corrupt data pages, and a FIFO, folder or broken symbolic
  link named ``*.parquet``, are quarantined with their path and reason (a FIFO is never
  opened); the other shards are read.

Every warehouse here is a real DuckDB file and every shard real Parquet; the ``slow`` tests run
the dbt assets through Dagster end to end (no model: the landing zone is written directly).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from ingestion import landing, shard_checks
from ingestion.build_state import (
    full_refresh_requested,
    load_state,
    record_success,
    recover_warehouse,
)
from ingestion.landing import quarantine_bad_shards, read_landing, write_shard
from ingestion.shard_checks import LandingSchemaWarning
from ingestion.warehouse import check_warehouse, set_aside_corrupt_warehouse, warehouse_problem
from tests.helpers.landing_rows import T0, completion, expected_associations, random_rows

REPO = Path(__file__).resolve().parents[1]
STEPS = ("dbt_dora_dbt_models", "dbt_dora_score_models")


@pytest.fixture(autouse=True)
def _fresh_shard_cache():
    """Each test starts with no shard checked in this process (homes differ per test)."""
    landing._CHECKED.clear()
    yield
    landing._CHECKED.clear()


def _multi_block_warehouse(path: Path) -> int:
    """A real DuckDB file of several 256 kB blocks; returns its size in bytes."""
    with duckdb.connect(str(path)) as con:
        con.execute("create table t as select range as x, md5(range::varchar) as h from range(200000)")
        con.execute("create view v as select count(*) as n from t")
    return path.stat().st_size


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


# --------------------------------------------------------------------------- the warehouse file


def test_a_sound_warehouse_has_no_problem(dora_home):
    dora_home.mkdir(parents=True)
    _multi_block_warehouse(dora_home / "warehouse.duckdb")
    assert warehouse_problem() is None
    check_warehouse()
    assert set_aside_corrupt_warehouse() is None and (dora_home / "warehouse.duckdb").exists()


@pytest.mark.parametrize("keep", ["half", "all_but_one_block", "headers_only"])
def test_a_warehouse_cut_short_after_a_valid_header_is_corrupt_and_set_aside(dora_home, keep):
    dora_home.mkdir(parents=True)
    path = dora_home / "warehouse.duckdb"
    size = _multi_block_warehouse(path)
    assert size > 3 * 4096 + 2 * 262144  # several blocks, so a cut keeps a valid header
    _truncate(path, {"half": size // 2, "all_but_one_block": size - 262144, "headers_only": 3 * 4096}[keep])
    assert path.read_bytes()[8:12] == b"DUCK"  # the header check alone would pass it
    problem = warehouse_problem()
    assert problem and ("truncated" in problem or "cannot" in problem), problem
    from ingestion.errors import WarehouseCorruptError

    with pytest.raises(WarehouseCorruptError, match="is corrupt"):
        check_warehouse()
    aside = set_aside_corrupt_warehouse()
    assert aside is not None and aside.stat().st_size < size and not path.exists()
    assert aside.name.startswith("warehouse.duckdb.corrupt-")


def test_a_warehouse_held_by_a_writer_is_busy_not_corrupt(dora_home):
    """Another process's write lock makes DuckDB refuse to open it: that must never move it aside."""
    dora_home.mkdir(parents=True)
    path = dora_home / "warehouse.duckdb"
    _multi_block_warehouse(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('held', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(duckdb.IOException, match="lock"):
            duckdb.connect(str(path), read_only=True)
        assert warehouse_problem() is None
        assert recover_warehouse(STEPS) == [] and path.exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=600)


def test_dora_query_on_a_truncated_warehouse_is_one_line(dora_home):
    dora_home.mkdir(parents=True)
    path = dora_home / "warehouse.duckdb"
    _truncate(path, _multi_block_warehouse(path) // 2)
    env = {**os.environ, "DORA_HOME": str(dora_home), "DAGSTER_HOME": str(dora_home / "dagster"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "orchestration.cli", "query", "select count(*) from t"], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "truncated" in proc.stderr and "dora audit" in proc.stderr


# --------------------------------------------------------------------------- recover_warehouse


def test_a_fresh_home_needs_no_recovery(dora_home):
    assert recover_warehouse(STEPS) == []
    assert not full_refresh_requested(STEPS[0])


def test_a_deleted_warehouse_forgets_the_build_fingerprints_with_one_notice(dora_home):
    for step in STEPS:
        record_success(step, "f" * 64)
    notices = recover_warehouse(STEPS)
    assert len(notices) == 1 and "is missing" in notices[0] and "landing zone" in notices[0]
    assert all(load_state(step) is None for step in STEPS)  # both builds run again
    assert recover_warehouse(STEPS) == []  # said once


@pytest.mark.parametrize("content", [b"", b"not a database at all" * 50])
def test_a_corrupt_warehouse_is_moved_aside_by_a_plain_run(dora_home, content):
    dora_home.mkdir(parents=True)
    (dora_home / "warehouse.duckdb").write_bytes(content)
    (dora_home / "warehouse.duckdb.wal").write_bytes(b"wal")
    for step in STEPS:
        record_success(step, "f" * 64)
    [notice] = recover_warehouse(STEPS)
    assert "was corrupt" in notice and "moved to" in notice
    [aside] = dora_home.glob("warehouse.duckdb.corrupt-*[0-9Z]")
    assert aside.read_bytes() == content and Path(str(aside) + ".wal").read_bytes() == b"wal"  # nothing deleted
    assert not (dora_home / "warehouse.duckdb").exists() and all(load_state(s) is None for s in STEPS)


def test_rebuild_requests_a_full_refresh_until_a_build_succeeds(dora_home):
    for step in STEPS:
        record_success(step, "f" * 64)
    _multi_block_warehouse(dora_home / "warehouse.duckdb")
    assert recover_warehouse(STEPS, rebuild=True) == []
    assert all(full_refresh_requested(step) for step in STEPS)
    recover_warehouse(STEPS)  # a later plain run before the build (e.g. interrupted) keeps the request
    assert all(full_refresh_requested(step) for step in STEPS)
    record_success(STEPS[0], "a" * 64)
    assert not full_refresh_requested(STEPS[0]) and full_refresh_requested(STEPS[1])


# --------------------------------------------------------------------------- landing shards


def _good_shard(letter: str, run: int = 1) -> Path:
    return write_shard("t2t_completions", [completion("a1", "child", letter + "ave", letter=letter, run=run)], partition="a1")


def _corrupt_data_pages(path: Path) -> None:
    """Zero every byte between the leading magic and the footer: the footer (schema, row
    counts) still reads, every data page is garbage."""
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    data[4 : len(data) - 8 - footer] = bytes(len(data) - 12 - footer)
    path.write_bytes(bytes(data))


def _quarantine_in_thread(table: str, unblock: list[Path]) -> list[Path]:
    """quarantine_bad_shards in a thread; a thread still blocked after 60 s (on opening a FIFO)
    fails the test, after its FIFOs are opened for writing so that it can finish."""
    out: dict = {}

    def run():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out["moved"] = quarantine_bad_shards(table)
        out["warnings"] = [str(w.message) for w in caught if issubclass(w.category, LandingSchemaWarning)]

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():
        for fifo in unblock:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        thread.join(10)
        pytest.fail("quarantine_bad_shards blocked on a non-regular file")
    return out["moved"], out["warnings"]


def test_a_shard_with_corrupt_data_pages_is_quarantined_and_the_rest_is_read(dora_home):
    good = _good_shard("b")
    bad = _good_shard("c")
    _corrupt_data_pages(bad)
    import pyarrow.parquet as pq

    assert pq.read_schema(bad).names  # a good footer: the schema check alone passed it
    with pytest.raises(duckdb.Error):
        duckdb.sql("select * from read_parquet(?)", params=[str(bad)]).fetchall()
    moved, said = _quarantine_in_thread("t2t_completions", [])
    target = dora_home / "quarantine" / "t2t_completions" / "a1" / bad.name
    assert moved == [target] and not bad.exists() and good.exists()
    assert "corrupt data pages" in target.with_name(target.name + ".reason.txt").read_text()
    assert len(said) == 1 and str(bad) in said[0] and str(target) in said[0]
    assert read_landing("t2t_completions", columns=["word"]).column("word").to_pylist() == ["bave"]


def test_non_regular_files_are_quarantined_without_being_opened(dora_home):
    good = _good_shard("b")
    folder = good.parent
    fifo = folder / "fifo.parquet"
    os.mkfifo(fifo)
    (folder / "folder.parquet").mkdir()
    (folder / "folder.parquet" / "inner.parquet").write_bytes(b"x")
    os.symlink(folder / "nowhere.parquet", folder / "dangling.parquet")
    marker = dora_home / "landing" / "t2t_completions" / "_schema.parquet"
    marker.unlink()
    os.mkfifo(marker)  # even the schema marker: landing_dir must not open it
    moved, said = _quarantine_in_thread("t2t_completions", [fifo, marker])
    quarantine = dora_home / "quarantine" / "t2t_completions"
    assert {p.relative_to(quarantine).as_posix() for p in moved} >= {"a1/fifo.parquet", "a1/folder.parquet", "a1/dangling.parquet"}
    assert (quarantine / "_schema.parquet").is_fifo() and marker.is_file()  # set aside, then rewritten
    assert (quarantine / "a1" / "fifo.parquet").is_fifo()  # moved, not read nor deleted
    assert (quarantine / "a1" / "folder.parquet" / "inner.parquet").read_bytes() == b"x"
    reason = (quarantine / "a1" / "fifo.parquet.reason.txt").read_text()
    assert "FIFO" in reason and "not opened" in reason
    assert any(str(fifo) in w for w in said)
    assert read_landing("t2t_completions", columns=["word"]).column("word").to_pylist() == ["bave"]


def test_data_pages_are_decoded_once_across_processes(dora_home, monkeypatch):
    first = _good_shard("b")
    quarantine_bad_shards("t2t_completions")
    calls = []
    real = shard_checks._data_pages_problem
    monkeypatch.setattr(shard_checks, "_data_pages_problem", lambda p, con=None: calls.append(p.name) or real(p, con))
    landing._CHECKED.clear()  # as a new process: only the record in state/ is left
    quarantine_bad_shards("t2t_completions")
    assert calls == []
    second = _good_shard("c")
    quarantine_bad_shards("t2t_completions")
    assert calls == [second.name]
    _corrupt_data_pages(first)  # rewritten in place: another mtime, so decoded again
    os.utime(first, ns=(first.stat().st_atime_ns, first.stat().st_mtime_ns + 10**9))
    landing._CHECKED.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LandingSchemaWarning)
        moved = quarantine_bad_shards("t2t_completions")
    assert calls[-1] == first.name and [p.name for p in moved] == [first.name]


def test_a_name_quarantined_twice_keeps_both_files(dora_home):
    bad = _good_shard("c")
    for _ in range(2):
        bad.write_bytes(b"PAR1 not parquet")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LandingSchemaWarning)
            quarantine_bad_shards("t2t_completions")
    folder = dora_home / "quarantine" / "t2t_completions" / "a1"
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(".reason.txt")) == [bad.name, bad.name + ".1"]


# --------------------------------------------------------------------------- end to end: the dbt assets in Dagster


def _materialize(scores: bool = True):
    """Both dbt steps of an audit, as its job runs them: the association models (those of
    ``fct_associations``), then a score model (the judge parse rates, with their staging);
    ``scores=False``: the first step only (where nothing is asserted on the score models)."""
    import dagster as dg

    from orchestration.defs.biasdora.scoring.assets import dora_score_models
    from orchestration.defs.dbt.assets import dora_dbt_models
    from orchestration.defs.dbt.resources import dbt_resource

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LandingSchemaWarning)
        first = dg.materialize(
            [dora_dbt_models],
            selection=dg.AssetSelection.assets("fct_associations").upstream(),
            resources={"dbt": dbt_resource()},
        )
        if not scores:
            return first.success
        second = dg.materialize(
            [dora_score_models],
            selection=dg.AssetSelection.assets("agg_judge_parse_rates").upstream(),
            resources={"dbt": dbt_resource()},
        )
    return first.success and second.success


def _relations(home: Path) -> set[str]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return {name for (name,) in con.execute("select table_name from information_schema.tables").fetchall()}


def _associations(home: Path, audit_id: str) -> set[tuple]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return set(
            con.execute("select audit_id, modality, setting, descriptor, word, tf from fct_associations where audit_id = ?", [audit_id]).fetchall()
        )


def _reference(rows) -> set[tuple]:
    return {(*key, exp["tf"]) for key, exp in expected_associations(rows).items()}


@pytest.mark.slow
@pytest.mark.scenario
def test_the_warehouse_is_rebuilt_from_landing_whatever_happened_to_it(dora_home):
    """One landing zone, five builds of the association marts through Dagster (the score
    models too in the third and fourth, when --rebuild has asked both steps for a full refresh
    and when the warehouse is gone; the fifth asserts nothing on them, so builds only the
    association marts):

    1. first build                                   -> fct_associations == the Python reference
    2. rows with OLD timestamps land, plain build    -> staged, but the mart is stale (the bug
                                                        --rebuild must fix; asserted so that this
                                                        test shows what the full refresh changes)
    3. --rebuild's request, build                    -> the mart counts them
    4. warehouse deleted, plain build                -> both steps rebuild it, the same rows
    5. warehouse cut short, a corrupt shard and a    -> moved aside / quarantined, rebuilt from
       FIFO in landing, plain build                     the good shards, within a minute's wait
    """
    from ingestion.build_state import recover_warehouse as recover
    from orchestration.defs.dbt.assets import DBT_STEPS

    rows = random_rows("a1", "singular", seed=7, n_descriptors=6, vocabulary=9)
    for r in rows:
        r["generated_at"] = T0 + timedelta(days=1)
    write_shard("t2t_completions", rows, partition="a1")
    assert _materialize(scores=False)
    assert _associations(dora_home, "a1") == _reference(rows)

    late = [completion("a1", f"descriptor {k}", "zzlate", letter="z", run=9, generated_at=T0) for k in range(3)]
    write_shard("t2t_completions", late, partition="a1")
    assert _materialize(scores=False)
    with duckdb.connect(str(dora_home / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("select count(*) from stg_t2t_completions where word = 'zzlate'").fetchone()[0] == 3
    assert _associations(dora_home, "a1") == _reference(rows)  # stale: older than the mart's watermark

    recover(DBT_STEPS, rebuild=True)  # what `dora audit --rebuild` does before its run
    assert _materialize()
    expected = _reference(rows + late)
    assert expected != _reference(rows) and _associations(dora_home, "a1") == expected
    assert not full_refresh_requested(DBT_STEPS[0])

    (dora_home / "warehouse.duckdb").unlink()
    assert _materialize()  # the asset itself sees the warehouse is gone: neither step is skipped
    assert _associations(dora_home, "a1") == expected
    assert "agg_judge_parse_rates" in _relations(dora_home)  # (was skipped: a CatalogException in its check)

    path = dora_home / "warehouse.duckdb"
    _truncate(path, path.stat().st_size // 2)
    bad = write_shard("t2t_completions", [completion("a1", "descriptor 0", "yybad", letter="y", run=9)], partition="a1")
    _corrupt_data_pages(bad)
    os.mkfifo(bad.parent / "fifo.parquet")
    finished, blocked = threading.Event(), []

    def watchdog():  # Dagster runs in the main thread; a reader blocked on the FIFO is released here
        if not finished.wait(600):
            blocked.append(True)
            os.close(os.open(bad.parent / "fifo.parquet", os.O_WRONLY | os.O_NONBLOCK))

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        # the association step alone: it recovers the warehouse and quarantines the shards
        # before the score step would start, and the fourth build already showed a rebuilt
        # warehouse gets its score models (a score build is ~6 s of CPU)
        result = _materialize(scores=False)
    finally:
        finished.set()
    assert not blocked, "the build blocked on a FIFO in the landing zone"
    assert result
    assert list(dora_home.glob("warehouse.duckdb.corrupt-*"))
    assert (dora_home / "quarantine" / "t2t_completions" / "a1" / bad.name).exists()
    assert (dora_home / "quarantine" / "t2t_completions" / "a1" / "fifo.parquet").is_fifo()
    assert _associations(dora_home, "a1") == expected
