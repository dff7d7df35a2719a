"""The VLStereoSet family (seed 001) for the family seam (:mod:`orchestration.family`).

Its flags are ``--vlstereoset-*`` (derived from :class:`VLStereoSetConfig`'s fields) plus
the short ``--images``.
"""

from __future__ import annotations

import functools

from analytics.drift import DriftCheck, FamilyDrift
from analytics.family_diff import FamilyChangeTest
from ingestion.vocabulary import I2T_BACKENDS, T2T_BACKENDS
from models_inference.probes.vlstereoset.errors import ItemPoolTooSmallError, VLStereoSetFormatError
from models_inference.probes.vlstereoset.scorers import MCQ_ANSWER_MODES
from orchestration import cli_validation as v
from orchestration.defs.vlstereoset.config import ASSET_GROUP, OP_NAME, SCORERS, VLStereoSetConfig
from orchestration.family import EstimatedStep, Flag, declared_family, text_model_target

NAME = "vlstereoset"
V = VLStereoSetConfig
P = "vlstereoset-"

FLAGS: tuple[Flag, ...] = (
    Flag(((V, "csv"),), prefix=P, path="file"),
    Flag(((V, "images"),), name="--images", aliases=("--vlstereoset-images",), dest="vlstereoset_images", path="folder"),
    Flag(((V, "download_images"),), name="--vlstereoset-download"),
    Flag(((V, "scorers"),), prefix=P, choices=SCORERS),
    Flag(((V, "text_model"),), prefix=P, local_model="vlstereoset_text_backend"),
    Flag(((V, "clip_model"),), prefix=P, local_model="always"),
    *Flag.of(V, "clip_logit_scale", prefix=P),
    Flag(((V, "itm_model"),), prefix=P, local_model="always"),
    Flag(((V, "vlm_model"),), prefix=P, local_model="vlstereoset_vlm_backend"),
    Flag(((V, "text_backend"),), prefix=P, choices=T2T_BACKENDS),
    Flag(((V, "text_base_url"),), prefix=P, validator=v.base_urls),
    Flag(((V, "vlm_backend"),), prefix=P, choices=I2T_BACKENDS),
    Flag(((V, "vlm_base_url"),), prefix=P, validator=v.base_urls),
    *Flag.of(V, "mcq_shuffles", "items", "item_seed", "block_items", prefix=P),
    Flag(((V, "mcq_answer_mode"),), prefix=P, choices=MCQ_ANSWER_MODES),
)


def check(configs) -> str | None:
    """``dora audit``'s check of the VLStereoSet settings before Dagster starts: every scorer
    asked for has its model (``selected_scorers``)."""
    from orchestration.defs.vlstereoset.config import selected_scorers

    try:
        selected_scorers(configs[OP_NAME])
    except ValueError as exc:
        return f"--vlstereoset-scorers: {exc}"
    return None


CHANGE_TEST = FamilyChangeTest(
    NAME,
    "fct_vlstereoset_change_tests",
    "fct_vlstereoset_scores",
    "scored_at",
    (
        "scorer_variant",
        "dataset_id",
        "category",
        "metric",
        "k_before",
        "n_before",
        "k_after",
        "n_after",
        "value_before",
        "value_after",
        "change_p",
        "change_q",
        "is_significant_change",
        "change_type",
    ),
    ("scorer_variant", "dataset_id", "category", "metric"),
    "vlrs and vlbs (100 x a share of items) per scorer variant, dataset, category",
    "two-sided Fisher's exact test on the 2x2 item counts of the two audits (a difference of proportions)",
)


def audit_ids_of_run(result) -> list[str]:
    """The VLStereoSet audit ids a finished ``dora audit`` run scored (from the
    ``landing/vlstereoset_scores`` materialisation's metadata); empty when the family was skipped."""
    ids: list[str] = []
    for mat in result.get_asset_materialization_events():
        if mat.materialization.asset_key.path == ["landing", "vlstereoset_scores"]:
            value = mat.materialization.metadata.get("audit_ids")
            ids += [a for a in (value.value if value else "").split(",") if a]
    return ids


def summary(result, args=None) -> str:
    """The VLStereoSet lines of ``dora audit`` (Table 3 shape), empty when the family was skipped."""
    from analytics.vlstereoset import vlstereoset_summary

    ids = audit_ids_of_run(result)
    return vlstereoset_summary(ids) if ids else ""


def plan(configs, model_version: str | None = None) -> str:
    """``dora audit --dry-run`` for VLStereoSet: items of the CSV x scorers (no model loaded)."""
    from orchestration.defs.vlstereoset.config import selected_scorers

    config = configs[OP_NAME]
    dataset = _dataset(config.csv)
    names = selected_scorers(config)
    return (
        f"vlstereoset: {len(dataset.items):,} items of {dataset.path.name}{' (synthetic)' if dataset.is_synthetic else ''}"
        f" x {len(names)} scorers ({', '.join(names)})"
    )


