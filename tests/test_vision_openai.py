"""The OpenAI Images (DALL-E 3) and vision chat (GPT-4o) paths, with the real ``openai`` client
against a local OpenAI-compatible server on 127.0.0.1 (``tests/helpers/openai_server.py``) that returns
real PNG bytes and scripted descriptions, through to ``fct_associations``."""

from __future__ import annotations

import base64
import hashlib
import io
import math
from collections import Counter

import pytest

from analytics.dbt_runner import invoke_dbt
from ingestion.biasdora.description_words import land_description_words
from ingestion.errors import ModelNotAvailableError
from ingestion.landing import read_landing
from models_inference.backends.image import OpenAIImagesBackend
from models_inference.backends.vision import OpenAIVisionBackend
from models_inference.image_store import image_file
from models_inference.probes.biasdora.i2t import I2TProbeConfig, probe_i2t
from models_inference.probes.biasdora.prompts import I2T_PROMPTS, PAPER_DALLE_QUALITY, PAPER_DALLE_SIZE, PAPER_DALLE_STYLES
from models_inference.probes.biasdora.t2i import (
    T2IProbeConfig,
    curated_t2i_templates,
    probe_t2i,
    select_t2i_templates,
)
from tests.helpers.homes import NO_UNIT_TESTS
from tests.helpers.openai_server import OpenAIStubServer, tiny_png

DBT_SELECTION = "+fct_associations +stg_t2i_images +stg_description_words"
#: The stub "draws" each descriptor in one colour; the stub "describes" by colour and prompt.
COLOURS = {"child": (250, 200, 0), "old person": (90, 90, 90)}
DESCRIPTIONS = {
    ((250, 200, 0), "comprehensive"): "A child in a yellow raincoat stands beside a red bicycle.",
    ((90, 90, 90), "comprehensive"): "An old woman in a gray cardigan reads a book.",
    ((250, 200, 0), "stereotypical"): "Children are often seen as playful and innocent.",
    ((90, 90, 90), "stereotypical"): "Elderly people are often seen as frail and forgetful.",
}
SETTING_OF_PROMPT = {v: k for k, v in I2T_PROMPTS.items()}


def _draw(req: dict) -> bytes:
    for descriptor, colour in COLOURS.items():
        if req["prompt"].lower().endswith(descriptor):
            return tiny_png(colour, size=(12, 12))
    return tiny_png((0, 0, 0))


def _describe(req: dict) -> str:
    from PIL import Image

    (content,) = [m["content"] for m in req["messages"] if m["role"] == "user"]
    text = next(c["text"] for c in content if c["type"] == "text")
    url = next(c["image_url"]["url"] for c in content if c["type"] == "image_url")
    assert url.startswith("data:image/png;base64,")
    colour = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB").getpixel((0, 0))
    return DESCRIPTIONS[(tuple(colour), SETTING_OF_PROMPT[text])]


