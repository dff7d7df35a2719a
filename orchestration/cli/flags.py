"""The ``dora audit`` flags that configure assets, derived from the Dagster Config classes.

One table (:data:`FLAGS`) says which Config field(s) each flag sets; the flag's type, default
and help come from the field itself (its annotation, default and ``description``), so a
default is stated once, in the Config class. :func:`audit_run_config` turns parsed arguments
into a typed ``dg.RunConfig`` (one Config object per op), never an op-name dict.

Conventions: a ``list[str]`` field takes a comma-separated value; a ``bool`` field that
defaults to True gets ``--no-<name>``, one that defaults to False gets ``--<name>``.
"""

from __future__ import annotations

import argparse
import typing
from dataclasses import dataclass

import dagster as dg

from ingestion.vocabulary import I2T_BACKENDS, JUDGE_BACKENDS, PROMPT_STYLES, T2I_BACKENDS, T2T_BACKENDS
from models_inference.scoring.judge import ANSWER_MODES
from orchestration.defs.config import AuditConfig, DescriptionWordsConfig, VisionConfig
from orchestration.defs.scoring.config import JudgeConfig, SentimentConfig, ToxicityConfig

#: Op name -> the Config class of its run config (the audit job's configurable ops).
OP_CONFIGS: dict[str, type[dg.Config]] = {
    "t2t_completions": AuditConfig,
    "t2i_images": VisionConfig,
    "i2t_descriptions": VisionConfig,
    "sentiment_scores": SentimentConfig,
    "toxicity_scores": ToxicityConfig,
    "judge_ratings": JudgeConfig,
    "description_words": DescriptionWordsConfig,
}


@dataclass(frozen=True)
class Flag:
    """One ``dora audit`` flag: the (Config class, field) pairs it sets, and its CLI spelling.

    Attributes:
        targets: where the value goes; the first pair gives type, default and help.
        name: the flag (default ``--<field with dashes>``).
        choices: allowed values (from :mod:`ingestion.vocabulary`), if closed.
        group: the ``--help`` section.
    """

    targets: tuple[tuple[type[dg.Config], str], ...]
    name: str | None = None
    choices: tuple[str, ...] | None = None
    group: str = "probe"

    @property
    def field(self):
        cls, name = self.targets[0]
        return cls.model_fields[name]

    @property
    def dest(self) -> str:
        """The ``argparse`` attribute: the field name for a switch, else the flag's name."""
        if self.kind is bool:
            return self.targets[0][1]
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def flag(self) -> str:
        if self.name:
            return self.name
        field_name = self.targets[0][1]
        if self.kind is bool and self.field.default is True:
            return "--no-" + field_name.replace("_", "-")
        return "--" + field_name.replace("_", "-")

    @property
    def kind(self) -> type:
        """``bool``, ``int``, ``float``, ``str`` or ``list`` (Optional unwrapped)."""
        ann = self.field.annotation
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if typing.get_origin(ann) is typing.Union and len(args) == 1:
            ann = args[0]
        return list if typing.get_origin(ann) is list else ann


def _t(cls, *names):
    return tuple((cls, n) for n in names)


