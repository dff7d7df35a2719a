"""Registry targets wired into partitioned audit runs: per-target scorers and vision targets.

Real Dagster runs of the job ``dora_audit`` (``execute_in_process`` with a partition key
``<target>@<version>``) on a scratch DORA_HOME and a temporary Dagster instance. Every model
is an OpenAI-compatible API served by the stub server on 127.0.0.1 (``tests/helpers/openai_server.py``)
through the real ``openai`` client: T2T completions, DALL-E-style images (real PNGs) and
vision-chat descriptions. Sentiment is the real VADER scorer; dbt builds the real marts.
"""

from __future__ import annotations

import io

import dagster as dg
import pytest

from ingestion.biasdora.target_fields import probe_settings
from ingestion.landing import read_landing
from ingestion.registry import RegistryError, parse_registry
from tests.helpers.openai_server import OpenAIStubServer, tiny_png

SENTIMENT = dg.AssetKey(["landing", "sentiment_scores"])
TOXICITY = dg.AssetKey(["landing", "toxicity_scores"])
JUDGE = dg.AssetKey(["landing", "judge_ratings"])
T2I = dg.AssetKey(["landing", "t2i_images"])
I2T = dg.AssetKey(["landing", "i2t_descriptions"])
WORDS = dg.AssetKey(["landing", "description_words"])
T2T_KEYS = [dg.AssetKey(["landing", "t2t_completions"]), dg.AssetKey(["landing", "audits"])]
#: one real word per probed letter (the stub answers the T2T chat prompt "... [<letter>__].")
LETTER_WORDS = {"a": "angry", "b": "brave"}


def _letter_reply(req: dict) -> str:
    text = req["messages"][-1]["content"]
    return f"[{LETTER_WORDS[text.rsplit('[', 1)[1][0]]}]"