#: Measured times on the shipped synthetic file (22 items, 110 captions; 2 cores):
#: ``bench_vlstereoset_text_prior`` (the text prior's shared path on a quiet machine, 138
#: log-likelihoods/s) and ``bench_dry_run_estimate`` in a default audit on a shared machine
#: (reading the items 9.8 s at load 6.7; the block with the model's load, the text prior and the
#: reference scorers IDM / BIM / RAM, and its fan-in, 8.4 s at load ~15, less the text prior's
#: 0.8 s; its share of the dbt build 12.8 s at load 17.6), each divided by the load factor of
#: that load (``orchestration.estimates.load_factor``: load / 2 cores, the audit's own process included).
MEASURED = {
    "captions per second": 138.3,
    "items, model load, reference scorers": 9.8 / 3.4 + 8.4 / 7.5 - 110 / 138.3,
    "dbt models": 12.8 / 8.8,
}


def estimate(configs, model_version: str | None = None) -> list[EstimatedStep]:
    """VLStereoSet's steps of ``dora audit --dry-run``'s time estimate: the text prior's captions
    (5 per item) at the rate measured on the embedded model (unknown on another), the steps of
    the synthetic file's default audit; image scorers unknown; ``[]`` when the family is off."""
    from ingestion.vocabulary import DEFAULT_MODEL
    from orchestration.defs.vlstereoset.config import REFERENCE_SCORERS, TEXT_PRIOR, selected_scorers

    config = configs[OP_NAME]
    if not config.enabled:
        return []
    m = MEASURED
    items = len(_dataset(config.csv).items)
    names = selected_scorers(config)
    steps = [
        EstimatedStep(
            "items, model load, reference scorers",
            m["items, model load, reference scorers"],
            "measured",
            "bench_dry_run_estimate, scaled to a free machine",
        )
    ]
    if TEXT_PRIOR in names:
        captions = 5 * items
        embedded = config.text_backend == "transformers" and config.text_model == DEFAULT_MODEL
        steps.append(
            EstimatedStep(
                f"text prior, {captions:,} captions",
                captions / m["captions per second"],
                "measured",
                f"{m['captions per second']} captions/s, bench_vlstereoset_text_prior",
            )
            if embedded
            else EstimatedStep(
                f"text prior, {captions:,} captions", None, "unknown", f"no measured rate for {config.text_model} ({config.text_backend})"
            )
        )
    if set(names) - {TEXT_PRIOR, *REFERENCE_SCORERS}:
        steps.append(EstimatedStep("image scorers", None, "unknown", "no measured rate for image models"))
    steps.append(
        EstimatedStep("dbt models (its share of the build)", m["dbt models"], "measured", "bench_dry_run_estimate, scaled to a free machine")
    )
    return steps


@functools.cache
def _dataset(csv: str | None):
    """The CSV as the plan and the estimate read it (once per process: spaCy neutralises every caption)."""
    from models_inference.probes.vlstereoset.dataset import load_vlstereoset_csv, synthetic_csv_path

    return load_vlstereoset_csv(csv or synthetic_csv_path())


def _report_page(out, audit_id, **_):
    from analytics.vlstereoset import write_vlstereoset_report

    return write_vlstereoset_report(out, audit_id)


#: VLStereoSet's drift checks (dbt_project/models/marts/vlstereoset/agg_vlstereoset_drift.sql)
DRIFT = FamilyDrift(
    NAME,
    "agg_vlstereoset_drift",
    (
        DriftCheck("scored_share", "share of the common items with a score for each caption; exact McNemar", "falls"),
        DriftCheck("vlbs", "vlbs (0-100, unbiased 0) on the common items; Fisher's exact test", "rises", scale=100.0),
        DriftCheck("vlrs", "vlrs (0-100, ideal 100) on the common items; Fisher's exact test", "falls"),
    ),
)


FAMILY = declared_family(
    __name__,
    title="VLStereoSet (seed 001): caption selection, vlrs / vlbs / ivlas / lmss / vlss",
    paper="VLStereoSet (seed 001)",
    modalities="image + three captions; text caption prior",
    measures=("does a model prefer the stereotypical caption of an anti-stereotypical image: vlrs, vlbs, ivlas, lmss, vlss"),
    default_audit="on (text caption prior on a synthetic file)",
    description="Caption selection on VLStereoSet (agg_vlstereoset_metrics, fct_vlstereoset_shifts). Default: dora's "
    "SYNTHETIC file, the text-only analogue on the embedded model and the reference models IDM / BIM / RAM. The "
    "released CSV is not shipped (no licence): https://github.com/K-Square-00/VLStereo data/VLStereoSet.csv",
    group=ASSET_GROUP,
    configs={OP_NAME: V},
    audit_assets=("landing/vlstereoset_scores",),
    report_page=_report_page,
    # a registry target's model is the text prior's (the other scorers' models are options)
    target_models=text_model_target(V, "text_model", "text_backend", "text_base_url"),
    # its plan reads the CSV and neutralises every caption with spaCy (seconds): `dora audit
    # --target` and `dora models list` check its inputs' paths, the run reads the file
    plan_before_run=False,
    errors=(VLStereoSetFormatError, ItemPoolTooSmallError),
)
