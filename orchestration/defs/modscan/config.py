"""Run config of the ModSCAN asset and its ``dora audit`` flags (seed 000; docs/families/modscan.md).

:class:`ModscanConfig` is the Dagster ``Config`` of ``landing/modscan_responses``;
:func:`add_arguments` adds the family's flags to ``dora audit``; :func:`config_from_args`
turns parsed flags into the asset's run config (``enabled`` from the shared ``--probe`` flag).
"""

from __future__ import annotations

import argparse
from typing import Optional

import dagster as dg

from orchestration.defs.config import ErrorShareLimit
from models_inference.probes.modscan.tables import ATTRIBUTES, PREFIXES, SCENARIOS
from models_inference.probes.modscan.text import CONDITIONS, TEXT_PROBES

#: The family's name for ``dora audit --probe``.
PROBE_NAME = "modscan"
#: Default audit sample: 5 instances per Table 1 scenario (spread over its list), 1 query per
#: (instance, attribute, condition): 20 text_persona + 30 text_faces queries. Each query costs
#: ~1 CPU-second with SmolLM2-135M (its ~100-token chat prompt's prefill dominates), so the
#: sample takes roughly 30-60 s on 2 idle cores.
DEFAULT_SAMPLES = 1
DEFAULT_INSTANCES = 5
DEFAULT_MAX_NEW_TOKENS = 24


class ModscanConfig(ErrorShareLimit):
    """What the ModSCAN asset probes (``dora audit --help``, group "ModSCAN").

    The text-only analogues (docs/families/modscan.md#text-only-use, NOT FROM PAPER: ``modscan_text_persona``,
    ``modscan_text_faces``) run on any text backend, by default the embedded SmolLM2-135M,
    and are part of the default audit with a small sample (``samples`` per instance,
    attribute and condition, over ``instances_per_scenario`` instances of each Table 1
    scenario). Paper scale: ``samples=200, instances_per_scenario=0``.
    """

    enabled: bool = True
    model: str = "smollm2-135m"
    backend: str = "transformers"
    base_url: Optional[str] = None
    probes: list[str] = list(TEXT_PROBES)
    attributes: list[str] = list(ATTRIBUTES)
    scenarios: list[str] = list(SCENARIOS)
    conditions: list[str] = list(CONDITIONS)
    prefixes: list[str] = ["none"]
    samples: int = DEFAULT_SAMPLES
    instances_per_scenario: int = DEFAULT_INSTANCES
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float = 0.7
    top_p: float = 0.95
    batch_size: int = 32
    audit_id: Optional[str] = None
    progress: bool = True
    # vision modality (seed 000 §3.1): runs when both a faces folder / manifest and a VLM are named
    faces: Optional[str] = None
    vision_backend: str = "transformers"
    vision_model: Optional[str] = None
    vision_base_url: Optional[str] = None
    pairs_per_group: int = 20
    pair_seed: int = 0
    vision_instances_per_scenario: int = 0
    # language modality (seed 000 §3.2): runs when a T2I model and the VLM above are named
    t2i_backend: str = "diffusers"
    t2i_model: Optional[str] = None
    t2i_base_url: Optional[str] = None
    images_per_trait: int = 200
    person_check: bool = True


