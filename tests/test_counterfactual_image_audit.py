"""Counterfactual image sets from ``dora audit``: a folder in the SocialCounterfactuals layout
(or a manifest) read with its quarantined entries, the ``--cf-images`` flags, the Pearson UDF
against scipy, and one end-to-end audit (tiny random-weight LLaVA for the image sets, the
local OpenAI stub for the paired text sets) read back from ``agg_lvlm_llm_max_toxicity``,
``dora report`` and ``dora diff --family counterfactual``."""

import pytest

from models_inference.probes.counterfactual.errors import CounterfactualInputError
from models_inference.probes.counterfactual.sets import load_image_folder, load_image_sets
from tests.helpers.openai_server import tiny_png

MEMBERS = [("White", "male"), ("White", "female"), ("Black", "male"), ("Black", "female")]


def image_folder(root, occupations=("nurse", "doctor", "plumber")):
    """``root/race_gender/<occupation>-0/A photo of a <a1> <a2> <occupation>.png``, one
    colour per member, plus one file out of the layout and one caption that does not parse."""
    for k, occ in enumerate(occupations):
        d = root / "race_gender" / f"{occ}-0"
        d.mkdir(parents=True)
        for i, (a1, a2) in enumerate(MEMBERS):
            (d / f"A photo of a {a1} {a2} {occ}.png").write_bytes(tiny_png((40 * i, 60 * k, 90), size=(16, 16)))
    (root / "notes.txt").write_text("not an image")
    (root / "race_gender" / "nurse-0" / "A photo of a Martian male nurse.png").write_bytes(tiny_png((1, 2, 3)))
    return root


def test_folder_layout_gives_sets_and_quarantines_the_rest(tmp_path):
    sets = load_image_folder(image_folder(tmp_path / "imgs"))
    assert [(s.set_id, s.subset, s.occupation, len(s.members)) for s in sets] == [
        ("doctor-0", "race_gender", "doctor", 4),
        ("nurse-0", "race_gender", "nurse", 4),
        ("plumber-0", "race_gender", "plumber", 4),
    ]
    nurse = sets[1]
    assert {m.group for m in nurse.members} == {"White male", "White female", "Black male", "Black female"}
    assert all(m.image_path.endswith(".png") and m.caption.startswith("A photo of a ") for m in nurse.members)
    reasons = {q.source_file: q.reason for q in sets.quarantined}
    assert reasons["notes.txt"] == "not <subset>/<set_id>/<caption>.<image suffix> (1 path parts)"
    assert "no race value" in reasons["race_gender/nurse-0/A photo of a Martian male nurse.png"]
    assert sets.dataset_id.startswith("cfsets-") and load_image_sets(tmp_path / "imgs").dataset_id == sets.dataset_id


def test_folder_errors_are_one_line(tmp_path):
    with pytest.raises(CounterfactualInputError, match="no file in it"):
        load_image_folder(tmp_path)
    (tmp_path / "race_gender" / "s").mkdir(parents=True)
    (tmp_path / "race_gender" / "s" / "A photo of a White male nurse.png").write_bytes(tiny_png((1, 1, 1)))
    with pytest.raises(CounterfactualInputError, match="has 1 usable member.*no usable set"):
        load_image_folder(tmp_path)


def test_folder_with_a_manifest_reads_the_manifest(tmp_path):
    for i, _member in enumerate(MEMBERS[:2]):
        (tmp_path / f"m{i}.png").write_bytes(tiny_png((9 * i, 0, 0)))
    (tmp_path / "manifest.csv").write_text(
        "set_id,subset,occupation,a1,a2,image_path\nk,race_gender,nurse,White,male,m0.png\nk,race_gender,nurse,White,female,m1.png\n"
    )
    sets = load_image_sets(tmp_path)
    assert [(s.set_id, len(s.members)) for s in sets] == [("k", 2)]


def test_pearson_udf_is_scipy():
    import duckdb
    from scipy import stats

    from analytics.duckdb_plugin import register_functions

    x, y = [0.125, 0.375, 0.25, 0.625, 0.625], [0.25, 0.125, 0.125, 0.5, 0.5]
    con = duckdb.connect()
    register_functions(con)
    r, p = con.execute("select pearson_r(?, ?), pearson_p(?, ?)", [x, y, x, y]).fetchone()
    assert (r, p) == tuple(float(v) for v in stats.pearsonr(x, y))
    assert con.execute("select pearson_r([1.0, 2.0], [1.0, 3.0]), pearson_p([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])").fetchone() == (None, None)