#: Every asset-configuring flag of ``dora audit``, in ``--help`` order.
FLAGS: tuple[Flag, ...] = (
    Flag(_t(AuditConfig, "model")),
    Flag(_t(AuditConfig, "backend"), choices=T2T_BACKENDS),
    Flag(_t(AuditConfig, "base_url")),
    Flag(_t(AuditConfig, "settings")),
    Flag(_t(AuditConfig, "runs")),
    Flag(_t(AuditConfig, "letters")),
    Flag(_t(AuditConfig, "descriptor_source"), choices=("biasdora", "crows_pairs")),
    Flag(((AuditConfig, "descriptors"), (VisionConfig, "descriptors"))),
    Flag(((AuditConfig, "per_dimension"), (VisionConfig, "per_dimension"))),
    Flag(_t(AuditConfig, "prompt_style"), choices=PROMPT_STYLES),
    Flag(_t(AuditConfig, "batch_size")),
    Flag(_t(AuditConfig, "audit_id")),
    Flag(((AuditConfig, "progress"), (VisionConfig, "progress"), (JudgeConfig, "progress"))),
    Flag(_t(AuditConfig, "registry")),
    # API client limits and the failed-call share that fails an audit
    *(Flag(_t(AuditConfig, f)) for f in ("api_timeout", "api_concurrency", "api_max_retries")),
    # one limit for every step that calls models (ErrorShareLimit); the other
    # families' configs read it in their config_from_args / run_config
    Flag(((AuditConfig, "max_error_share"), (VisionConfig, "max_error_share"), (JudgeConfig, "max_error_share"))),
    # T2I / I2T probes (orchestration/defs/vision/)
    Flag(_t(VisionConfig, "t2i_backend"), choices=T2I_BACKENDS, group="vision"),
    *(Flag(_t(VisionConfig, f), group="vision") for f in (
        "t2i_model", "t2i_base_url", "t2i_vae", "t2i_steps", "t2i_size", "t2i_quality", "t2i_styles", "t2i_settings",
        "images_per_descriptor", "image_audit_id")),
    Flag(_t(VisionConfig, "i2t_backend"), choices=I2T_BACKENDS, group="vision"),
    *(Flag(_t(VisionConfig, f), group="vision") for f in ("i2t_model", "i2t_base_url", "i2t_settings", "i2t_max_new_tokens")),
    # the paper's SD / LLaVA configurations (presets --t2i-model paper-sd, --i2t-model paper-llava)
    *(Flag(_t(VisionConfig, f), group="vision") for f in ("t2i_prompt_suffix", "i2t_system_prompt", "i2t_image_size")),
    Flag(_t(DescriptionWordsConfig, "stop_list"), choices=("nltk", "spacy"), group="vision"),
    Flag(_t(DescriptionWordsConfig, "drop_descriptor_words"), group="vision"),
    # scoring (orchestration/defs/scoring/)
    Flag(((SentimentConfig, "score_all"), (ToxicityConfig, "score_all"), (JudgeConfig, "score_all")), group="scoring"),
    Flag(((SentimentConfig, "score_pool"), (ToxicityConfig, "score_pool"), (JudgeConfig, "score_pool")),
         choices=("fisher", "paper", "all"), group="scoring"),
    Flag(_t(SentimentConfig, "scorer"), name="--sentiment-scorer", group="scoring"),
    Flag(_t(ToxicityConfig, "scorer"), name="--toxicity-scorer", group="scoring"),
    Flag(_t(JudgeConfig, "backend"), name="--judge-backend", choices=JUDGE_BACKENDS, group="scoring"),
    Flag(_t(JudgeConfig, "model"), name="--judge-model", group="scoring"),
    Flag(_t(JudgeConfig, "base_url"), name="--judge-base-url", group="scoring"),
    Flag(_t(JudgeConfig, "repeats"), name="--judge-repeats", group="scoring"),
    Flag(_t(JudgeConfig, "answer_mode"), name="--judge-answer", choices=ANSWER_MODES, group="scoring"),
)


def add_flags(parser: argparse.ArgumentParser, group: str, title: str | None = None, description: str | None = None) -> None:
    """Add the :data:`FLAGS` of ``group`` to ``parser`` (in an argument group when ``title`` is given)."""
    from orchestration.cli_validation import checks

    validators = checks()  # every bad value is an argparse error
    target = parser.add_argument_group(title, description) if title else parser
    for flag in (f for f in FLAGS if f.group == group):
        field, kind = flag.field, flag.kind
        helptext = field.description or ""
        if kind is bool:
            negated = field.default is True
            action = "store_false" if negated else "store_true"
            target.add_argument(flag.flag, dest=flag.dest, action=action, help=f"do not {helptext}" if negated else helptext)
            continue
        default = field.get_default(call_default_factory=True)
        if kind is list:
            default = ",".join(default)
        target.add_argument(
            flag.flag, dest=flag.dest, default=default, choices=flag.choices, help=helptext,
            type=validators.get(flag.flag) or (kind if kind in (int, float) else str),
        )


