"""Input fingerprints that let a re-run with nothing new skip its steps (ingestion/build_state.py)."""

import os

import pytest

from ingestion.build_state import Fingerprint, forget, is_unchanged, load_state, record_success


def _tree(root):
    (root / "t2t_completions" / "audit-1").mkdir(parents=True)
    (root / "t2t_completions" / "audit-1" / "a.parquet").write_bytes(b"shard a")
    (root / "t2t_completions" / "_schema.parquet").write_bytes(b"schema")
    (root / "notes.txt").write_text("not a shard")


def test_tree_fingerprint_sees_new_touched_and_removed_shards_only(tmp_path):
    _tree(tmp_path)
    base = Fingerprint().add_tree(tmp_path).hexdigest()
    assert len(base) == 64 and Fingerprint().add_tree(tmp_path).hexdigest() == base
    (tmp_path / "notes.txt").write_text("edited")  # not a *.parquet file: ignored
    assert Fingerprint().add_tree(tmp_path).hexdigest() == base

    shard = tmp_path / "t2t_completions" / "audit-1" / "b.parquet"
    shard.write_bytes(b"shard b")  # a new shard
    added = Fingerprint().add_tree(tmp_path).hexdigest()
    assert added != base
    st = shard.stat()
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # rewritten in place
    assert Fingerprint().add_tree(tmp_path).hexdigest() not in (base, added)
    shard.unlink()
    assert Fingerprint().add_tree(tmp_path).hexdigest() == base


def test_file_and_value_parts_are_labelled(tmp_path):
    f = tmp_path / "crows_pairs.csv"
    f.write_text("a,b\n")
    one = Fingerprint().add_file(f).add_value("spacy", "3.8.2").hexdigest()
    assert Fingerprint().add_file(f).add_value("spacy", "3.8.3").hexdigest() != one
    assert Fingerprint().add_value("spacy", "3.8.2").add_file(f).hexdigest() != one  # order matters
    f.write_text("a,b\n1,2\n")
    assert Fingerprint().add_file(f).add_value("spacy", "3.8.2").hexdigest() != one
    missing = Fingerprint().add_file(tmp_path / "gone.csv").hexdigest()
    assert missing != Fingerprint().add_file(f).hexdigest()


def test_state_round_trip_and_missing_outputs(dora_home, tmp_path):
    fp = Fingerprint().add_value("x", 1)
    assert is_unchanged("descriptors", fp) is None  # never ran
    out = tmp_path / "descriptors.parquet"
    out.write_bytes(b"p")
    path = record_success("descriptors", fp, {"extracted": 301})
    assert path == dora_home / "state" / "descriptors.json"
    state = is_unchanged("descriptors", Fingerprint().add_value("x", 1), outputs=[out])
    assert state["metadata"] == {"extracted": 301} and state["fingerprint"] == fp.hexdigest()
    assert is_unchanged("descriptors", Fingerprint().add_value("x", 2), outputs=[out]) is None
    out.unlink()  # the output is gone: the step must run again
    assert is_unchanged("descriptors", fp, outputs=[out]) is None
    path.write_text("{not json")  # a damaged state file counts as absent
    assert load_state("descriptors") is None
    record_success("descriptors", fp)
    forget("descriptors")
    assert load_state("descriptors") is None and not path.exists()


def test_descriptor_inputs_fingerprint_is_stable():
    from ingestion.biasdora.descriptors import descriptor_inputs_fingerprint

    a, b = descriptor_inputs_fingerprint(), descriptor_inputs_fingerprint()
    assert a.hexdigest() == b.hexdigest()
    # The descriptors step also lands ``descriptor_rows`` (every row of the paper's
    # T2T and T2I lists, built by ingestion/biasdora/templates.py), so those 7 CSVs and templates.py are
    # inputs too: CrowS-Pairs, mapping, 5 T2T + 2 T2I CSVs, templates/descriptors/crows_pairs code.
    files = [p for p in a.parts if p.startswith("file:")]
    assert len(files) == 12
    assert {f"file:t2t_setting{i}.csv" for i in range(1, 6)} | {"file:t2i_setting1.csv", "file:t2i_setting2.csv", "file:templates.py"} <= set(files)


