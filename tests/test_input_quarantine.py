"""Every family's input files are audited row by row (real files built in ``tmp_path``).

ModSCAN faces (folder and CSV manifest), counterfactual set manifests and lexicons, and the
VLStereoSet image folder and its manifest: each good row is used, each bad one (a short row,
bytes that are not UTF-8, a bad value, a missing, corrupt or non-regular image, a
decompression bomb) is quarantined with its file, line (or file name) and reason, and no row is
lost (used + quarantined + filtered = every row). A file with no good row is one
:class:`~ingestion.errors.DoraError` line. Counts that would plan too many rows fail before any
model is touched.
"""

from __future__ import annotations

import os
import struct
import time
import zlib

import pytest

from ingestion.errors import DoraError, InputFileError, PlanTooLargeError
from ingestion.landing import read_landing
from tests.helpers.openai_server import OpenAIStubServer, tiny_png


def bomb_png(width: int = 20000, height: int = 20000) -> bytes:
    """A valid PNG whose header declares ``width`` x ``height`` 1-bit pixels, every row present
    (all zero, so ~50 kB compressed): decoding it would take width x height bytes in Pillow."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte + packed bits
    packer = zlib.compressobj(9)
    data = b"".join(packer.compress(row * 1000) for _ in range(height // 1000)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1-bit greyscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")


def test_the_bomb_is_a_small_file_that_pillow_refuses(tmp_path):
    from PIL import Image

    data = bomb_png()
    assert len(data) < 120_000
    (tmp_path / "bomb.png").write_bytes(data)
    with pytest.raises(Image.DecompressionBombError):
        Image.open(tmp_path / "bomb.png")


# ----------------------------------------------------------------------------- ModSCAN faces


def _face(folder, name, color):
    (folder / name).write_bytes(tiny_png(color, size=(12, 12)))
    return name


def test_faces_manifest_audits_every_good_row_and_quarantines_each_bad_one(tmp_path, dora_home, monkeypatch):
    from models_inference.backends.vision import OpenAIVisionBackend
    from models_inference.probes.modscan.faces import read_faces
    from models_inference.probes.modscan.vision import VisionProbeConfig, probe_vision

    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for i, color in enumerate([(200, 0, 0), (0, 200, 0), (0, 0, 200), (90, 90, 0)]):
        _face(imgs, f"g{i}.png", color)
    (imgs / "bomb.png").write_bytes(bomb_png())
    (imgs / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    lines = [
        "face_id,path,age,gender,race",  # line 1
        "f1,imgs/g0.png,30,male,White",  # 2 good
        "f2,imgs/g1.png,30,female,White",  # 3 good
        "f3,imgs/g2.png,30",  # 4 short row
        "f4,imgs/g2.png,thirty,male,Black",  # 5 bad age
        "f5,imgs/bomb.png,30,female,Black",  # 6 decompression bomb
        "f6,imgs/broken.png,30,male,Asian",  # 7 corrupt image
        "f7,imgs/nope.png,30,male,Asian",  # 8 missing image
        "f8,imgs/g3.png,30,male,White,extra",  # 9 a field too many
        "f9,imgs/g2.png,10,male,White",  # 10 good but under 18: filtered (§4)
        "f10,imgs/g3.png,31,0,0",  # 11 good (UTKFace codes)
        "f11,imgs/g2.png,31,1,Martian",  # 12 bad race
    ]
    body = ("\n".join(lines) + "\n").encode()
    latin1 = "f12,imgs/g2.png,31,1,Wh\xefte\n".encode("latin-1")  # 13: one byte that is not UTF-8
    manifest = tmp_path / "faces.csv"
    manifest.write_bytes(b"\xef\xbb\xbf" + body + latin1)  # with a UTF-8 BOM

    faces = read_faces(manifest)
    assert [f.face_id for f in faces.faces] == ["f1", "f2", "f10"]
    assert dict(faces.filtered) == {"age": 1}
    got = {p.line: p.problem for p in faces.problems}
    assert set(got) == {4, 5, 6, 7, 8, 9, 12, 13}
    assert got[4].startswith("3 fields, expected 5")
    assert got[5] == "age 'thirty' is not a whole number"
    assert "decompression bomb refused" in got[6] and "400000000 pixels" in got[6]
    assert got[7].startswith("unreadable image: not a decodable image")
    assert "does not exist" in got[8]
    assert got[9].startswith("6 fields, expected 5")
    assert "Martian" in got[12]
    assert got[13].startswith("not UTF-8 text: byte 0xef") and f"byte offset {3 + len(body) + len('f12,imgs/g2.png,31,1,Wh')}" in got[13]
    assert len(faces.faces) + sum(faces.filtered.values()) + len(faces.problems) == 12  # nothing lost

    # the probe lands the quarantined rows (with file, line, reason, raw text) and audits the good pair
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: "The one on the left."
        backend = OpenAIVisionBackend(model_id="stub-vlm", base_url=server.base_url)
        cfg = VisionProbeConfig(attributes=["gender"], scenarios=["occupation"], instances_per_scenario=1, per_group=1)
        _, summary = probe_vision(backend, faces, cfg, progress=False)
    assert summary.generated == 1  # f1 + f2 (30, White): one gender pair
    landed = sorted(read_landing("input_quarantine").to_pylist(), key=lambda r: r["source_line"])
    assert [(r["family"], r["source_file"], r["source_line"]) for r in landed] == [("modscan", "faces.csv", n) for n in (4, 5, 6, 7, 8, 9, 12, 13)]
    assert {r["dataset_id"] for r in landed} == {faces.dataset_id} and faces.dataset_id.startswith("faces-")
    assert landed[0]["raw_text"] == "f3,imgs/g2.png,30" and landed[-1]["raw_text"].endswith("Wh\\xefte")
    with OpenAIStubServer() as server:  # a re-run lands nothing twice
        server.chat_reply = lambda req: "left"
        probe_vision(OpenAIVisionBackend(model_id="stub-vlm", base_url=server.base_url), read_faces(manifest), cfg, progress=False)
    assert len(read_landing("input_quarantine")) == 8


def test_faces_folder_names_each_bad_file(tmp_path):
    from models_inference.probes.modscan.faces import read_faces

    folder = tmp_path / "utk"
    folder.mkdir()
    _face(folder, "30_0_0_20170101.png", (10, 10, 10))
    _face(folder, "30_1_0_20170102.png", (20, 20, 20))
    (folder / "30_0_1_20170103.png").write_bytes(bomb_png())
    (folder / "30_1_1_20170104.jpg").write_bytes(b"\xff\xd8\xff not a jpeg")
    (folder / "notes.txt").write_text("hello")
    os.mkfifo(folder / "30_0_2_20170105.jpg")  # would block a reader forever
    faces = read_faces(folder)
    assert sorted(f.face_id for f in faces.faces) == ["30_0_0_20170101", "30_1_0_20170102"]
    got = {p.source: p.problem for p in faces.problems}
    assert set(got) == {"30_0_1_20170103.png", "30_1_1_20170104.jpg", "notes.txt", "30_0_2_20170105.jpg"}
    assert "decompression bomb refused" in got["30_0_1_20170103.png"]
    assert got["30_0_2_20170105.jpg"] == "not a regular file"
    assert sorted((q.source_file, q.line) for q in faces.quarantined()) == sorted((name, None) for name in got)


def test_faces_with_no_usable_row_are_one_line(tmp_path):
    from models_inference.probes.modscan.faces import read_faces

    bad = tmp_path / "bad.csv"
    head = "face_id,path,age,gender,race\nf1,x.png,30,male,Wh"
    bad.write_bytes((head + "\xefte\nf2,y.png\n").encode("latin-1"))
    with pytest.raises(InputFileError) as err:
        read_faces(bad)
    message = str(err.value)
    assert "\n" not in message and isinstance(err.value, DoraError)
    assert "none of its 2 data rows" in message and "line 2: not UTF-8 text: byte 0xef" in message and f"byte offset {len(head)}" in message
    (tmp_path / "u16.csv").write_bytes("face_id,path,age,gender,race\n".encode("utf-16"))
    with pytest.raises(InputFileError, match="UTF-16 .*save it as UTF-8"):
        read_faces(tmp_path / "u16.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFileError, match="no image file"):
        read_faces(tmp_path / "empty")
    folder = tmp_path / "bombs"
    folder.mkdir()
    (folder / "30_0_0_1.png").write_bytes(bomb_png())
    with pytest.raises(InputFileError, match=r"none of its 1 files can be audited \(30_0_0_1.png: unreadable image: decompression bomb"):
        read_faces(folder)


# ----------------------------------------------------------------------------- counterfactual sets


def _set_rows(folder):
    for i, color in enumerate([(200, 0, 0), (0, 200, 0), (0, 0, 200), (90, 90, 0), (0, 90, 90)]):
        (folder / f"m{i}.png").write_bytes(tiny_png(color, size=(8, 8)))
    (folder / "bomb.png").write_bytes(bomb_png())
    return [
        "set_id,subset,occupation,a1,a2,image_path",  # 1
        "s1,race_gender,nurse,White,male,m0.png",  # 2 good
        "s1,race_gender,nurse,White,female,m1.png",  # 3 good
        "s1,race_gender,nurse,Black,male,bomb.png",  # 4 decompression bomb
        "s1,race_gender,nurse,White,male,m2.png",  # 5 repeats a member
        "s1,race_gender,pilot,Black,female,m2.png",  # 6 occupation differs from its set
        "s2,race_gender,pilot,Purple,male,m3.png",  # 7 not a race value
        "s2,race_gender,pilot,Asian,male",  # 8 short row
        "s3,race_gender,chef,Asian,male,m3.png",  # 9 its set has one member left
        "s3,race_gender,chef,Asian,female,missing.png",  # 10 missing image
        "s4,unknown_subset,chef,Asian,male,m3.png",  # 11 unknown subset
        "s5,race_gender,chef,Asian,male,m3.png",  # 12 good
        "s5,race_gender,chef,Indian,female,m4.png",  # 13 good
        ",race_gender,chef,Indian,female,m4.png",  # 14 empty set id
    ]


def test_counterfactual_manifest_audits_good_sets_and_quarantines_rows_and_sets(tmp_path, dora_home, monkeypatch):
    from models_inference.backends.vision import load_vision_backend
    from models_inference.probes.counterfactual import probe as cf
    from models_inference.probes.counterfactual.sets import load_manifest

    path = tmp_path / "manifest.csv"
    path.write_text("\n".join(_set_rows(tmp_path)) + "\n")
    sets = load_manifest(path)
    assert [(s.set_id, [m.group for m in s.members]) for s in sets] == [
        ("s1", ["White male", "White female"]),
        ("s5", ["Asian male", "Indian female"]),
    ]
    got = {q.line: q.reason for q in sets.quarantined}
    assert sorted(got) == [4, 5, 6, 7, 8, 9, 10, 11, 14]
    assert "decompression bomb refused" in got[4]
    assert got[5] == "set 's1' repeats member ('White', 'male')"
    assert got[6] == "field 'occupation' = 'pilot' differs from 'nurse' of set 's1' (line 2)"
    assert got[7].startswith("field 'a1' = 'Purple' is not a race value")
    assert got[8].startswith("5 fields, expected 6")
    assert got[9] == "set 's3' has 1 usable member(s); a counterfactual set needs at least 2 to compare"
    assert "no such file" in got[10] and got[11].startswith("field 'subset' = 'unknown_subset'")
    assert got[14] == "field 'set_id' is empty"
    assert sum(len(s.members) for s in sets) + len(sets.quarantined) == 13  # nothing lost

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: "7" if "Rating:" in str(req["messages"]) else "calm"
        backend = load_vision_backend("gpt-4o", backend="openai", base_url=server.base_url)
        summary = cf.probe_image_sets(
            sets, backend, cf.CounterfactualProbeConfig(prompts=["Characteristics"], runs=1, max_new_tokens=4), progress=False
        )
    assert summary.generated == 4  # 2 good sets x 2 members
    landed = read_landing("input_quarantine").to_pylist()
    assert sorted(r["source_line"] for r in landed) == sorted(got)
    assert {(r["family"], r["dataset_id"], r["source_file"]) for r in landed} == {("counterfactual", sets.dataset_id, "manifest.csv")}


def test_counterfactual_files_with_no_usable_set_are_one_line(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from models_inference.probes.counterfactual.sets import CounterfactualInputError, load_manifest

    foreign = tmp_path / "photo.csv"  # a PNG passed as the manifest
    foreign.write_bytes(tiny_png())
    with pytest.raises(CounterfactualInputError, match=r"line 1: missing column\(s\)") as err:
        load_manifest(foreign)
    assert isinstance(err.value, DoraError) and "\n" not in str(err.value)
    with pytest.raises(CounterfactualInputError, match="not a readable Parquet file"):
        (tmp_path / "x.parquet").write_text("set_id,subset\n")
        load_manifest(tmp_path / "x.parquet")
    with pytest.raises(CounterfactualInputError, match="no such file"):
        load_manifest(tmp_path / "nowhere.csv")
    (tmp_path / "m0.png").write_bytes(tiny_png())
    lonely = tmp_path / "lonely.csv"
    lonely.write_text("set_id,subset,occupation,a1,a2,image_path\ns1,race_gender,nurse,White,male,m0.png\n")
    with pytest.raises(CounterfactualInputError, match=r"none of its 1 data rows .*has 1 usable member.*no usable set"):
        load_manifest(lonely)
    # Parquet manifests are read row by row too (line = data row)
    (tmp_path / "m1.png").write_bytes(tiny_png((1, 2, 3)))
    rows = {
        "set_id": ["a", "a", "a"],
        "subset": ["race_gender"] * 3,
        "occupation": ["nurse"] * 3,
        "a1": ["White", "Black", "Green"],
        "a2": ["male"] * 3,
        "image_path": ["m0.png", "m1.png", "m1.png"],
    }
    pq.write_table(pa.table(rows), tmp_path / "sets.parquet")
    sets = load_manifest(tmp_path / "sets.parquet")
    assert len(sets) == 1 and len(sets[0].members) == 2
    assert [(q.line, q.reason[:20]) for q in sets.quarantined] == [(3, "field 'a1' = 'Green'")]


def test_counterfactual_lexicon_quarantines_lines(tmp_path, dora_home):
    from models_inference.probes.counterfactual.scoring import land_lexicons
    from models_inference.probes.counterfactual.sets import competence_lexicon

    lex = tmp_path / "lex.csv"
    lex.write_bytes(b"\xef\xbb\xbfword,dimension,direction\nsmart,competence,1\ncaf\xe9,warmth,1\nkind,warmth,-1\nlazy,competence\n")
    lexicon = competence_lexicon(lex)
    assert lexicon.entries == (("smart", "competence", 1), ("kind", "warmth", -1))
    assert [(q.line, q.reason.split(":")[0]) for q in lexicon.quarantined] == [
        (3, "not UTF-8 text"),
        (5, "expected word,dimension(competence|warmth),direction(1|-1)"),
    ]
    land_lexicons(lexicon)
    landed = read_landing("input_quarantine").to_pylist()
    assert sorted((r["family"], r["source_line"]) for r in landed) == [("counterfactual", 3), ("counterfactual", 5)]


# ----------------------------------------------------------------------------- VLStereoSet images


def test_vlstereoset_image_folder_bad_images_are_statuses_and_bad_manifest_rows_quarantined(tmp_path, dora_home):
    from models_inference.probes.vlstereoset.dataset import load_vlstereoset_csv, resolve_images
    from models_inference.probes.vlstereoset.probe import land_items
    from tests.helpers.vlstereoset_files import GOOD, write_csv

    ds = load_vlstereoset_csv(write_csv(tmp_path, *[GOOD] * 5))
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "ok.png").write_bytes(tiny_png((1, 2, 3)))
    (folder / "bomb.png").write_bytes(bomb_png())
    (folder / "cut.png").write_bytes(tiny_png((4, 5, 6), size=(64, 64))[:60])  # truncated
    os.mkfifo(folder / "pipe.png")
    (folder / "manifest.csv").write_bytes(b"row,file\n1,ok.png\n2,bomb.png\nabc,ok.png\n3,cut.png\n4,pipe.png\n5\n9,caf\xe9.png\n")
    out = resolve_images(ds.items, folder)
    assert {k: v.status for k, v in out.items()} == {
        "r00001": "ok",
        "r00002": "bad_image",
        "r00003": "bad_image",
        "r00004": "bad_image",
        "r00005": "missing",
    }
    assert "decompression bomb refused" in out["r00002"].error
    assert out["r00003"].error.startswith("cut.png: not a decodable image")
    assert out["r00004"].error == "pipe.png: not a regular file"
    got = {q.line: q.reason for q in out.quarantined}
    assert got[4] == "field row: 'abc' is not a data row number (a whole number)"
    assert got[7].startswith("1 fields, expected 2") and got[8].startswith("not UTF-8 text: byte 0xe9")
    assert len(got) == 3
    land_items(ds, out)
    landed = read_landing("input_quarantine").to_pylist()
    assert sorted((r["source_file"], r["source_line"]) for r in landed) == [("manifest.csv", 4), ("manifest.csv", 7), ("manifest.csv", 8)]
    items = read_landing("vlstereoset_items").to_pylist()
    assert sorted(r["image_status"] for r in items) == ["bad_image", "bad_image", "bad_image", "missing", "ok"]


def test_store_png_refuses_a_bomb_with_a_reason(dora_home):
    from models_inference.image_store import store_png

    started = time.process_time()  # CPU seconds: other processes on the cores do not stretch them
    with pytest.raises(ValueError, match="decompression bomb refused"):
        store_png(bomb_png())
    assert time.process_time() - started < 5  # refused from the header, not decoded


# ----------------------------------------------------------------------------- bounded work


class _Untouchable:
    """A backend that fails the test if the probe asks it anything (no model may load)."""

    def __getattr__(self, name):
        raise AssertionError(f"the backend was used ({name}) before the plan was checked")


def test_counterfactual_seeds_that_explode_the_plan_fail_before_the_backend(dora_home):
    from models_inference.probes.counterfactual import probe as cf
    from models_inference.probes.counterfactual.sets import custom_sets
    from models_inference.resumable import MAX_PLANNED_ROWS

    sets = custom_sets(["nurse"], ["race_gender"])
    small = cf.CounterfactualProbeConfig(runs=2, mitigations=[None, "M1"])
    assert cf.check_plan(sets, small) == len(cf.plan(sets, small))  # counted, not built
    started = time.process_time()  # CPU seconds, which a loaded machine does not stretch: counted, not built
    with pytest.raises(PlanTooLargeError) as err:
        cf.probe_text_sets(sets, _Untouchable(), cf.CounterfactualProbeConfig(runs=1_000_000_000), progress=False)
    assert time.process_time() - started < 1
    assert f"{MAX_PLANNED_ROWS:,}" in str(err.value) and "1000000000 runs" in str(err.value)
    assert "\n" not in str(err.value) and isinstance(err.value, DoraError)


def test_modscan_samples_that_explode_the_plan_fail_before_the_backend(dora_home):
    from models_inference.probes.modscan.language import LanguageProbeConfig
    from models_inference.probes.modscan.text import TextProbeConfig, plan_text_queries, probe_text_analogues

    cfg = TextProbeConfig(runs=3, instances_per_scenario=2, prefixes=("none", "sr"))
    assert cfg.planned_rows() == len(plan_text_queries(cfg, "a"))
    started = time.process_time()  # CPU seconds, which a loaded machine does not stretch: counted, not built
    with pytest.raises(PlanTooLargeError, match=r"x 1000000000 runs plans .* more than the 1,000,000"):
        probe_text_analogues(_Untouchable(), TextProbeConfig(runs=1_000_000_000), progress=False)
    assert time.process_time() - started < 1
    with pytest.raises(PlanTooLargeError, match="images per trait"):
        LanguageProbeConfig(images_per_trait=10_000_000).validate()