@pytest.mark.slow
def test_dalle3_and_gpt4o_paths_to_associations(dora_home, monkeypatch):
    import duckdb

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    templates = select_t2i_templates(curated_t2i_templates(["singular"]), descriptors=list(COLOURS))
    with OpenAIStubServer() as server:
        server.image_png = _draw
        server.chat_reply = _describe
        images = OpenAIImagesBackend(
            "dall-e-3", base_url=server.base_url, concurrency=2, size=PAPER_DALLE_SIZE, quality=PAPER_DALLE_QUALITY, styles=PAPER_DALLE_STYLES
        )
        t2i = probe_t2i(templates, images, T2IProbeConfig(images_per_descriptor=2), progress=False)
        vision = OpenAIVisionBackend("gpt-4o", base_url=server.base_url, concurrency=2)
        probe = I2TProbeConfig(settings=("comprehensive", "stereotypical"))
        i2t = probe_i2t(t2i.audit_id, vision, probe, progress=False)
        sent = list(server.requests)

    # DALL-E 3 requests: the paper's parameters, one image per call, styles alternated
    drawn = [r for r in sent if r["path"].endswith("/images/generations")]
    assert len(drawn) == 4 and (t2i.generated, dict(t2i.statuses)) == (4, {"ok": 4})
    for r in drawn:
        body = r["json"]
        assert (body["model"], body["size"], body["quality"], body["n"], body["response_format"]) == (
            "dall-e-3",
            "1024x1024",
            "standard",
            1,
            "b64_json",
        )
        assert {k.lower(): v for k, v in r["headers"].items()}["authorization"] == "Bearer sk-test-secret"
    assert Counter(r["json"]["style"] for r in drawn) == {"vivid": 2, "natural": 2}
    assert {r["json"]["prompt"] for r in drawn} == {"Generate an image of a Child", "Generate an image of an Old person"}
    rows = read_landing("t2i_images").to_pylist()
    for row in rows:
        assert row["style"] == ("vivid" if row["image_index"] == 1 else "natural")
        assert row["revised_prompt"] == row["prompt"]  # the stub echoes the prompt it "drew"
        assert image_file(row["image_path"]).read_bytes() == tiny_png(COLOURS[row["descriptor"]], size=(12, 12))
        assert row["sha256"] == hashlib.sha256(tiny_png(COLOURS[row["descriptor"]], size=(12, 12))).hexdigest()

    # GPT-4o requests: the prompt verbatim plus the stored PNG as a data URL; paper sampling
    described = [r["json"] for r in sent if r["path"].endswith("/chat/completions")]
    assert len(described) == 8 and (i2t.generated, dict(i2t.statuses)) == (8, {"ok": 8})
    stored = {image_file(r["image_path"]).read_bytes() for r in rows}
    for body in described:
        assert (body["model"], body["temperature"], body["top_p"], body["max_tokens"]) == ("gpt-4o", 0.7, 0.95, 200)
        content = body["messages"][0]["content"]
        assert content[0]["text"] in (I2T_PROMPTS["comprehensive"], I2T_PROMPTS["stereotypical"])
        assert base64.b64decode(content[1]["image_url"]["url"].split(",", 1)[1]) in stored
    assert any(b["messages"][0]["content"][0]["text"].startswith("Describe this image objectively. Objective descriptions") for b in described)

    assert land_description_words()["descriptions"] == 8
    invoke_dbt(["build", "--select", DBT_SELECTION, *NO_UNIT_TESTS], dora_home)
    with duckdb.connect(str(dora_home / "warehouse.duckdb"), read_only=True) as con:
        assoc = {
            (m, d, w): (model, tf, df, tfidf)
            for m, d, w, model, tf, df, tfidf in con.execute(
                "select modality, descriptor, word, model_id, tf, df, tfidf from fct_associations"
            ).fetchall()
        }
    # objective -> t2i, attributed to DALL-E 3; two identical descriptions per descriptor: tf 2.
    # Defaults (the paper's code, docs/method.md#3a-paper-statistics): NLTK's stop list, which keeps
    # "beside" (spaCy's drops it), and the descriptor's own words kept ("child", "old").
    assert {w for m, d, w in assoc if (m, d) == ("t2i", "child")} == {"yellow", "raincoat", "stand", "red", "bicycle", "beside", "child"}
    assert {w for m, d, w in assoc if (m, d) == ("t2i", "old person")} == {"woman", "gray", "cardigan", "read", "book", "old"}
    model, tf, df, tfidf = assoc[("t2i", "child", "raincoat")]
    assert (model, tf, df) == ("dall-e-3", 2, 1) and tfidf == pytest.approx(2 * math.log(2))
    # subjective (stereotypical) -> i2t, attributed to GPT-4o; the descriptors' own
    # words are kept ("child", "people") and NLTK's list keeps "often" / "see" (spaCy's drops them)
    assert {w for m, d, w in assoc if (m, d) == ("i2t", "child")} == {"child", "often", "see", "playful", "innocent"}
    assert {w for m, d, w in assoc if (m, d) == ("i2t", "old person")} == {"people", "often", "see", "elderly", "frail", "forgetful"}
    assert assoc[("i2t", "old person", "frail")][:3] == ("gpt-4o", 2, 1)