def test_cf_images_flags_and_dry_run_plan(tmp_path, capsys):
    from orchestration.cli import main
    from orchestration.cli.flags import audit_run_config
    from orchestration.cli.parser import build_parser

    folder = image_folder(tmp_path / "imgs")
    args = build_parser().parse_args(
        [
            "audit",
            "--cf-images",
            str(folder),
            "--cf-vision-model",
            "tiny",
            "--cf-vision-backend",
            "transformers",
            "--cf-vision-batch-size",
            "2",
            "--cf-no-paired-text",
        ]
    )
    cfg = audit_run_config(args).ops["counterfactual_responses"]
    assert (cfg.images, cfg.vision_model, cfg.vision_batch_size, cfg.paired_text) == (str(folder), "tiny", 2, False)
    assert (
        main(
            [
                "audit",
                "--family",
                "counterfactual",
                "--cf-images",
                str(folder),
                "--cf-vision-model",
                "tiny",
                "--cf-prompts",
                "Characteristics",
                "--dry-run",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "counterfactual: 3 sets x 1 prompts" in out  # the paired text sets are the image sets
    assert "counterfactual image sets: 3 sets (2 images quarantined) x 1 prompts on tiny (transformers): 12 responses" in out
    with pytest.raises(SystemExit) as exited:  # checked with the flags, before anything runs
        main(["audit", "--family", "counterfactual", "--cf-images", str(folder), "--dry-run"])
    assert exited.value.code == 2
    assert "dora audit: error: --cf-images needs --cf-vision-model" in capsys.readouterr().err


def _reply(req):
    text = str(req["messages"])
    # toxic words for the Black members of the nurse and plumber sets: MaxToxicity varies by set
    return "you are a stupid idiot" if "Black" in text and "doctor" not in text else "kind careful calm"


@pytest.mark.slow
def test_dora_audit_cf_images_end_to_end(dora_home, tmp_path, monkeypatch, capsys):
    from ingestion.landing import read_landing
    from orchestration.cli import main
    from tests.helpers.dora_cli import warehouse_rows
    from tests.helpers.openai_server import OpenAIStubServer
    from tests.helpers.tiny_models import build_tiny_llava

    folder = image_folder(tmp_path / "imgs")
    build_tiny_llava(tmp_path)
    # The LVLM samples with one seed per set, drawn from the audit id, which hashes the model
    # reference: a path relative to the test's folder keeps the seeds, and so the random
    # model's words, the same on every run (an absolute tmp path gave other seeds each run, and
    # the seed that made one set's four answers empty failed the counts below).
    monkeypatch.chdir(tmp_path)
    llava = "tiny-llava"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIStubServer() as server:
        server.chat_reply = _reply
        code = main(
            [
                "audit",
                "--family",
                "counterfactual",
                "--model",
                "gpt-stub",
                "--backend",
                "openai",
                "--base-url",
                server.base_url,
                "--cf-images",
                str(folder),
                "--cf-vision-model",
                llava,
                "--cf-prompts",
                "Characteristics",
                "--cf-max-new-tokens",
                "4",
                "--cf-judge-backend",
                "none",
                "--no-progress",
            ]
        )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "(image sets on " in out and "12 new responses (12 planned, 3 sets, 2 images quarantined" in out
    rows = warehouse_rows(dora_home, "select variant, count(*), count(toxicity) from fct_counterfactual_responses group by 1 order by 1")
    assert rows == [("image", 12, 12), ("text", 12, 12)]
    pairs = warehouse_rows(
        dora_home,
        "select units, occupations, llm_model_id, r_units, p_units, llm_mean_max_toxicity from agg_lvlm_llm_max_toxicity where head = 'toxicity'",
    )
    assert len(pairs) == 1 and pairs[0][:3] == (3, 3, "gpt-stub")
    r, p = pairs[0][3:5]
    assert r is None or (-1 <= r <= 1 and 0 <= p <= 1)  # random LVLM text: any r; null when its MaxToxicity is constant
    assert pairs[0][5] > 0  # the scripted LLM insults two sets' Black members
    quarantined = read_landing("input_quarantine", ["source_file"]).column("source_file").to_pylist()
    assert "notes.txt" in quarantined
    from analytics.counterfactual_report import counterfactual_section

    section = counterfactual_section()  # dora report's section (the BiasDora marts this run did not build)
    assert "LVLM vs LLM (section 5.1, Table 3" in section and "gpt-stub" in section


def test_diff_shows_the_lvlm_llm_rows_of_its_audits():
    from analytics.diff import AuditRef
    from analytics.family_diff import FamilyDiff
    from analytics.query import QueryResult
    from orchestration.defs.counterfactual.family import CHANGE_TEST

    cols = list(CHANGE_TEST.related[3])
    related = QueryResult(
        cols, [("cfimage-a", "cftext-b", "race_gender", "Characteristics", "none", "toxicity", 5, 0.79, 0.11, 4, 0.99, 0.008, 0.1, 0.125)]
    )
    diff = FamilyDiff(CHANGE_TEST, "llava", AuditRef("cfimage-0", "v0", 1), AuditRef("cfimage-a", "v1", 2), {}, QueryResult([], []), related)
    text = diff.text()
    assert "LVLM vs LLM MaxToxicity (section 5.1 Pearson r / p, Table 3 differences) (agg_lvlm_llm_max_toxicity, 1 rows):" in text
    assert "cftext-b" in text and "0.79" in text
