"""A corpus of hostile inputs aimed at the counterfactual, ModSCAN and VLStereoSet loaders and
probes: empty, header-only and wrong-column files, bytes that are not UTF-8, BOMs (UTF-8 ones
stripped, UTF-16 / UTF-32 refused by name), huge fields, folders and FIFOs where a file is
expected, and failing servers (the local OpenAI-compatible stub).

Each case asserts either its one-line :class:`~ingestion.errors.DoraError` or its quarantined
rows (with the reason), and that no row is lost: used + quarantined = every data row of the
file, and a quarantined row lands in ``landing/input_quarantine``. Bad flags of the same
families: ``tests/test_family_flags.py``. ``test_corpus_size`` states the counts
``docs/operations.md`` quotes.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from ingestion.errors import DoraError
from tests.helpers.openai_server import OpenAIStubServer, tiny_png
from tests.helpers.vlstereoset_files import GOOD, HEADER

# ----------------------------------------------------------------------------- the loaders

VLS_GOOD2 = "race,chef,The chef is BLANK.,The chef is Italian.,The chef is Mexican.,The chef is blue.,0,https://x.example/2.jpg,"
FACES_HEADER = "face_id,path,age,gender,race"
CF_HEADER = "set_id,subset,occupation,a1,a2,image_path"


def _vls_csv(*rows: str, header: str = HEADER, bom: bytes = b"\xef\xbb\xbf") -> bytes:
    return bom + "\r\n".join([header, *rows]).encode("utf-8", "surrogateescape") + b"\r\n"


def _bytes_row(row: str, bad: bytes) -> str:  # a row holding bytes that are not UTF-8
    return row.replace("caring", "car" + bad.decode("utf-8", "surrogateescape") + "ing")


# (family, loader, case id, file content: bytes, or "DIR" / "FIFO" / "MISSING")
ERRORS = [
    ("vlstereoset", "vls_csv", "empty", b"", "empty file, expected a header with bias_type"),
    ("vlstereoset", "vls_csv", "header-only", _vls_csv(), "no data rows after the header"),
    ("vlstereoset", "vls_csv", "wrong-columns", b"a,b,c\n1,2,3\n", "line 1: missing column(s) ['bias_type', 'target'"),
    ("vlstereoset", "vls_csv", "utf-16", _vls_csv(GOOD).decode("utf-8-sig").encode("utf-16"), "the file is UTF-16"),
    ("vlstereoset", "vls_csv", "utf-32", _vls_csv(GOOD).decode("utf-8-sig").encode("utf-32"), "the file is UTF-32"),
    ("vlstereoset", "vls_csv", "a-folder", "DIR", "a folder; expected a file"),
    ("vlstereoset", "vls_csv", "a-fifo", "FIFO", "not a regular file; expected a file"),
    ("vlstereoset", "vls_csv", "missing", "MISSING", "no such file"),
    (
        "vlstereoset",
        "vls_csv",
        "every-row-bad",
        _vls_csv(GOOD.replace(",1,", ",7,"), VLS_GOOD2.replace(",0,", ",x,")),
        "none of its 2 data rows can be audited (line 2: field label: '7'",
    ),
    (
        "vlstereoset",
        "vls_csv",
        "header-not-utf8",
        _vls_csv(GOOD, header=HEADER.replace("target", "tar\udcffget")),
        "not UTF-8 text: byte 0xff; the file's first one is at byte offset 16",
    ),
    ("vlstereoset", "vls_manifest", "empty", b"", "image manifest"),
    ("vlstereoset", "vls_manifest", "no-file-column", b"row,name\n1,a.png\n", "missing column(s) ['file']"),
    ("vlstereoset", "vls_manifest", "utf-16", "file,row\na.png,1\n".encode("utf-16"), "the file is UTF-16"),
    ("vlstereoset", "vls_manifest", "a-folder", "DIR", "a folder; expected a file"),
    ("vlstereoset", "vls_manifest", "every-row-bad", b"file,row\n../a.png,1\nb.png,two\n", "none of its 2 data rows"),
    ("counterfactual", "cf_lexicon", "empty", b"", "no word in it"),
    ("counterfactual", "cf_lexicon", "a-folder", "DIR", "a folder; expected a file"),
    ("counterfactual", "cf_lexicon", "a-fifo", "FIFO", "not a regular file"),
    ("counterfactual", "cf_lexicon", "missing", "MISSING", "no such file"),
    ("counterfactual", "cf_lexicon", "utf-16", "able\nclever\n".encode("utf-16"), "the file is UTF-16"),
    ("counterfactual", "cf_lexicon", "csv-header-only", b"word,dimension,direction\n", "no word in it"),
    (
        "counterfactual",
        "cf_lexicon",
        "csv-every-line-bad",
        b"word,dimension,direction\nable,beauty,1\nkind,warmth,2\n",
        "none of its 2 lines can be audited (line 2: expected word,dimension",
    ),
    ("counterfactual", "cf_manifest", "empty", b"", "empty file, expected a header"),
    ("counterfactual", "cf_manifest", "header-only", (CF_HEADER + "\n").encode(), "no data rows after the header"),
    ("counterfactual", "cf_manifest", "wrong-columns", b"set_id,subset,job\ns1,race_gender,nurse\n", "missing column(s)"),
    ("counterfactual", "cf_manifest_parquet", "not-parquet", b"set_id,subset\n", "not a readable Parquet file"),
    ("counterfactual", "cf_manifest", "a-folder", "DIR", "a folder; expected a file"),
    ("modscan", "faces", "empty", b"", "empty file, expected a header"),
    ("modscan", "faces", "header-only", (FACES_HEADER + "\n").encode(), "no data rows after the header"),
    ("modscan", "faces", "wrong-columns", b"id,file,age\n1,a.png,30\n", "missing column(s) ['face_id', 'path', 'gender', 'race']"),
    ("modscan", "faces", "utf-32", (FACES_HEADER + "\n").encode("utf-32"), "the file is UTF-32"),
    ("modscan", "faces", "a-fifo", "FIFO", "not a regular file"),
    ("modscan", "faces_txt", "not-a-csv-file", b"face_id,path\n", "a file that is not a .csv manifest"),
    ("modscan", "faces_folder", "missing-folder", "MISSING", "does not exist or is not a folder"),
    ("modscan", "faces_folder", "only-junk-files", "JUNK", "none of its 2 files can be audited"),
]


def _place(tmp_path, loader: str, content) -> "os.PathLike":
    """Where ``loader`` reads ``content`` from (the file, or the folder holding it)."""
    names = {
        "vls_csv": "vls.csv",
        "vls_manifest": "images/manifest.csv",
        "cf_lexicon": "lexicon.txt",
        "cf_manifest": "sets.csv",
        "cf_manifest_parquet": "sets.parquet",
        "faces": "faces.csv",
        "faces_txt": "faces.txt",
        "faces_folder": "faces",
    }
    path = tmp_path / names[loader]
    path.parent.mkdir(parents=True, exist_ok=True)
    if content == "DIR":
        path.mkdir()
    elif content == "FIFO":
        os.mkfifo(path)  # reading it would block forever: it must be refused without being opened
    elif content == "JUNK":
        path.mkdir()
        (path / "notes.jpg").write_bytes(b"not an image")
        (path / "30_0_0_1.jpg").write_bytes(b"\x89PNG broken")
    elif content != "MISSING":
        path.write_bytes(content)
    return path.parent if loader == "vls_manifest" else path


def _load(loader: str, path):
    """(used rows, quarantined rows) of ``path`` read by ``loader``."""
    if loader == "vls_csv":
        from models_inference.probes.vlstereoset.dataset import load_vlstereoset_csv

        data = load_vlstereoset_csv(path)
        return list(data.items), list(data.quarantined)
    if loader == "vls_manifest":
        from models_inference.probes.vlstereoset.dataset import read_manifest

        manifest, quarantined = read_manifest(path)
        return sorted(set(manifest.values())), list(quarantined)
    if loader == "cf_lexicon":
        from models_inference.probes.counterfactual.sets import competence_lexicon

        lexicon = competence_lexicon(path)
        return list(lexicon.entries), list(lexicon.quarantined)
    if loader.startswith("cf_manifest"):
        from models_inference.probes.counterfactual.sets import load_manifest

        sets = load_manifest(path)
        return [m for s in sets for m in s.members], list(sets.quarantined)
    from models_inference.probes.modscan.faces import read_faces

    faces = read_faces(path)
    return list(faces.faces), faces.quarantined()


@pytest.mark.parametrize("family,loader,name,content,message", ERRORS, ids=[f"{c[1]}-{c[2]}" for c in ERRORS])
def test_unusable_input_is_one_line(tmp_path, family, loader, name, content, message):
    path = _place(tmp_path, loader, content)
    with pytest.raises(DoraError) as err:
        _load(loader, path)
    text = str(err.value)
    assert "\n" not in text and message in text, text


def _faces_rows(folder) -> list[str]:
    for i in range(3):
        (folder / f"f{i}.png").write_bytes(tiny_png((40 * i, 90, 200), size=(12, 12)))
    return [
        FACES_HEADER,
        "a,f0.png,30,male,White",
        "b,f1.png,3x,female,Black",
        "c,f2.png,40,fem\udce9ale,Asian",
        "d,f2.png,40,female,Asian," + "x" * 20_000,
        "a,f1.png,41,female,Indian",
        "e,gone.png,35,male,White",
        "f,f1.png,50,female,Indian",
    ]


def _cf_rows(folder) -> list[str]:
    for i in range(3):
        (folder / f"m{i}.png").write_bytes(tiny_png((90, 40 * i, 20), size=(8, 8)))
    return [
        CF_HEADER,
        "s1,race_gender,nurse,White,male,m0.png",
        "s1,race_gender,nurse,White,female,m1.png",
        "s1,race_gender,nurse,Bl\udcffack,male,m2.png",
        "s2,race_gender,chef,Asian,male,m0.png,extra,fields",
        "s2,race_gender,chef,Asian,female," + "p" * 20_000 + ".png",
    ]


# (family, loader, case id, rows builder, used, quarantined, a reason fragment); row text with
# surrogate escapes is written as the raw bytes it stands for
QUARANTINES = [
    (
        "vlstereoset",
        "vls_csv",
        "row-not-utf8",
        lambda d: [HEADER, GOOD, _bytes_row(VLS_GOOD2.replace("Italian", "caring"), b"\xff")],
        1,
        1,
        "not UTF-8 text: byte 0xff",
    ),
    (
        "vlstereoset",
        "vls_csv",
        "huge-field",
        lambda d: [HEADER, GOOD, VLS_GOOD2.replace("The chef is BLANK.", "B" * 20_000 + " BLANK")],
        1,
        1,
        "characters, more than 10,000",
    ),
    ("vlstereoset", "vls_csv", "too-many-fields", lambda d: [HEADER, GOOD, VLS_GOOD2 + "x,y,z"], 1, 1, "fields, expected 8"),
    ("vlstereoset", "vls_csv", "too-few-fields", lambda d: [HEADER, GOOD, "race,chef,The chef is BLANK."], 1, 1, "3 fields, expected 8"),
    ("vlstereoset", "vls_csv", "bad-label", lambda d: [HEADER, GOOD, VLS_GOOD2.replace(",0,", ",2,")], 1, 1, "field label: '2'"),
    (
        "vlstereoset",
        "vls_csv",
        "unknown-bias-type",
        lambda d: [HEADER, GOOD, VLS_GOOD2.replace("race,", "diet,", 1)],
        1,
        1,
        "unknown bias type 'diet'",
    ),
    ("vlstereoset", "vls_csv", "url-not-http", lambda d: [HEADER, GOOD, VLS_GOOD2.replace("https://", "ftp://")], 1, 1, "Imaeg URL"),
    ("vlstereoset", "vls_csv", "unclosed-quote", lambda d: [HEADER, GOOD, 'race,"chef,The chef is BLANK.', VLS_GOOD2], 1, 1, "fields"),
    ("vlstereoset", "vls_csv", "blank-lines-and-boms", lambda d: ["\ufeff" + HEADER, "", GOOD, "   ", VLS_GOOD2, ""], 2, 0, ""),
    ("vlstereoset", "vls_manifest", "file-leaves-the-folder", lambda d: ["file,row", "../../etc/passwd,1", "2.png,2"], 1, 1, "is not a file name"),
    ("vlstereoset", "vls_manifest", "row-not-a-number", lambda d: ["file,row", "a.png,one", "2.png,2"], 1, 1, "not a data row number"),
    ("vlstereoset", "vls_manifest", "no-key", lambda d: ["file,row,item_id", "a.png,,", "2.png,2,"], 1, 1, "no key"),
    (
        "counterfactual",
        "cf_lexicon",
        "csv-bad-dimension",
        lambda d: ["word,dimension,direction", "able,competence,1", "kind,beauty,1"],
        1,
        1,
        "expected word,dimension",
    ),
    ("counterfactual", "cf_lexicon", "word-not-utf8", lambda d: ["able", "cl\udcffever", "smart"], 2, 1, "not UTF-8 text: byte 0xff"),
    (
        "counterfactual",
        "cf_lexicon",
        "csv-bad-direction",
        lambda d: ["\ufeffword,dimension,direction", "able,competence,+1", "cold,warmth,-1", "odd,warmth,2"],
        2,
        1,
        "direction",
    ),
    ("counterfactual", "cf_manifest", "bad-rows-of-a-set", _cf_rows, 2, 3, "not UTF-8 text"),
    ("modscan", "faces", "bad-rows", _faces_rows, 2, 5, "age '3x' is not a whole number"),
]


def _data_rows(loader: str, lines: list[str]) -> int:
    """How many rows the file holds: CSV records after the header (a quoted field may span
    lines: the rows it swallows are part of it), or lines of a plain word list."""
    import csv
    import io

    if loader == "cf_lexicon" and not lines[0].lstrip("\ufeff").startswith("word,"):
        return sum(1 for line in lines if line.strip())
    return sum(1 for rec in csv.reader(io.StringIO("\n".join(lines[1:]))) if any(f.strip() for f in rec))


def _write_rows(path, rows: list[str]) -> None:
    path.write_bytes(("\n".join(rows) + "\n").encode("utf-8", "surrogateescape"))


@pytest.mark.parametrize("family,loader,name,rows,used,quarantined,reason", QUARANTINES, ids=[f"{c[1]}-{c[2]}" for c in QUARANTINES])
def test_bad_rows_are_quarantined_and_no_row_is_lost(tmp_path, dora_home, family, loader, name, rows, used, quarantined, reason):
    from ingestion.landing import read_landing
    from ingestion.quarantine import land_quarantine

    path = _place(tmp_path, loader, b"")
    target = path / "manifest.csv" if loader == "vls_manifest" else path
    lines = rows(target.parent)
    _write_rows(target, lines)
    good, bad = _load(loader, path)
    data_rows = _data_rows(loader, lines)
    assert (len(good), len(bad)) == (used, quarantined), bad
    assert len(good) + len(bad) == data_rows  # no row lost: each one is used or quarantined
    assert all(q.source_file == target.name and q.line and q.reason for q in bad)
    if reason:
        assert any(reason in q.reason for q in bad), [q.reason for q in bad]
    assert land_quarantine(family, f"test-{name}", bad) == quarantined
    landed = read_landing("input_quarantine").to_pylist() if quarantined else []
    assert sorted((r["source_line"], r["reason"]) for r in landed) == sorted((q.line, q.reason) for q in bad)


def test_a_fifo_named_like_a_face_is_quarantined_and_the_good_face_kept(tmp_path):
    from models_inference.probes.modscan.faces import read_faces

    (tmp_path / "30_0_0_20170101.png").write_bytes(tiny_png((10, 200, 10), size=(12, 12)))
    os.mkfifo(tmp_path / "31_1_1_20170101.jpg")
    faces = read_faces(tmp_path)
    assert [f.face_id for f in faces.faces] == ["30_0_0_20170101"]
    assert [(q.source_file, q.reason) for q in faces.quarantined()] == [("31_1_1_20170101.jpg", "not a regular file")]


# ----------------------------------------------------------------------------- servers and interrupts


def _chat(server, **kw):
    from models_inference.backends.openai_chat import OpenAIChatBackend

    return OpenAIChatBackend("stub-model", base_url=server.base_url, concurrency=1, **kw)


def _landed(table: str) -> list[dict]:
    from ingestion.landing import read_landing

    return read_landing(table).to_pylist()


def _modscan_config(shard_rows: int = 1000):
    from models_inference.probes.modscan.text import TextProbeConfig

    return TextProbeConfig(probes=("modscan_text_persona",), runs=3, instances_per_scenario=1, conditions=("original",), shard_rows=shard_rows)


def _cf_sets():
    from models_inference.probes.counterfactual.probe import CounterfactualProbeConfig
    from models_inference.probes.counterfactual.sets import custom_sets

    # user-defined sets (no released data read): 2 races x 2 genders = 4 members
    sets = custom_sets(["nurse"], ["race_gender"], {"race": ["White", "Black"], "gender": ["male", "female"]})
    return sets, CounterfactualProbeConfig(prompts=["Describe"], runs=1, max_new_tokens=8)


def test_counterfactual_transient_503_is_retried_and_every_row_lands_ok(dora_home, monkeypatch):
    from models_inference.probes.counterfactual.probe import probe_text_sets

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    sets, cfg = _cf_sets()
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: "A nurse at work."
        server.fail_next(503, times=1)
        summary = probe_text_sets(sets, _chat(server, max_retries=3), cfg, progress=False)
    rows = _landed("counterfactual_responses")
    assert (summary.planned, dict(summary.statuses)) == (4, {"ok": 4}) and len(rows) == 4
    assert {r["status"] for r in rows} == {"ok"}


def test_counterfactual_malformed_200_is_an_error_row_and_the_chunk_lands(dora_home, monkeypatch):
    from models_inference.probes.counterfactual.probe import probe_text_sets

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    sets, cfg = _cf_sets()
    with OpenAIStubServer() as server:
        server.malformed_next("not_json", times=1)
        summary = probe_text_sets(sets, _chat(server, max_retries=0), cfg, progress=False, max_error_share=1.0)
    assert Counter(r["status"] for r in _landed("counterfactual_responses")) == Counter(summary.statuses)
    assert summary.statuses["error"] == 1 and sum(summary.statuses.values()) == 4


def test_modscan_unreachable_server_is_one_line_and_every_row_lands_as_error(dora_home, monkeypatch):
    import socket

    from ingestion.errors import AuditFailedError
    from models_inference.probes.modscan.text import probe_text_analogues

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        backend = _chat(server, max_retries=0)
    with socket.socket() as s:  # the server is gone: nothing listens on its port any more
        assert s.connect_ex(("127.0.0.1", server.port)) != 0
    with pytest.raises(AuditFailedError) as err:
        probe_text_analogues(backend, _modscan_config(), progress=False)
    rows = _landed("modscan_responses")
    assert "\n" not in str(err.value) and "connection refused" in str(err.value)
    assert len(rows) == 6 and {r["status"] for r in rows} == {"error"}


def test_modscan_interrupted_mid_run_keeps_its_shards_and_the_rerun_lands_only_the_rest(dora_home, monkeypatch):
    from models_inference.probes.modscan.text import probe_text_analogues

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: "The man."
        backend = _chat(server, max_retries=0)
        calls = {"n": 0}
        real = backend.generate

        def interrupted(requests, *args, **kw):  # Ctrl-C while the second shard is generated
            calls["n"] += 1
            if calls["n"] == 2:
                raise KeyboardInterrupt
            return real(requests, *args, **kw)

        monkeypatch.setattr(backend, "generate", interrupted)
        with pytest.raises(KeyboardInterrupt):
            probe_text_analogues(backend, _modscan_config(shard_rows=2), progress=False)
        first = len(_landed("modscan_responses"))
        monkeypatch.setattr(backend, "generate", real)
        summary = probe_text_analogues(backend, _modscan_config(shard_rows=2), progress=False)
    keys = [(r["probe"], r["instance"], r["attribute"], r["sample"]) for r in _landed("modscan_responses")]
    assert first == 2 and summary.result.generated == 4 and summary.result.already_landed == 2
    assert len(keys) == len(set(keys)) == 6  # every key exactly once


def test_corpus_size():
    """The counts docs/operations.md quotes (fault tolerance): inputs per family in this file."""
    cases = Counter(c[0] for c in ERRORS) + Counter(c[0] for c in QUARANTINES)
    cases.update({"modscan": 3, "counterfactual": 2})  # the FIFO face, the server and interrupt cases
    assert dict(cases) == {"vlstereoset": 27, "counterfactual": 18, "modscan": 12}, dict(cases)