def test_api_errors_become_rows_and_are_retried(dora_home, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    templates = select_t2i_templates(curated_t2i_templates(["singular"]), descriptors=["child"])
    with OpenAIStubServer() as server:
        server.image_png = _draw
        server.chat_reply = _describe
        images = OpenAIImagesBackend("dall-e-3", base_url=server.base_url, concurrency=1, max_retries=0)
        server.fail_next(500)  # a server error: an 'error' row, retried by the next run
        server.fail_next(400)  # a refused prompt (content policy): final
        server.image_png = _draw
        # max_error_share=None: 1 failed image in 3 is stored as a row and the run goes on (with the
        # default limit the step would fail after landing it: tests/test_error_share_families.py)
        first = probe_t2i(templates, images, T2IProbeConfig(images_per_descriptor=3), progress=False, max_error_share=None)
        assert dict(first.statuses) == {"error": 1, "refused": 1, "ok": 1}
        second = probe_t2i(templates, images, T2IProbeConfig(images_per_descriptor=3), progress=False)
        assert (second.generated, second.already_landed, dict(second.statuses)) == (1, 2, {"ok": 1})
        rows = read_landing("t2i_images").to_pylist()
        assert sorted(r["status"] for r in rows) == ["error", "ok", "ok", "refused"]
        assert all(r["error"] and r["image_path"] is None for r in rows if r["status"] != "ok")

        vision = OpenAIVisionBackend("gpt-4o", base_url=server.base_url, concurrency=1, max_retries=0)
        server.fail_next(429)
        probe = I2TProbeConfig(settings=("comprehensive",))
        described = probe_i2t(first.audit_id, vision, probe, progress=False, max_error_share=None)
        assert dict(described.statuses) == {"error": 1, "ok": 1}  # the refused image is not described
        retried = probe_i2t(first.audit_id, vision, probe, progress=False)
        assert (retried.generated, retried.already_landed) == (1, 1)
    err = [r for r in read_landing("i2t_descriptions").to_pylist() if r["status"] == "error"]
    assert len(err) == 1 and "RateLimitError" in err[0]["error"] and err[0]["raw_output"] is None


def test_missing_api_key_is_a_clear_error(dora_home, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    templates = select_t2i_templates(curated_t2i_templates(["singular"]), descriptors=["child"])
    with pytest.raises(ModelNotAvailableError, match="OPENAI_API_KEY"):
        probe_t2i(templates, OpenAIImagesBackend("dall-e-3"), T2IProbeConfig(images_per_descriptor=1), progress=False)
    events = sorted(read_landing("audits").to_pylist(), key=lambda e: e["event_at"])
    assert [e["status"] for e in events] == ["started", "failed"] and {e["modality"] for e in events} == {"t2i"}


@pytest.mark.slow
def test_vision_assets_skip_cleanly_then_run_when_models_are_named(dora_home, monkeypatch):
    """Dagster: images -> descriptions -> words; nothing configured = a clear skip, not a failure."""
    import dagster as dg

    from orchestration.defs.biasdora.vision.assets import vision_assets

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(vision_assets, instance=instance)
        assert result.success
        md = {tuple(e.materialization.asset_key.path): e.materialization.metadata for e in result.get_asset_materialization_events()}
        assert md[("landing", "t2i_images")]["status"].value == "skipped"
        assert md[("landing", "t2i_images")]["reason"].value == "no model configured"
        assert "--t2i-model" in md[("landing", "t2i_images")]["how_to_enable"].value
        assert md[("landing", "i2t_descriptions")]["status"].value == "skipped"
        assert md[("landing", "description_words")]["descriptions_tokenised"].value == 0
        assert (dora_home / "landing" / "t2i_images" / "_schema.parquet").exists()  # dbt's source glob stays valid

        # an API model without its key is skipped with the reason, not failed
        cfg = {
            "t2i_backend": "openai",
            "t2i_model": "dall-e-3",
            "descriptors": ["child"],
            "images_per_descriptor": 1,
            "t2i_settings": ["singular"],
            "i2t_backend": "openai",
            "i2t_model": "gpt-4o",
            "i2t_settings": ["comprehensive", "stereotypical"],
            "progress": False,
        }
        run_config = {"ops": {"t2i_images": {"config": cfg}, "i2t_descriptions": {"config": cfg}}}
        result = dg.materialize(vision_assets, instance=instance, run_config=run_config)
        md = {tuple(e.materialization.asset_key.path): e.materialization.metadata for e in result.get_asset_materialization_events()}
        assert md[("landing", "t2i_images")]["reason"].value == "OPENAI_API_KEY is not set"

        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        with OpenAIStubServer() as server:
            server.image_png = _draw
            server.chat_reply = _describe
            cfg.update(t2i_base_url=server.base_url, i2t_base_url=server.base_url)
            result = dg.materialize(vision_assets, instance=instance, run_config=run_config)
        assert result.success
        md = {tuple(e.materialization.asset_key.path): e.materialization.metadata for e in result.get_asset_materialization_events()}
        images, descs = md[("landing", "t2i_images")], md[("landing", "i2t_descriptions")]
        assert images["status"].value == "finished" and images["rows_generated"].value == 1
        assert descs["image_audit_id"].value == images["audit_id"].value  # this run's images
        assert descs["rows_generated"].value == 2 and descs["model_id"].value == "gpt-4o"
        # the defaults (NLTK stop list, descriptor words kept), as in the test above:
        # child yellow raincoat stand beside red bicycle; child often see playful innocent
        assert md[("landing", "description_words")]["words"].value == 7 + 5