def _csv(text: str) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ModSCAN flags (an argument group) to the ``dora audit`` parser."""
    g = parser.add_argument_group(
        "ModSCAN (seed 000)",
        "Text-only analogues of ModSCAN's two modalities (docs/families/modscan.md#text-only-use, NOT FROM PAPER; probe names "
        "modscan_text_persona / modscan_text_faces) on a text model; part of the default audit. Marts: "
        "fct_modscan_responses, agg_modscan_selection, agg_modscan_bias_scores.",
    )
    g.add_argument("--modscan-model", default="smollm2-135m", help="text model of the analogues ('smollm2-135m', a local folder/.gguf, a cached hub id, or an API model)")
    g.add_argument("--modscan-backend", default="transformers", choices=["transformers", "openai"], help="text backend of the analogues")
    g.add_argument("--modscan-base-url", default=None, help="OpenAI-compatible endpoint (backend openai); key from $OPENAI_API_KEY")
    g.add_argument("--modscan-probes", default=",".join(TEXT_PROBES), help="comma-separated text analogues")
    g.add_argument("--modscan-attributes", default=",".join(ATTRIBUTES), help="gender,race")
    g.add_argument("--modscan-scenarios", default=",".join(SCENARIOS), help="scenarios of modscan_text_faces (text_persona: persona only)")
    g.add_argument("--modscan-conditions", default=",".join(CONDITIONS), help="original (scene described) and/or blank (sentence alone; Table 5's blank image analogue)")
    g.add_argument("--modscan-samples", type=int, default=DEFAULT_SAMPLES, help="queries per instance x attribute x condition x prefix (paper: 200)")
    g.add_argument("--modscan-instances", type=int, default=DEFAULT_INSTANCES, help="k instances of each Table 1 scenario, spread over its list; 0 = all (paper)")
    g.add_argument("--modscan-max-new-tokens", type=int, default=DEFAULT_MAX_NEW_TOKENS, help="answer budget in tokens (paper: unstated)")
    g.add_argument("--faces", default=None, help="vision modality: a UTKFace-format folder ([age]_[gender]_[race]_[datetime].jpg) or a CSV manifest (face_id,path,age,gender,race)")
    g.add_argument("--modscan-vision-model", default=None, help="vision modality: a transformers LLaVA-style folder / cached hub id, or an OpenAI vision model (paper: LLaVA-v1.5, MiniGPT-v2, CogVLM)")
    g.add_argument("--modscan-vision-backend", default="transformers", choices=["transformers", "openai"], help="vision backend")
    g.add_argument("--modscan-vision-base-url", default=None, help="OpenAI-compatible endpoint of the vision model; key from $OPENAI_API_KEY")
    g.add_argument("--modscan-pairs-per-group", type=int, default=20, help="face pairs per (age, race) / (age, gender, race combination) group (paper: up to 20)")
    g.add_argument("--modscan-vision-instances", type=int, default=0, help="vision: k instances per scenario spread over Table 1; 0 = all (paper)")
    g.add_argument("--modscan-t2i-model", default=None, help="language modality: diffusers folder / cached hub id or OpenAI Images model drawing Table 2's scenes (paper: SD-v2.1); needs --modscan-vision-model")
    g.add_argument("--modscan-t2i-backend", default="diffusers", choices=["diffusers", "openai"], help="T2I backend of the scene images")
    g.add_argument("--modscan-images-per-trait", type=int, default=200, help="language modality: kept scene images (and blank queries) per trait (paper: 200)")
    g.add_argument("--modscan-no-person-check", action="store_true", help="keep every scene image (default: the VLM is asked whether a person is shown; NOT FROM PAPER stand-in for YOLOv8x)")
    g.add_argument(
        "--prefix", action="append", default=None, choices=sorted(PREFIXES),
        help="ModSCAN prompt prefix, repeatable: sr / debiasing (seed 000 §7), role_sexist / role_racist / "
        "role_obama / role_trump (App. C); 'none' = the original prompt (always probed alongside, for the deltas)",
    )


def config_from_args(args: argparse.Namespace) -> dict:
    """The run config of the ModSCAN asset from ``dora audit`` flags.

    ``enabled`` is true when ``args.probe`` (the shared ``--probe NAME`` flag, repeatable) is
    unset or names ``modscan``.
    """
    probes = getattr(args, "probe", None)
    prefixes = ["none", *[p for p in (args.prefix or []) if p != "none"]]
    return {
        "enabled": not probes or PROBE_NAME in probes,
        "model": args.modscan_model,
        "backend": args.modscan_backend,
        "base_url": args.modscan_base_url,
        "probes": _csv(args.modscan_probes),
        "attributes": _csv(args.modscan_attributes),
        "scenarios": _csv(args.modscan_scenarios),
        "conditions": _csv(args.modscan_conditions),
        "prefixes": prefixes,
        "samples": args.modscan_samples,
        "instances_per_scenario": args.modscan_instances,
        "max_new_tokens": args.modscan_max_new_tokens,
        "progress": not getattr(args, "no_progress", False),
        "faces": args.faces,
        "vision_backend": args.modscan_vision_backend,
        "vision_model": args.modscan_vision_model,
        "vision_base_url": args.modscan_vision_base_url,
        "pairs_per_group": args.modscan_pairs_per_group,
        "vision_instances_per_scenario": args.modscan_vision_instances,
        "t2i_backend": args.modscan_t2i_backend,
        "t2i_model": args.modscan_t2i_model,
        "images_per_trait": args.modscan_images_per_trait,
        "person_check": not args.modscan_no_person_check,
        "max_error_share": args.max_error_share,  # the shared --max-error-share
    }


def run_config(args: argparse.Namespace) -> ModscanConfig:
    """The typed Config of the ModSCAN asset's op from ``dora audit`` flags (:func:`config_from_args`)."""
    return ModscanConfig(**config_from_args(args))


def audit_report(result) -> str:
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