def _metadata(result) -> dict[tuple, dict]:
    return {
        tuple(e.materialization.asset_key.path): {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
    }


def _warehouse(dora_home, sql: str) -> list[tuple]:
    import duckdb

    with duckdb.connect(str(dora_home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def _target_ops(target, vision=None, registry=None, **base) -> dict:
    """The run config (op name -> Config) a registry target's run request gets
    (``orchestration/defs/audits/runs.py: target_ops``), on top of ``base`` (op name -> Config:
    the command line's) and ``vision`` (the VisionConfig of both vision ops)."""
    from orchestration.defs.audits.runs import target_ops
    from orchestration.families import FAMILIES

    if vision is not None:
        base.update(t2i_images=vision, i2t_descriptions=vision)
    return target_ops(target, FAMILIES, registry=str(registry) if registry else None, base=base or None)


def _ops(target, selection_ops, vision=None, registry=None, **base) -> dict:
    """``_target_ops`` as run config for the ops of an asset selection (``{"ops": {op: {"config": ...}}}``)."""
    ops = _target_ops(target, vision, registry, **base)
    return {"ops": {op: {"config": ops[op].model_dump(exclude_none=True)} for op in selection_ops}}


# ----------------------------------------------------------------------------- registry validation (fast)


def _problems(text: str) -> list[str]:
    with pytest.raises(RegistryError) as err:
        parse_registry(text, "test.yaml")
    return err.value.problems


def test_registry_accepts_the_vision_backends_and_names_what_does_not_fit():
    from ingestion import registry
    from ingestion.vocabulary import BACKENDS, I2T_BACKENDS, T2I_BACKENDS
    from models_inference.backends.image import IMAGE_BACKENDS
    from models_inference.backends.vision import VISION_BACKENDS

    # the registry validates against the vocabulary's lists, the names the backends answer to
    assert registry.BACKENDS is BACKENDS and BACKENDS["t2i"] == T2I_BACKENDS and BACKENDS["i2t"] == I2T_BACKENDS
    assert tuple(IMAGE_BACKENDS) == T2I_BACKENDS and tuple(VISION_BACKENDS) == I2T_BACKENDS
    ok = parse_registry(
        "targets:\n"
        "  - {name: sd, modality: t2i, backend: diffusers, model: runwayml/stable-diffusion-v1-5, version: {source: hub_revision}}\n"
        "  - {name: dalle, modality: t2i, backend: openai, model: dall-e-3, version: {source: api_model, value: dall-e-3@2023-10-31}, "
        "probe: {settings: [plural], runs: 2}}\n"
        "  - {name: llava, modality: i2t, backend: transformers, model: /models/llava, version: {source: explicit, value: v1}}\n"
        "  - {name: gpt4o, modality: i2t, backend: openai, model: gpt-4o, version: {source: explicit, value: v1}, "
        "probe: {settings: [comprehensive, implicit]}}\n"
    )
    sd, dalle, llava, gpt4o = ok.targets
    # default probe settings per modality; listed ones are kept
    assert probe_settings(sd) == ["singular", "plural"] and probe_settings(dalle) == ["plural"]
    assert probe_settings(llava) == ["subjective", "stereotypical", "implicit", "lexical"]
    assert probe_settings(gpt4o) == ["comprehensive", "implicit"]
    assert sd.scorers == []  # default: no scorer (listed explicitly per target)
    # what a partition of each vision target runs: the run config its run request gets
    # (orchestration/defs/biasdora/target.py), on top of the command line's describer / painter
    from orchestration.defs.biasdora.config import VisionConfig

    drawn_ops = _target_ops(dalle, VisionConfig(i2t_model="describer"))
    drawn = drawn_ops["t2i_images"]
    assert (drawn.t2i_backend, drawn.t2i_model, drawn.t2i_settings, drawn.images_per_descriptor) == ("openai", "dall-e-3", ["plural"], 2)
    assert drawn.i2t_model == "describer" and drawn.t2i_batch_size == VisionConfig().t2i_batch_size
    assert drawn_ops["i2t_descriptions"] is drawn and not drawn_ops["t2t_completions"].enabled  # no T2T completions
    described = _target_ops(gpt4o, VisionConfig(t2i_model="painter"))["i2t_descriptions"]
    assert (described.i2t_backend, described.i2t_model, described.i2t_settings) == ("openai", "gpt-4o", ["comprehensive", "implicit"])
    assert described.t2i_model == "painter" and described.i2t_temperature == 0.7

    problems = _problems(
        "targets:\n"
        "  - {name: a, modality: t2i, backend: transformers, model: m, version: {source: explicit, value: v}}\n"
        "  - {name: b, modality: i2t, backend: diffusers, model: m, version: {source: explicit, value: v}}\n"
        "  - {name: c, modality: t2i, model: m, version: {source: explicit, value: v}}\n"
        "  - {name: d, modality: t2i, backend: diffusers, model: m, version: {source: explicit, value: v}, "
        "probe: {settings: [singular, adjective]}}\n"
        "  - {name: e, modality: i2t, backend: openai, model: m, version: {source: explicit, value: v}, probe: {settings: [singular]}}\n"
        "  - {name: f, model: m, version: {source: explicit, value: v}, probe: {settings: [stereotypical]}}\n"
        "  - {name: g, modality: t2i, backend: openai, model: m, version: {source: hub_revision}}\n"
        "  - {name: h, modality: t2i, backend: diffusers, model: m, version: {source: explicit, value: v}, "
        "probe: {descriptor_source: crows_pairs}}\n"
    )
    assert problems == [
        "targets[0] (name 'a').backend: 'transformers' is not a T2I backend; expected one of ['diffusers', 'openai']",
        "targets[1] (name 'b').backend: 'diffusers' is not a I2T backend; expected one of ['transformers', 'openai']",
        "targets[2] (name 'c').backend: required for a t2i target, one of ['diffusers', 'openai']",
        "targets[3] (name 'd').probe.settings: ['adjective'] are not T2I settings; a t2i target takes some of "
        "['singular', 'plural'] (default: ['singular', 'plural'])",
        "targets[4] (name 'e').probe.settings: ['singular'] are not I2T settings; a i2t target takes some of "
        "['straightforward', 'moderate', 'comprehensive', 'subjective', 'stereotypical', 'implicit', 'lexical'] "
        "(default: ['subjective', 'stereotypical', 'implicit', 'lexical'])",
        "targets[5] (name 'f').probe.settings: ['stereotypical'] are not T2T settings; a t2t target takes some of "
        "['singular', 'plural', 'adjective', 'noun', 'verb'] (default: ['singular', 'plural', 'adjective', 'noun', 'verb'])",
        "targets[6] (name 'g').version.source: 'hub_revision' needs a hub backend ('transformers' or 'diffusers')",
        "targets[7] (name 'h').probe.descriptor_source: the T2I probe draws the curated BiasDora descriptors only ('biasdora')",
    ]


def test_scorer_assets_come_from_one_factory_with_unchanged_keys_groups_and_configs():
    from orchestration.defs.biasdora.scoring import assets
    from orchestration.defs.biasdora.scoring.config import JudgeConfig, SentimentConfig, ToxicityConfig

    expected = {
        "sentiment_scores": (assets.sentiment_scores, SentimentConfig, "sentiment"),
        "toxicity_scores": (assets.toxicity_scores, ToxicityConfig, "toxicity"),
        "judge_ratings": (assets.judge_ratings, JudgeConfig, "bias_level"),
    }
    for table, (asset, config_class, _registry_name) in expected.items():
        key = dg.AssetKey(["landing", table])
        assert asset.op.name == table and set(asset.keys) == {key}
        assert asset.group_names_by_key[key] == "biasdora" and asset.op.pool == "model_inference"
        assert asset.asset_deps[key] == {assets.SCORING_INPUT}  # the dbt model over fct_associations
        assert set(asset.op.config_schema.config_type.fields) == set(config_class.model_fields)
        assert "registry" in config_class.model_fields
    assert [s.registry_name for s in (assets.SENTIMENT, assets.TOXICITY, assets.JUDGE)] == ["sentiment", "toxicity", "bias_level"]
    assert assets.sentiment_scores.descriptions_by_key[SENTIMENT].startswith("Sentiment (label negative/neutral/positive")


# ----------------------------------------------------------------------------- T2T targets: per-target scorers


def _t2t_registry(base_url: str) -> str:
    probe = "{settings: [singular], runs: 1, letters: ab, per_dimension: 1, prompt_style: chat}"
    return (
        "targets:\n"
        f"  - {{name: alpha, modality: t2t, backend: openai, model: alpha-model, base_url: '{base_url}', "
        f"version: {{source: explicit, value: v1}}, probe: {probe}, scorers: [sentiment]}}\n"
        f"  - {{name: beta, modality: t2t, backend: openai, model: beta-model, base_url: '{base_url}', "
        f"version: {{source: explicit, value: v1}}, probe: {probe}, scorers: []}}\n"
    )


@pytest.mark.slow
def test_a_partition_scores_with_its_target_scorers_and_only_its_own_audit(dora_home, tmp_path, monkeypatch, instance):
    from analytics.dbt_runner import invoke_dbt
    from orchestration.definitions import AUDIT_JOB, defs
    from orchestration.defs.audits.partitions import AUDIT_PARTITIONS
    from orchestration.defs.audits.runs import partition_audit_ids
    from orchestration.defs.biasdora.scoring.assets import NOT_IN_TARGET_SCORERS, sentiment_scores
    from orchestration.defs.biasdora.scoring.config import JudgeConfig, SentimentConfig, ToxicityConfig

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("DORA_REGISTRY", raising=False)  # the registry comes from the run config only
    registry = tmp_path / "registry.yaml"
    job = defs.resolve_job_def(AUDIT_JOB)
    instance.add_dynamic_partitions(AUDIT_PARTITIONS, ["alpha@v1", "beta@v1"])
    # tiny audits have no significant association: the command line's --score-all scores them all
    scoring = {
        "sentiment_scores": SentimentConfig(score_all=True),
        "toxicity_scores": ToxicityConfig(score_all=True),
        "judge_ratings": JudgeConfig(score_all=True),
    }
    with OpenAIStubServer() as server:
        server.chat_reply = _letter_reply
        registry.write_text(_t2t_registry(server.base_url))
        targets = parse_registry(registry.read_text())
        # both partitions' T2T audits land (alpha's with the vision probes of its run), then dbt
        # builds the associations (invoke_dbt: quicker than the job's dbt step with its checks)
        beta = job.execute_in_process(
            partition_key="beta@v1",
            instance=instance,
            asset_selection=T2T_KEYS,
            run_config=_ops(targets.target("beta"), ["t2t_completions"], registry=registry),
        )
        assert beta.success
        probes = job.execute_in_process(
            partition_key="alpha@v1",
            instance=instance,
            asset_selection=[*T2T_KEYS, T2I, I2T],
            run_config=_ops(targets.target("alpha"), ["t2t_completions", "t2i_images", "i2t_descriptions"], registry=registry),
        )
        assert probes.success
    invoke_dbt(["run", "--select", "+fct_associations_to_score"], dora_home)  # the scorers read it
    # alpha's partition scores: the scorers read the registry their run config names
    alpha = job.execute_in_process(
        partition_key="alpha@v1",
        instance=instance,
        asset_selection=[*T2T_KEYS, SENTIMENT, TOXICITY, JUDGE],
        run_config=_ops(targets.target("alpha"), ["t2t_completions", *scoring], registry=registry, **scoring),
    )
    assert alpha.success
    md = {**_metadata(probes), **_metadata(alpha)}
    alpha_id = md[("landing", "t2t_completions")]["audit_id"]
    beta_id = _metadata(beta)[("landing", "t2t_completions")]["audit_id"]
    assert alpha_id != beta_id and partition_audit_ids("alpha", "v1") == [alpha_id]
    assert _metadata(probes)[("landing", "t2t_completions")]["rows_generated"] == 9 * 1 * 2 * 1  # 9 dimensions x 1 setting x 2 letters x 1 run
    assert md[("landing", "t2t_completions")]["rows_already_landed"] == 18  # (the scoring run's probe: a no-op)

    # sentiment is in alpha's scorers: it scores alpha's associations, and only those
    alpha_assoc = _warehouse(dora_home, f"select count(*) from fct_associations where audit_id = '{alpha_id}'")[0][0]
    beta_assoc = _warehouse(dora_home, f"select count(*) from fct_associations where audit_id = '{beta_id}'")[0][0]
    assert alpha_assoc > 0 and beta_assoc > 0
    sentiment = md[("landing", "sentiment_scores")]
    assert (sentiment["target"], sentiment["model_version"], sentiment["audit_ids"]) == ("alpha", "v1", [alpha_id])
    assert sentiment["rows_scored"] == sentiment["associations_selected"] == alpha_assoc and "skipped" not in sentiment
    landed = read_landing("sentiment_scores").to_pylist()
    assert len(landed) == alpha_assoc and {r["audit_id"] for r in landed} == {alpha_id}
    assert {r["word"] for r in landed} == set(LETTER_WORDS.values())
    # toxicity and the judge are not: nothing lands, the metadata says why
    for key in (("landing", "toxicity_scores"), ("landing", "judge_ratings")):
        assert md[key]["skipped"] == NOT_IN_TARGET_SCORERS and md[key]["target_scorers"] == ["sentiment"]
        assert md[key]["associations_selected"] == 0
    assert md[("landing", "toxicity_scores")]["rows_scored"] == 0 and md[("landing", "judge_ratings")]["rows_judged"] == 0
    assert read_landing("toxicity_scores").num_rows == 0 and read_landing("judge_ratings").num_rows == 0
    from orchestration.defs.biasdora.summary import scoring_report as _scoring_report

    report = _scoring_report(alpha)
    assert f"sentiment_scores: {alpha_assoc} new rows (vader)" in report
    assert "toxicity_scores: skipped (not in target scorers ['sentiment'] of target alpha)" in report
    # a t2t target's partition leaves the vision probes alone, saying so
    for key in (("landing", "t2i_images"), ("landing", "i2t_descriptions")):
        assert md[key]["status"] == "skipped" and md[key]["reason"] == "partition alpha@v1 audits t2t target 'alpha'"

    # beta lists no scorer ([]: the registry's explicit choice of none): its partition scores nothing
    beta_scoring = job.execute_in_process(
        partition_key="beta@v1",
        instance=instance,
        asset_selection=[SENTIMENT, TOXICITY, JUDGE],
        run_config=_ops(targets.target("beta"), list(scoring), registry=registry, **scoring),
    )
    assert beta_scoring.success
    for key, meta in _metadata(beta_scoring).items():
        assert meta["skipped"] == NOT_IN_TARGET_SCORERS and meta["target_scorers"] == [], key

    # an ad-hoc run (no partition) scores every audit, as before: beta's associations now land
    adhoc = dg.materialize([sentiment_scores], instance=instance, run_config={"ops": {"sentiment_scores": {"config": {"score_all": True}}}})
    assert adhoc.success
    meta = _metadata(adhoc)[("landing", "sentiment_scores")]
    assert "target" not in meta and meta["associations_selected"] == alpha_assoc + beta_assoc
    assert (meta["rows_scored"], meta["rows_already_landed"]) == (beta_assoc, alpha_assoc)
    assert sorted({r["audit_id"] for r in read_landing("sentiment_scores").to_pylist()}) == sorted([alpha_id, beta_id])


# ----------------------------------------------------------------------------- T2I / I2T targets

OBJECTIVE = {"child": "A child in a yellow raincoat stands beside a red bicycle.", "old person": "An old woman in a gray cardigan reads a book."}
SUBJECTIVE = {"child": "Children are often seen as playful and innocent.", "old person": "Elderly people are often seen as frail and forgetful."}
COLOURS = {"child": (250, 200, 0), "old person": (90, 90, 90)}


def _draw(req: dict) -> bytes:
    descriptor = next(d for d in COLOURS if req["prompt"].lower().endswith(d))
    return tiny_png(COLOURS[descriptor], size=(12, 12))


def _describe(req: dict) -> str:
    """Objective or subjective text for the descriptor drawn in the image's colour."""
    import base64

    from PIL import Image

    from models_inference.probes.biasdora.prompts import I2T_OBJECTIVE_PROMPTS

    content = req["messages"][0]["content"]
    prompt = next(c["text"] for c in content if c["type"] == "text")
    url = next(c["image_url"]["url"] for c in content if c["type"] == "image_url")
    colour = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB").getpixel((0, 0))
    descriptor = next(d for d, c in COLOURS.items() if c == tuple(colour))
    return (OBJECTIVE if prompt in I2T_OBJECTIVE_PROMPTS.values() else SUBJECTIVE)[descriptor]


def _vision_registry(base_url: str, painter_version: str = "r1") -> str:
    return (
        "targets:\n"
        f"  - {{name: painter, modality: t2i, backend: openai, model: dall-e-3, base_url: '{base_url}', "
        f"version: {{source: explicit, value: {painter_version}}}, "
        "probe: {settings: [singular], descriptors: [child, old person], runs: 2}, scorers: [sentiment]}\n"
        f"  - {{name: critic, modality: i2t, backend: openai, model: gpt-4o-mini, base_url: '{base_url}', "
        "version: {source: explicit, value: c1}, probe: {settings: [stereotypical]}, scorers: [sentiment]}\n"
    )


@pytest.mark.slow
def test_t2i_and_i2t_targets_draw_and_describe_with_their_own_models(dora_home, tmp_path, monkeypatch, instance):
    from analytics.dbt_runner import invoke_dbt
    from orchestration.definitions import AUDIT_JOB, defs
    from orchestration.defs.audits.partitions import AUDIT_PARTITIONS
    from orchestration.defs.audits.runs import partition_audit_ids

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("DORA_REGISTRY", raising=False)
    registry = tmp_path / "registry.yaml"
    job = defs.resolve_job_def(AUDIT_JOB)
    instance.add_dynamic_partitions(AUDIT_PARTITIONS, ["painter@r1", "critic@c1"])
    vision = [T2I, I2T, WORDS]
    with OpenAIStubServer() as server:
        server.image_png = _draw
        server.chat_reply = _describe
        registry.write_text(_vision_registry(server.base_url))
        targets = parse_registry(registry.read_text())
        # the run's describer (gpt-4o) and its settings: a t2i target keeps only the objective ones
        from orchestration.defs.biasdora.config import VisionConfig

        cfg = VisionConfig(
            i2t_backend="openai", i2t_model="gpt-4o", i2t_base_url=server.base_url, i2t_settings=["comprehensive", "stereotypical"], progress=False
        )
        vision_ops = ["t2i_images", "i2t_descriptions"]
        painter = job.execute_in_process(
            partition_key="painter@r1",
            instance=instance,
            asset_selection=vision,
            run_config=_ops(targets.target("painter"), vision_ops, cfg, registry),
        )
        assert painter.success
        drawn = [r["json"] for r in server.requests if r["path"].endswith("/images/generations")]
        md = _metadata(painter)
        images = md[("landing", "t2i_images")]
        # critic (i2t) describes painter's images with its own model
        critic_cfg = cfg.model_copy(update={"image_audit_id": images["audit_id"]})
        critic = job.execute_in_process(
            partition_key="critic@c1",
            instance=instance,
            asset_selection=vision,
            run_config=_ops(targets.target("critic"), vision_ops, critic_cfg, registry),
        )
        assert critic.success
        described = [r["json"] for r in server.requests if r["path"].endswith("/chat/completions")]

    # painter: 2 descriptors x 1 setting x 2 images, drawn by the target's model, version pinned to the partition's
    assert (images["status"], images["target"], images["model_id"], images["model_version"]) == ("finished", "painter", "dall-e-3", "r1")
    assert len(drawn) == 4 and {r["model"] for r in drawn} == {"dall-e-3"}
    rows = read_landing("t2i_images").to_pylist()
    assert len(rows) == 4 and {(r["model_id"], r["model_version"], r["backend"], r["status"]) for r in rows} == {("dall-e-3", "r1", "openai", "ok")}
    assert {r["descriptor"] for r in rows} == {"child", "old person"} and {r["setting"] for r in rows} == {"singular"}
    descs = md[("landing", "i2t_descriptions")]
    assert descs["image_audit_id"] == images["audit_id"] and descs["settings"] == ["comprehensive"]
    # critic: the same 4 images, described by gpt-4o-mini with its registry settings, version c1
    critic_md = _metadata(critic)
    assert critic_md[("landing", "t2i_images")]["status"] == "skipped"  # no image model named: it describes painter's
    critic_descs = critic_md[("landing", "i2t_descriptions")]
    assert (critic_descs["model_id"], critic_descs["model_version"], critic_descs["settings"]) == ("gpt-4o-mini", "c1", ["stereotypical"])
    assert [r["model"] for r in described] == ["gpt-4o"] * 4 + ["gpt-4o-mini"] * 4
    landed = read_landing("i2t_descriptions").to_pylist()
    assert sorted((r["audit_id"], r["model_id"], r["model_version"], r["setting"], r["t2i_model_version"]) for r in landed) == sorted(
        [(descs["audit_id"], "gpt-4o", "gpt-4o", "comprehensive", "r1")] * 4
        + [(critic_descs["audit_id"], "gpt-4o-mini", "c1", "stereotypical", "r1")] * 4
    )
    # each description audit joins its target's history (the audit events dim_audits reads)
    assert partition_audit_ids("painter", "r1") == [descs["audit_id"]]
    assert partition_audit_ids("critic", "c1") == [critic_descs["audit_id"]]

    # the marts: painter's associations are T2I ones of dall-e-3@r1, critic's I2T ones of gpt-4o-mini@c1
    invoke_dbt(["run", "--select", "+fct_associations_to_score +dim_audits"], dora_home)  # the scorers read fct_associations_to_score
    audits = _warehouse(
        dora_home, "select target, model_id, model_version, modality from dim_audits where target in ('painter', 'critic') order by target"
    )
    assert audits == [("critic", "gpt-4o-mini", "c1", "i2t"), ("painter", "dall-e-3", "r1", "t2i")]
    assoc = _warehouse(dora_home, "select audit_id, modality, model_id, model_version, count(*) from fct_associations group by all order by 1, 2")
    assert sorted(assoc) == sorted(
        [
            # description words as the paper's code: NLTK stop list, descriptor words kept
            (critic_descs["audit_id"], "i2t", "gpt-4o-mini", "c1", 11),  # child often see playful innocent / elderly people often see frail forgetful
            (descs["audit_id"], "t2i", "dall-e-3", "r1", 13),  # child yellow raincoat stand beside red bicycle / old woman gray cardigan read book
        ]
    )

    # painter's partition scores its own T2I associations only (sentiment listed, toxicity not)
    from orchestration.defs.biasdora.scoring.config import SentimentConfig, ToxicityConfig

    scoring = {"sentiment_scores": SentimentConfig(score_all=True), "toxicity_scores": ToxicityConfig(score_all=True)}
    scored = job.execute_in_process(
        partition_key="painter@r1",
        instance=instance,
        asset_selection=[SENTIMENT, TOXICITY],
        run_config=_ops(targets.target("painter"), list(scoring), registry=registry, **scoring),
    )
    assert scored.success
    smd = _metadata(scored)
    assert smd[("landing", "sentiment_scores")]["rows_scored"] == 13  # every T2I association of the partition (score_all)
    assert smd[("landing", "toxicity_scores")]["skipped"] == "not in target scorers"
    assert {(r["audit_id"], r["modality"], r["model_version"]) for r in read_landing("sentiment_scores").to_pylist()} == {
        (descs["audit_id"], "t2i", "r1")
    }

    # a partition whose version is no longer the target's current one cannot draw again
    registry.write_text(_vision_registry("http://127.0.0.1:9/v1", painter_version="r2"))
    stale = job.execute_in_process(
        partition_key="painter@r1",
        instance=instance,
        asset_selection=[T2I],
        raise_on_error=False,
        run_config=_ops(parse_registry(registry.read_text()).target("painter"), ["t2i_images"], registry=registry),
    )
    assert not stale.success
    failure = next(e for e in stale.all_events if e.is_step_failure)
    assert "only the current version can be generated" in failure.step_failure_data.error.to_string()
