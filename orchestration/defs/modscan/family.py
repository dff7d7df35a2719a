"""The ModSCAN family (seed 000) for the family seam (:mod:`orchestration.family`).

Its flags are ``--modscan-*`` (derived from :class:`ModscanConfig`'s fields) plus the short
``--faces`` and the repeatable ``--prefix``.
"""

from __future__ import annotations

from analytics.drift import DriftCheck, FamilyDrift
from analytics.family_diff import FamilyChangeTest
from ingestion.vocabulary import I2T_BACKENDS, T2I_BACKENDS, T2T_BACKENDS
from models_inference.probes.modscan.tables import ATTRIBUTES, PREFIXES, SCENARIOS
from models_inference.probes.modscan.text import ANSWER_MODES, CONDITIONS, TEXT_PROBES
from orchestration import cli_validation as v
from orchestration.defs.modscan.config import ModscanConfig
from orchestration.family import EstimatedStep, Flag, declared_family, text_model_target

NAME = "modscan"
OP = "modscan_responses"
M = ModscanConfig
P = "modscan-"


def _with_original(prefixes) -> list[str]:
    """The original prompt is always probed alongside the prefixes (their deltas need it)."""
    return ["none", *[p for p in (prefixes or []) if p != "none"]]


FLAGS: tuple[Flag, ...] = (
    Flag(((M, "model"),), prefix=P, local_model="modscan_backend"),
    Flag(((M, "backend"),), prefix=P, choices=T2T_BACKENDS),
    Flag(((M, "base_url"),), prefix=P, validator=v.base_urls),
    Flag(((M, "probes"),), prefix=P, choices=TEXT_PROBES),
    Flag(((M, "attributes"),), prefix=P, choices=ATTRIBUTES),
    Flag(((M, "scenarios"),), prefix=P, choices=tuple(SCENARIOS)),
    Flag(((M, "conditions"),), prefix=P, choices=CONDITIONS),
    *Flag.of(M, "runs", prefix=P),
    Flag(((M, "instances_per_scenario"),), name="--modscan-instances"),
    *Flag.of(M, "max_new_tokens", "block_queries", prefix=P),
    Flag(((M, "answer_mode"),), prefix=P, choices=ANSWER_MODES),
    Flag(((M, "faces"),), name="--faces", path="file_or_folder"),
    Flag(((M, "vision_model"),), prefix=P, local_model="modscan_vision_backend"),
    Flag(((M, "vision_backend"),), prefix=P, choices=I2T_BACKENDS),
    Flag(((M, "vision_base_url"),), prefix=P, validator=v.base_urls),
    *Flag.of(M, "pairs_per_group", prefix=P),
    Flag(((M, "vision_instances_per_scenario"),), name="--modscan-vision-instances"),
    Flag(((M, "t2i_model"),), prefix=P, local_model="modscan_t2i_backend"),
    Flag(((M, "t2i_backend"),), prefix=P, choices=T2I_BACKENDS),
    Flag(((M, "t2i_base_url"),), prefix=P, validator=v.base_urls),
    *Flag.of(M, "images_per_trait", "person_check", prefix=P),
    Flag(((M, "prefixes"),), name="--prefix", repeat=True, choices=tuple(sorted(PREFIXES)), convert=_with_original),
)


def check(configs) -> str | None:
    """``dora audit``'s check of the ModSCAN settings before Dagster starts: the vision and
    language modalities need the VLM that answers (``--modscan-vision-model``); without it
    ``--faces`` or ``--modscan-t2i-model`` would be ignored."""
    config = configs[OP]
    if config.vision_model:
        return None
    if config.faces:
        return "--faces needs --modscan-vision-model (the VLM shown the face pairs, seed 000 section 3.1)"
    if config.t2i_model:
        return "--modscan-t2i-model needs --modscan-vision-model (the VLM shown the scene images, seed 000 section 3.2)"
    return None


CHANGE_TEST = FamilyChangeTest(
    NAME,
    "fct_modscan_change_tests",
    "fct_modscan_responses",
    "generated_at",
    (
        "probe",
        "attribute",
        "scenario",
        "condition",
        "prefix",
        "instances_compared",
        "s_bias_before",
        "s_bias_after",
        "change_p",
        "change_q",
        "is_significant_change",
        "change_type",
    ),
    ("probe", "attribute", "scenario", "condition", "prefix"),
    "S_bias (Eq. 2) per probe, attribute, scenario, condition, prefix",
    "chi-square homogeneity of the answer counts (social groups + N/A), stratified by instance (S_bias is a function of them)",
)


def summary(result, args=None) -> str:
    """What ``dora audit`` prints for ModSCAN after a run: its S_bias table, or why it skipped."""
    from analytics.modscan import summary_text

    for mat in result.get_asset_materialization_events():
        if mat.materialization.asset_key.path != ["landing", "modscan_responses"]:
            continue
        md = {k: v.value for k, v in mat.materialization.metadata.items()}
        if md.get("status") == "skipped":
            return f"dora: ModSCAN skipped: {md.get('reason')}"
        lines = [summary_text(md["audit_id"])] if md.get("audit_id") else []
        for key in ("vision", "language"):
            if md.get(f"{key}_audit_id"):
                lines.append(summary_text(md[f"{key}_audit_id"]))
            lines.append(f"dora: ModSCAN {key} modality: {md.get(key)}")
        return "\n".join(lines)
    return ""