def csv_list(text: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def config_values(args: argparse.Namespace) -> dict[type[dg.Config], dict]:
    """{Config class: {field: value}} from parsed ``dora audit`` arguments (lists split)."""
    values: dict[type[dg.Config], dict] = {}
    for flag in FLAGS:
        value = getattr(args, flag.dest)
        if flag.kind is list:
            value = csv_list(value)
        for cls, name in flag.targets:
            values.setdefault(cls, {})[name] = value
    apply_vision_presets(values.setdefault(VisionConfig, {}))
    judge = values.get(JudgeConfig, {})
    if judge.get("backend") == "none":  # --judge-backend none: the judge asset lands nothing
        judge.update(backend=JudgeConfig.model_fields["backend"].default, enabled=False)
    return values


#: ``--t2i-model`` / ``--i2t-model`` presets: the paper's configurations (docs/method.md#3a-paper-statistics).
VISION_PRESETS = ("paper-sd", "paper-llava")


def apply_vision_presets(vision: dict) -> dict:
    """Expand ``t2i_model='paper-sd'`` / ``i2t_model='paper-llava'`` into the paper's settings, in place.

    paper-sd: ``stabilityai/stable-diffusion-2-inpainting`` (BiasDora appendix), VAE
    ``stabilityai/sd-vae-ft-mse``, 20 DPM-Solver multistep steps, every prompt immediately
    followed by the paper's style suffix (:data:`PAPER_SD_PROMPT_SUFFIX`). paper-llava:
    ``llava-hf/llava-v1.6-vicuna-7b-hf``, the system prompt (:data:`PAPER_LLAVA_SYSTEM_PROMPT`)
    and 448x448 input. Values set explicitly (VAE, suffix, system prompt, size) win.
    """
    from models_inference.backends.vision import PAPER_LLAVA_IMAGE_SIZE, PAPER_LLAVA_MODEL, PAPER_LLAVA_SYSTEM_PROMPT
    from models_inference.probes.biasdora.prompts import PAPER_SD_STEPS, PAPER_SD_VAE
    from models_inference.probes.biasdora.t2i import PAPER_SD_MODEL, PAPER_SD_PROMPT_SUFFIX

    if vision.get("t2i_model") == "paper-sd":
        vision.update(t2i_backend="diffusers", t2i_model=PAPER_SD_MODEL, t2i_steps=PAPER_SD_STEPS,
                      t2i_vae=vision.get("t2i_vae") or PAPER_SD_VAE,
                      t2i_prompt_suffix=vision.get("t2i_prompt_suffix") or PAPER_SD_PROMPT_SUFFIX)
    if vision.get("i2t_model") == "paper-llava":
        vision.update(i2t_backend="transformers", i2t_model=PAPER_LLAVA_MODEL,
                      i2t_system_prompt=vision.get("i2t_system_prompt") or PAPER_LLAVA_SYSTEM_PROMPT,
                      i2t_image_size=vision.get("i2t_image_size") or list(PAPER_LLAVA_IMAGE_SIZE))
    return vision


def audit_run_config(args: argparse.Namespace, **extra) -> dg.RunConfig:
    """The typed run config of the audit job from ``dora audit`` arguments.

    Args:
        extra: overrides of the T2T probe's config (e.g. ``registry`` for ``--target``).
    """
    values = config_values(args)
    values[AuditConfig] = {**values.get(AuditConfig, {}), **extra}
    from orchestration.defs.counterfactual.config import run_config_ops as counterfactual_ops

    return dg.RunConfig(
        ops={**{op: cls(**values.get(cls, {})) for op, cls in OP_CONFIGS.items()}, **counterfactual_ops(args)},
        # step failures are summarised by `dora audit` in one line each; Dagster's own
        # console copy of every traceback only with --verbose
        loggers={"console": {"config": {"log_level": "WARNING" if getattr(args, "verbose", False) else "CRITICAL"}}},
    )
