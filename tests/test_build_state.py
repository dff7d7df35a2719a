"""Input fingerprints that let a re-run with nothing new skip its steps (ingestion/build_state.py)."""

import os

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
    from ingestion.descriptors import descriptor_inputs_fingerprint

    a, b = descriptor_inputs_fingerprint(), descriptor_inputs_fingerprint()
    assert a.hexdigest() == b.hexdigest()
    # The descriptors step also lands ``descriptor_rows`` (every row of the paper's
    # T2T and T2I lists, built by ingestion/templates.py), so those 7 CSVs and templates.py are
    # inputs too: CrowS-Pairs, mapping, 5 T2T + 2 T2I CSVs, templates/descriptors/crows_pairs code.
    files = [p for p in a.parts if p.startswith("file:")]
    assert len(files) == 12
    assert {f"file:t2t_setting{i}.csv" for i in range(1, 6)} | {"file:t2i_setting1.csv", "file:t2i_setting2.csv",
                                                                 "file:templates.py"} <= set(files)


def test_a_new_dbt_target_folder_starts_from_the_homes_newest_partial_parse(dora_home):
    """A home's second dbt step parses only what changed: its new target folder gets a copy of
    the newest ``partial_parse.msgpack`` of the home's other folders; a folder that has its own
    keeps it."""
    import os

    from ingestion.landing import dbt_target_dir

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