def plan(configs, model_version: str | None = None) -> str:
    """``dora audit --dry-run`` for ModSCAN: the text analogues' queries (no model loaded)."""
    from models_inference.probes.modscan.text import plan_text_queries
    from orchestration.defs.modscan.assets import text_probe_config

    config = configs[OP]
    queries = len(plan_text_queries(text_probe_config(config), "dry-run"))
    mode = "" if config.answer_mode == "free" else f", answers {config.answer_mode}"
    lines = [f"modscan: {queries:,} text-analogue queries ({', '.join(config.probes)}) on {config.model} ({config.backend}{mode})"]
    if not (config.faces and config.vision_model):
        lines.append("  vision modality: skipped (needs --faces and --modscan-vision-model)")
    if not (config.t2i_model and config.vision_model):
        lines.append("  language modality: skipped (needs --modscan-t2i-model and --modscan-vision-model)")
    return "\n".join(lines)


#: Measured times of the text analogues' default 50 queries on the embedded SmolLM2-135M (2
#: cores): the model's load (``bench_t2t_throughput``: 2.8 s); ``bench_dry_run_estimate`` in a
#: default audit on a shared machine: the 50 queries in 66.8 s at load ~15, its share of the dbt
#: build 15.7 s at load 17.6, each divided by the load factor of that load
#: (``orchestration.estimates.load_factor``: load / 2 cores, the audit's own process included).
MEASURED = {
    "model load": 2.8,
    "queries per second": round(50 / (66.8 / 7.5), 1),
    "dbt models": 15.7 / 8.8,
}


def estimate(configs, model_version: str | None = None) -> list[EstimatedStep]:
    """ModSCAN's steps of ``dora audit --dry-run``'s time estimate: its text analogues' queries
    (:func:`plan`'s count) at the rate measured on the embedded model, unknown on another model;
    the vision and language modalities unknown when they run; ``[]`` when the family is off."""
    from ingestion.vocabulary import DEFAULT_MODEL
    from models_inference.probes.modscan.text import plan_text_queries
    from orchestration.defs.modscan.assets import text_probe_config

    config = configs[OP]
    if not config.enabled:
        return []
    m = MEASURED
    queries = len(plan_text_queries(text_probe_config(config), "dry-run"))
    embedded = config.backend == "transformers" and config.model == DEFAULT_MODEL
    steps = [
        EstimatedStep("model load", m["model load"], "measured", "bench_t2t_throughput, BENCHMARKS.md")
        if embedded
        else EstimatedStep("model load", None, "unknown", f"not measured for {config.model}"),
        EstimatedStep(
            f"{queries:,} text-analogue queries",
            queries / m["queries per second"],
            "measured",
            f"{m['queries per second']} queries/s, bench_dry_run_estimate, scaled to a free machine",
        )
        if embedded
        else EstimatedStep(f"{queries:,} text-analogue queries", None, "unknown", f"no measured rate for {config.model} ({config.backend})"),
        EstimatedStep("dbt models (its share of the build)", m["dbt models"], "measured", "bench_dry_run_estimate, scaled to a free machine"),
    ]
    if (config.faces and config.vision_model) or (config.t2i_model and config.vision_model):
        steps.append(EstimatedStep("vision / language modalities", None, "unknown", "no measured rate for image models"))
    return steps


def _report_section(audit_id, out) -> str:
    from analytics.modscan import report_section

    return report_section(audit_id, out)


#: ModSCAN's drift checks (dbt_project/models/marts/modscan/agg_modscan_drift.sql)
DRIFT = FamilyDrift(
    NAME,
    "agg_modscan_drift",
    (
        DriftCheck("answered_share", "share of the common queries answered with a choice; exact McNemar", "falls"),
        DriftCheck("s_bias", "S_bias (Eq. 2) on the common queries; stratified chi-square", "rises"),
    ),
)


FAMILY = declared_family(
    __name__,
    title="ModSCAN (seed 000): S_bias of social-group selections, text analogues + vision / language modalities",
    paper="ModSCAN (seed 000)",
    modalities="vision (face pairs), language (scene images); text analogues",
    measures=("which face a model picks for an occupation / descriptor / persona trait, which demographic word for a scene: S_bias"),
    default_audit="on (the text-only analogues, not from the paper)",
    description="Text-only analogues of ModSCAN's two modalities (docs/families/modscan.md#text-only-use, NOT FROM PAPER; probe names "
    "modscan_text_persona / modscan_text_faces) on a text model; the vision modality with --faces and a VLM, the "
    "language modality with a T2I model and a VLM.",
    configs={OP: M},
    audit_assets=("landing/modscan_responses",),
    report_section=_report_section,
    target_models=text_model_target(M),
)