def test_a_new_dbt_target_folder_starts_from_the_homes_newest_partial_parse(dora_home):
    """A home's second dbt step parses only what changed: its new target folder gets a copy of
    the newest ``partial_parse.msgpack`` of the home's other folders; a folder that has its own
    keeps it."""
    import os

    from ingestion.home import dbt_target_dir

    assert not (dbt_target_dir("first") / "partial_parse.msgpack").exists()  # nothing to start from
    for name, content, mtime in (("old", b"old parse", 1_000), ("new", b"new parse", 2_000)):
        folder = dora_home / "dbt" / name
        folder.mkdir(parents=True)
        (folder / "partial_parse.msgpack").write_bytes(content)
        os.utime(folder / "partial_parse.msgpack", (mtime, mtime))
    assert (dbt_target_dir("second") / "partial_parse.msgpack").read_bytes() == b"new parse"
    (dora_home / "dbt" / "new" / "partial_parse.msgpack").write_bytes(b"newer parse")
    assert (dbt_target_dir("second") / "partial_parse.msgpack").read_bytes() == b"new parse"  # its own is kept
    assert not list((dora_home / "dbt").rglob("*.tmp"))


def test_cached_tables_round_trip_and_an_unreadable_entry_counts_as_absent(tmp_path, monkeypatch):
    import pyarrow as pa

    from ingestion.build_state import cache_root, cache_tables, cached_tables

    monkeypatch.setenv("DORA_CACHE", str(tmp_path / "cache"))
    assert cache_root() == tmp_path / "cache"
    fp = Fingerprint().add_value("inputs", 1)
    assert cached_tables("step", fp) is None
    table = pa.table({"descriptor": ["tall person", "nurse"], "n": [1, 2]})
    cache_tables("step", fp, {"t": table}, {"rows": 2})
    tables, meta = cached_tables("step", fp)
    assert tables["t"].equals(table) and meta == {"rows": 2}
    assert cached_tables("step", Fingerprint().add_value("inputs", 2)) is None  # other inputs: a miss
    cache_tables("step", fp, {"t": pa.table({"n": [9]})}, {"rows": 1})  # stored first wins
    assert cached_tables("step", fp)[1] == {"rows": 2}
    entry = tmp_path / "cache" / "step" / fp.hexdigest()
    assert sorted(p.name for p in entry.parent.iterdir()) == [entry.name]  # no temporary folder left
    (entry / "t.parquet").write_bytes(b"cut short")
    assert cached_tables("step", fp) is None


@pytest.mark.slow
def test_the_descriptors_step_of_a_second_home_reads_the_tables_the_first_computed(tmp_path, monkeypatch):
    """spaCy's extraction runs once per machine, not once per home: the second home lands the
    same tables without extracting (extract_descriptors would raise)."""
    import dagster as dg

    from ingestion.landing import read_landing
    from orchestration.defs.biasdora.ingestion import assets

    monkeypatch.setenv("DORA_CACHE", str(tmp_path / "cache"))
    landed, metadata = [], []
    for n, home in enumerate((tmp_path / "first", tmp_path / "second")):
        monkeypatch.setenv("DORA_HOME", str(home))
        if n:
            monkeypatch.setattr(assets, "extract_descriptors", lambda *_: pytest.fail("extracted again"))
        result = dg.materialize([assets.descriptors])
        assert result.success
        landed.append(
            {t: read_landing(t).sort_by([(c, "ascending") for c in read_landing(t).column_names]) for t in ("descriptors", "descriptor_rows")}
        )
        metadata.append({k: v.value for k, v in result.asset_materializations_for_node("descriptors")[0].metadata.items()})
    assert (
        landed[0]["descriptors"].num_rows > 800 and landed[0]["descriptor_rows"].num_rows >= 5 * 406 + 7 + 2 * 344
    )  # a row per dimension of a list row
    assert all(landed[0][t].equals(landed[1][t]) for t in landed[0])
    assert metadata[0] == metadata[1] and metadata[0]["extracted"] + metadata[0]["curated"] == landed[0]["descriptors"].num_rows


def test_the_shipped_t2t_templates_are_read_once_per_machine(tmp_path, monkeypatch):
    """spaCy normalises the shipped lists' phrases once; later calls (any home, any process)
    read them from the cache, and a damaged entry is read again from the files."""
    from ingestion.biasdora import templates

    monkeypatch.setenv("DORA_CACHE", str(tmp_path))
    reads = []
    one = templates.T2TTemplate("singular", "tall person", "physical-appearance", "A tall person is", "biasdora", 1)
    monkeypatch.setattr(templates, "_read_curated_templates", lambda settings, folder: reads.append(folder) or [one])
    assert templates._shipped_curated_templates() == [one] and len(reads) == 1
    assert templates._shipped_curated_templates() == [one] and len(reads) == 1  # from the cache
    (entry,) = (tmp_path / "curated_t2t_templates").glob("*.json")
    entry.write_text('{"value": [{"no such field": 1}]}')
    assert templates._shipped_curated_templates() == [one] and len(reads) == 2
