"""The ``dora`` command line: run audits, query associations, open the Dagster UI.

``dora audit`` executes the Dagster job ``dora_audit`` in-process against the Dagster
instance in ``$DORA_HOME/dagster``, so every audit run and its lineage show up in the UI
started by ``dora ui`` (``dagster dev`` on the same instance).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

EPILOG = """\
environment:
  DORA_HOME   where the warehouse (warehouse.duckdb), landing Parquet and the Dagster
              instance live (default: ./data)

examples:
  dora audit                                  # quick audit, embedded SmolLM2-135M (offline)
  dora audit --per-dimension 0 --runs 10      # paper scale: every row (406/413/406/406/406) x 26 x 10
  dora audit --dry-run --per-dimension 0 --runs 10   # the plan: 105,560 / 107,380 / 105,560 x 3 prompts, no model loaded
  dora audit --descriptors "alcoholic person,child" --settings singular,verb
  dora audit --backend openai --model gpt-4o --prompt-style chat   # needs OPENAI_API_KEY
  dora query "select * from fct_associations where is_significant order by fisher_q limit 20"
  dora ui                                     # Dagster UI with lineage and runs
  dora report                                 # HTML + PNGs: % negative, % toxic, judge bias levels
  dora audit --judge-backend openai --judge-model gpt-4o --judge-repeats 3   # paper judge; needs OPENAI_API_KEY
  dora audit --t2i-model ./sd --i2t-model ./llava   # T2I + I2T probes with local diffusers / transformers folders
  dora audit --t2i-backend openai --t2i-model dall-e-3 --i2t-backend openai --i2t-model gpt-4o
  dora models list                            # registry targets, current version, last audit
  dora audit --target smollm2-135m            # audit a registry target's current version
  dora diff smollm2-135m                      # latest audit vs the previous one, per bias dimension
"""


def _home() -> Path:
    from ingestion.landing import dora_home

    home = dora_home()
    os.environ["DORA_HOME"] = str(home)
    os.environ.setdefault("DAGSTER_HOME", str(home / "dagster"))
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    dagster_home = Path(os.environ["DAGSTER_HOME"])
    dagster_home.mkdir(parents=True, exist_ok=True)
    from orchestration.instance import write_dagster_yaml

    write_dagster_yaml(dagster_home)  # op-level pools: the 'duckdb_writer' pool gets 1 slot
    return home


def _csv_list(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _build_parser() -> argparse.ArgumentParser:
    from models_inference.prompts import T2T_SETTINGS
    from orchestration.defs.config import DEFAULT_PER_DIMENSION, DEFAULT_RUNS

    parser = argparse.ArgumentParser(
        prog="dora",
        description="dora audits language and vision-language models for hidden biased associations "
        "(BiasDora method: CrowS-Pairs descriptors, probes, tf-idf, Fisher's exact test, q-values).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    audit = sub.add_parser(
        "audit",
        help="run a full audit: descriptors -> T2T probe -> association marts",
        description="Run the whole audit chain as the Dagster job 'dora_audit' and print a summary. "
        "Re-running the same audit generates only rows that have not landed yet.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    audit.add_argument("--model", default="smollm2-135m", help="'smollm2-135m' (embedded), a local folder/.gguf, a cached hub id, or an API model name")
    audit.add_argument("--backend", default="transformers", choices=["transformers", "openai"], help="generation backend")
    audit.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (backend openai); key from $OPENAI_API_KEY")
    audit.add_argument("--settings", default=",".join(T2T_SETTINGS), help="comma-separated T2T settings")
    audit.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="completions per descriptor x setting x letter (paper: 10)")
    audit.add_argument("--letters", default="abcdefghijklmnopqrstuvwxyz", help="first letters to probe")
    audit.add_argument("--descriptor-source", default="biasdora", choices=["biasdora", "crows_pairs"], help="curated paper list or descriptors extracted from CrowS-Pairs")
    audit.add_argument("--descriptors", default="", help="comma-separated descriptor subset (normalised keys, e.g. 'alcoholic person,child')")
    audit.add_argument("--per-dimension", type=int, default=DEFAULT_PER_DIMENSION, help="descriptors per bias dimension; 0 = all")
    audit.add_argument("--prompt-style", default=None, choices=["chat", "completion"], help="default: the model's (completion for small local models)")
    audit.add_argument("--batch-size", type=int, default=64, help="prompts per batch (transformers backend)")
    audit.add_argument("--audit-id", default=None, help="override the deterministic audit id")
    audit.add_argument("--top", type=int, default=3, help="top associations shown per bias dimension")
    audit.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    audit.add_argument("--verbose", "-v", action="store_true", help="show dbt's output (default: $DORA_HOME/logs/last_audit_dbt.log)")
    audit.add_argument(
        "--rebuild", action="store_true",
        help="re-extract descriptors and re-run the dbt builds even when nothing new landed (default: skipped then)",
    )
    audit.add_argument(
        "--executor", default="in_process", choices=["in_process", "multiprocess"],
        help="in_process (default): every step in this process; multiprocess: each step in its own "
        "process (Dagster's multiprocess executor), as runs launched from the UI",
    )
    _add_vision_arguments(audit)
    _add_scoring_arguments(audit)
    audit.add_argument(
        "--dry-run", action="store_true",
        help="print the plan (prompts per modality x setting, rows already landed, rows to generate, estimated "
        "time) without loading any model or running anything",
    )
    audit.add_argument("--target", default=None, help="audit this registry target's current version (partition <target>@<version>); its registry settings replace the probe flags")
    audit.add_argument("--registry", default=None, help="audit registry file (default: $DORA_REGISTRY or registry.yaml)")

    query = sub.add_parser(
        "query",
        help="run read-only SQL on the warehouse",
        description="Run read-only SQL (SELECT/WITH/SHOW/DESCRIBE/EXPLAIN) on $DORA_HOME/warehouse.duckdb. "
        "Public relations: stg_t2t_completions, fct_associations.",
    )
    query.add_argument("sql", help="the SQL to run")
    query.add_argument("--format", "-f", default="table", choices=["table", "csv", "json"])

    ui = sub.add_parser("ui", help="start the Dagster UI (dagster dev) on this DORA_HOME")
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--host", default="127.0.0.1")

    report = sub.add_parser(
        "report",
        help="write the HTML report (and PNGs) of sentiment, toxicity and judge bias levels",
        description="Write an HTML report with the paper-style views (BiasDora Figures 3, 4, 6, 7) from "
        "agg_bias_by_dimension and fct_association_scores: heatmaps of % negative and % toxic by setting x "
        "bias dimension per model, the Likert distribution per bias dimension, and the most toxic / "
        "highest-rated associations.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    report.add_argument("--audit-id", default=None, help="only this audit (default: every audit in the warehouse)")
    report.add_argument("--out", default=None, help="output folder (default: $DORA_HOME/reports/<audit or 'all'>)")
    report.add_argument("--top", type=int, default=15, help="rows of the most toxic / highest-rated tables")

    models = sub.add_parser("models", help="the audit registry: registered targets and their last audit")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    models_list = models_sub.add_parser(
        "list",
        help="list registry targets with their current model version and last audit",
        description="List the audit registry's targets (registry.yaml or $DORA_REGISTRY): modality, backend, "
        "model, how the version is read, the current version and the last audit in the warehouse.",
    )
    models_list.add_argument("--registry", default=None, help="registry file (default: $DORA_REGISTRY or registry.yaml)")
    models_list.add_argument("--no-resolve", action="store_true", help="do not read current versions (no hashing, no API call)")
    models_list.add_argument("--format", "-f", default="table", choices=["table", "csv", "json"])

    diff = sub.add_parser(
        "diff",
        help="what changed between two audits of a registry target",
        description="Compare two finished audits of a target (default: the latest vs the previous one) from "
        "fct_association_changes: counts of new / dropped / strengthened / weakened / unchanged significant "
        "associations and the top changes per bias dimension, ranked by |tf-idf change|.",
    )
    diff.add_argument("target", help="registry target name (ad-hoc audits: the model id)")
    diff.add_argument("--from", dest="from_ref", default=None, help="earlier audit: audit id or model version (default: the audit before --to)")
    diff.add_argument("--to", dest="to_ref", default=None, help="later audit: audit id or model version (default: the latest)")
    diff.add_argument("--top", type=int, default=5, help="changes shown per bias dimension")
    diff.add_argument("--format", "-f", default="table", choices=["table", "csv", "json"])
    return parser


def _add_vision_arguments(audit: argparse.ArgumentParser) -> None:
    """The T2I / I2T flags of ``dora audit`` (run config of orchestration/defs/vision/)."""
    from orchestration.defs.config import DEFAULT_IMAGES_PER_DESCRIPTOR

    v = audit.add_argument_group(
        "T2I / I2T probes",
        "Skipped unless a reachable model is named (local folder, hub id in the Hugging Face cache, or an "
        "API model with OPENAI_API_KEY set). --descriptors / --per-dimension select their descriptors too.",
    )
    v.add_argument("--t2i-backend", default="diffusers", choices=["diffusers", "openai"], help="text-to-image backend")
    v.add_argument("--t2i-model", default=None, help="diffusers folder or hub id (paper: Stable Diffusion), or an OpenAI Images model (dall-e-3); preset 'paper-sd' = stabilityai/stable-diffusion-2-inpainting + VAE stabilityai/sd-vae-ft-mse, 20 DPM-Solver steps and the paper's style suffix")
    v.add_argument("--t2i-base-url", default=None, help="OpenAI-compatible endpoint for --t2i-backend openai")
    v.add_argument("--t2i-prompt-suffix", default="", help="text appended to every diffusers prompt with no space (paper SD: the style suffix; see --t2i-model paper-sd)")
    v.add_argument("--i2t-system-prompt", default=None, help="system turn before each image (transformers chat VLMs; see --i2t-model paper-llava)")
    v.add_argument("--i2t-image-size", default=None, help="resize images to WxH before describing, e.g. 448x448 (paper LLaVA)")
    v.add_argument("--t2i-vae", default=None, help="swap the pipeline's VAE (paper: stabilityai/sd-vae-ft-mse)")
    v.add_argument("--t2i-steps", type=int, default=20, help="diffusion steps (DPM-Solver multistep; paper: 20)")
    v.add_argument("--t2i-size", default="1024x1024", help="OpenAI image size (paper: 1024x1024)")
    v.add_argument("--t2i-quality", default="standard", help="OpenAI image quality (paper: standard)")
    v.add_argument("--t2i-styles", default="vivid,natural", help="OpenAI styles, alternated over a descriptor's images (paper: vivid,natural)")
    v.add_argument("--t2i-settings", default="singular,plural", help="T2I settings")
    v.add_argument("--images-per-descriptor", type=int, default=DEFAULT_IMAGES_PER_DESCRIPTOR, help="images per descriptor and setting (paper: 10)")
    v.add_argument("--image-audit-id", default=None, help="describe the images of this earlier T2I audit instead of this run's")
    v.add_argument("--i2t-backend", default="transformers", choices=["transformers", "openai"], help="image-to-text backend")
    v.add_argument("--i2t-model", default=None, help="transformers image-text-to-text folder or hub id (paper: LLaVA), or an OpenAI vision model (gpt-4o); preset 'paper-llava' = llava-hf/llava-v1.6-vicuna-7b-hf with the system prompt and 448x448 input")
    v.add_argument("--i2t-base-url", default=None, help="OpenAI-compatible endpoint for --i2t-backend openai")
    v.add_argument("--i2t-settings", default="comprehensive,subjective,stereotypical,implicit,lexical", help="description prompts (objective: straightforward, moderate, comprehensive; subjective: subjective, stereotypical, implicit, lexical)")
    v.add_argument("--stop-list", default="nltk", choices=["nltk", "spacy"], help="stop words dropped from descriptions (nltk = the paper's code)")
    v.add_argument("--drop-descriptor-words", action="store_true", help="drop the descriptor's own words from its descriptions (default: kept, as the paper's code)")
    v.add_argument("--i2t-max-new-tokens", type=int, default=200, help="description length budget in tokens (paper: 200)")


#: ``--t2i-model`` / ``--i2t-model`` presets: the paper's configurations (issue 11; METHOD.md 3a).
T2I_PRESETS = {"paper-sd": "stable diffusion as the paper"}
I2T_PRESETS = {"paper-llava": "llava 1.6 vicuna 7b as the paper"}


def _apply_vision_presets(args) -> None:
    """Expand ``--t2i-model paper-sd`` / ``--i2t-model paper-llava`` into the paper's flags.

    paper-sd: ``stabilityai/stable-diffusion-2-inpainting``, VAE ``stabilityai/sd-vae-ft-mse``,
    20 DPM-Solver multistep steps, prompt + the paper's style suffix with no space
    (:data:`models_inference.t2i.PAPER_SD_PROMPT_SUFFIX`). paper-llava:
    ``llava-hf/llava-v1.6-vicuna-7b-hf``, the system prompt
    (:data:`models_inference.i2t.PAPER_LLAVA_SYSTEM_PROMPT`) and 448x448 input. Explicit flags
    (``--t2i-vae``, ``--t2i-prompt-suffix``, ``--i2t-system-prompt``, ``--i2t-image-size``) win.
    """
    if getattr(args, "t2i_model", None) == "paper-sd":
        from models_inference.t2i import PAPER_SD_MODEL, PAPER_SD_PROMPT_SUFFIX, PAPER_SD_STEPS, PAPER_SD_VAE

        args.t2i_backend, args.t2i_model = "diffusers", PAPER_SD_MODEL
        args.t2i_vae = args.t2i_vae or PAPER_SD_VAE
        args.t2i_steps = PAPER_SD_STEPS
        args.t2i_prompt_suffix = args.t2i_prompt_suffix or PAPER_SD_PROMPT_SUFFIX
    if getattr(args, "i2t_model", None) == "paper-llava":
        from models_inference.i2t import PAPER_LLAVA_IMAGE_SIZE, PAPER_LLAVA_MODEL, PAPER_LLAVA_SYSTEM_PROMPT

        args.i2t_backend, args.i2t_model = "transformers", PAPER_LLAVA_MODEL
        args.i2t_system_prompt = args.i2t_system_prompt or PAPER_LLAVA_SYSTEM_PROMPT
        args.i2t_image_size = args.i2t_image_size or "x".join(map(str, PAPER_LLAVA_IMAGE_SIZE))


def _image_size(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        w, h = (int(p) for p in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"dora audit: --i2t-image-size must be WxH (e.g. 448x448), got {text!r}") from None
    return [w, h]


def _vision_config(args) -> dict:
    """Run config of the T2I / I2T assets from ``dora audit`` flags."""
    _apply_vision_presets(args)
    return {
        "t2i_prompt_suffix": args.t2i_prompt_suffix,
        "i2t_system_prompt": args.i2t_system_prompt,
        "i2t_image_size": _image_size(args.i2t_image_size),
        "t2i_backend": args.t2i_backend,
        "t2i_model": args.t2i_model,
        "t2i_base_url": args.t2i_base_url,
        "t2i_vae": args.t2i_vae,
        "t2i_steps": args.t2i_steps,
        "t2i_size": args.t2i_size,
        "t2i_quality": args.t2i_quality,
        "t2i_styles": _csv_list(args.t2i_styles),
        "t2i_settings": _csv_list(args.t2i_settings),
        "images_per_descriptor": args.images_per_descriptor,
        "descriptors": _csv_list(args.descriptors),
        "per_dimension": args.per_dimension,
        "image_audit_id": args.image_audit_id,
        "i2t_backend": args.i2t_backend,
        "i2t_model": args.i2t_model,
        "i2t_base_url": args.i2t_base_url,
        "i2t_settings": _csv_list(args.i2t_settings),
        "i2t_max_new_tokens": args.i2t_max_new_tokens,
        "progress": not args.no_progress,
    }


def _vision_report(result) -> str:
    """One line per vision probe of a finished audit run: what ran, or why it was skipped."""
    lines = []
    names = {"t2i_images": "T2I", "i2t_descriptions": "I2T"}
    for mat in result.get_asset_materialization_events():
        key = mat.materialization.asset_key.path
        if len(key) != 2 or key[0] != "landing" or key[1] not in names:
            continue
        md = {k: v.value for k, v in mat.materialization.metadata.items()}
        if md.get("status") == "skipped":
            lines.append(f"dora: {names[key[1]]} probe skipped: {md.get('reason')}; {md.get('how_to_enable')}")
        else:
            lines.append(
                f"dora: {names[key[1]]} audit {md.get('audit_id')}: {md.get('rows_generated')} generated, "
                f"{md.get('rows_already_landed')} already landed"
            )
            if key[1] == "i2t_descriptions":
                lines.append(
                    f"  dora query \"select modality, setting, descriptor, word, tfidf, fisher_q from fct_associations "
                    f"where audit_id = '{md.get('audit_id')}' and is_significant order by fisher_q limit 20\""
                )
    return "\n".join(lines)


def _add_scoring_arguments(audit: argparse.ArgumentParser) -> None:
    """The scoring flags of ``dora audit`` (run config of orchestration/defs/scoring/)."""
    s = audit.add_argument_group(
        "scoring (METHOD.md section 4)",
        "Sentiment, toxicity and LLM-judge bias level of every significant association (offline defaults: "
        "VADER, the Jigsaw BiLSTM of toxic-comment-classifier, the embedded SmolLM2-135M as judge).",
    )
    s.add_argument("--score-all", action="store_true", help="score every association, not only the significant ones (= --score-pool all)")
    s.add_argument("--score-pool", default="fisher", choices=["fisher", "paper", "all"], help="which associations are scored: fisher (q < 0.05), paper (the paper's p-value significant pool, METHOD.md 3a) or all; recorded on every score row")
    s.add_argument("--sentiment-scorer", default="vader", help="'vader' or a transformers sentiment model id/folder (paper: distilbert/distilbert-base-uncased-finetuned-sst-2-english)")
    s.add_argument("--toxicity-scorer", default="toxic-comment-classifier", help="'toxic-comment-classifier' or a transformers toxicity model id/folder (paper: s-nlp/roberta_toxicity_classifier)")
    s.add_argument("--judge-backend", default="transformers", choices=["transformers", "openai", "none"], help="LLM judge backend ('none' skips the judge)")
    s.add_argument("--judge-model", default=None, help="judge model (default: smollm2-135m for transformers, gpt-4o for openai)")
    s.add_argument("--judge-base-url", default=None, help="OpenAI-compatible endpoint of the judge; key from $OPENAI_API_KEY (never stored)")
    s.add_argument("--judge-repeats", type=int, default=1, help="judgements per association (k); every repeat is kept")
    s.add_argument("--judge-answer", default=None, choices=["free", "constrained"], help="free answer parsed (paper) or first token constrained to 1-5 (local models; their default)")


def _scoring_ops(args) -> dict:
    """Run config of the scoring assets' ops from ``dora audit`` flags."""
    judge_on = args.judge_backend != "none"
    return {
        "sentiment_scores": {"config": {"scorer": args.sentiment_scorer, "score_all": args.score_all, "score_pool": args.score_pool}},
        "toxicity_scores": {"config": {"scorer": args.toxicity_scorer, "score_all": args.score_all, "score_pool": args.score_pool}},
        "judge_ratings": {
            "config": {
                "backend": args.judge_backend if judge_on else "transformers",
                "model": args.judge_model,
                "base_url": args.judge_base_url,
                "repeats": args.judge_repeats,
                "answer_mode": args.judge_answer,
                "score_all": args.score_all,
                "score_pool": args.score_pool,
                "enabled": judge_on,
                "progress": not args.no_progress,
            }
        },
    }


def _scoring_report(result) -> str:
    """One line per scoring asset of a finished audit run, and where the report is."""
    lines = []
    for mat in result.get_asset_materialization_events():
        key = mat.materialization.asset_key.path
        if len(key) != 2 or key[0] != "landing" or key[1] not in ("sentiment_scores", "toxicity_scores", "judge_ratings"):
            continue
        md = {k: v.value for k, v in mat.materialization.metadata.items()}
        if md.get("skipped"):  # a registry target that does not list this scorer
            lines.append(f"  {key[1]}: skipped ({md['skipped']} {md.get('target_scorers')} of target {md.get('target')})")
            continue
        done = md.get("rows_scored", md.get("rows_judged", 0))
        who = md.get("scorer") or md.get("judge_model") or "-"
        extra = f", parse rate {md['parse_rate']:.1%}" if "parse_rate" in md and done else ""
        lines.append(f"  {key[1]}: {done} new rows ({who}), {md.get('associations_selected', 0)} associations selected{extra}")
    if lines:
        lines = ["scores (dora report writes the HTML report; dora query \"select * from agg_bias_by_dimension\"):", *lines]
    return "\n".join(lines)


@contextlib.contextmanager
def _execute(executor: str, job, run_config: dict, instance, partition: str | None, tags: dict):
    """Run the audit job in this process, or under Dagster's multiprocess executor.

    Yields:
        The run's result (``ExecuteInProcessResult`` or ``ExecuteJobResult``): both give
        ``success``, ``run_id``, ``all_events`` and ``get_asset_materialization_events()``.
    """
    if executor == "in_process":
        yield job.execute_in_process(
            run_config=run_config, instance=instance, raise_on_error=False, partition_key=partition, tags=tags
        )
        return
    from dagster import execute_job, reconstructable

    from orchestration.definitions import audit_job_for_multiprocess

    if partition:
        tags = {**tags, "dagster/partition": partition}
    # forkserver with dora's definitions preloaded: each step process is forked from one that has
    # already imported Dagster, dbt and dora (~4 s of imports saved per step)
    start = {"forkserver": {"preload_modules": ["orchestration.definitions"]}}
    run_config = {**run_config, "execution": {"config": {"multiprocess": {"max_concurrent": 2, "start_method": start}}}}
    # step processes write to file descriptor 1, not to the redirected sys.stdout: point it there too
    sys.stdout.flush()
    saved_stdout = os.dup(1)
    os.dup2(sys.stdout.fileno(), 1)
    try:
        with execute_job(
            reconstructable(audit_job_for_multiprocess), instance=instance, run_config=run_config, tags=tags,
            raise_on_error=False,
        ) as result:
            yield result
    finally:
        sys.stdout.flush()
        os.dup2(saved_stdout, 1)
        os.close(saved_stdout)


def cmd_audit(args) -> int:
    home = _home()
    config = {
        "model": args.model,
        "backend": args.backend,
        "base_url": args.base_url,
        "settings": _csv_list(args.settings),
        "runs": args.runs,
        "letters": args.letters,
        "descriptor_source": args.descriptor_source,
        "descriptors": _csv_list(args.descriptors),
        "per_dimension": args.per_dimension,
        "prompt_style": args.prompt_style,
        "batch_size": args.batch_size,
        "audit_id": args.audit_id,
        "progress": not args.no_progress,
    }
    if getattr(args, "dry_run", False):  # issue 11: the plan only, no model, no Dagster run
        from orchestration.defs.config import AuditConfig
        from orchestration.dry_run import format_plan, t2t_plan_lines  # noqa: I001

        try:
            lines, audit_id, rate, source = t2t_plan_lines(AuditConfig(**config), audit_id=args.audit_id)
            _apply_vision_presets(args)
            if args.t2i_model:  # T2I rows x images (landed images need the model's version: not counted)
                from orchestration.dry_run import t2i_plan_lines

                lines += t2i_plan_lines(_csv_list(args.t2i_settings), _csv_list(args.descriptors), args.per_dimension,
                                        args.images_per_descriptor)
        except ValueError as exc:
            print(f"dora audit: {exc}", file=sys.stderr)
            return 2
        print(format_plan(lines, audit_id, rate, source))
        return 0
    from dagster import DagsterInstance

    from analytics.summary import audit_summary
    from orchestration.definitions import AUDIT_JOB, defs

    run_config = {
        "ops": {
            "t2t_completions": {"config": config},
            "t2i_images": {"config": _vision_config(args)},
            "i2t_descriptions": {"config": _vision_config(args)},
            "description_words": {"config": {"stop_list": args.stop_list, "drop_descriptor_words": args.drop_descriptor_words}},
            **_scoring_ops(args),
        },
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }
    partition = None
    if args.target:  # a registry target: its current version's partition, settings from the registry
        from ingestion.registry import RegistryError, VersionError
        from orchestration.defs.audits.runs import add_target_partition

        try:
            partition, config["registry"] = add_target_partition(DagsterInstance.get(), args.target, args.registry)
        except (RegistryError, KeyError, VersionError) as exc:
            print(f"dora audit: {exc}", file=sys.stderr)
            return 2
        print(f"dora: auditing registry target {args.target} (partition {partition}); DORA_HOME={home}", file=sys.stderr)
    else:
        print(f"dora: auditing {args.model} ({args.backend}); DORA_HOME={home}", file=sys.stderr)
    if args.rebuild:
        from ingestion.build_state import forget
        from orchestration.defs.dbt.assets import DBT_STEPS

        for step in ("crows_pairs", "descriptors", *DBT_STEPS):
            forget(step)
    job = defs.resolve_job_def(AUDIT_JOB)
    log_dir = home / "logs"
    log_dir.mkdir(exist_ok=True)
    log_path = log_dir / "last_audit_dbt.log"
    # dagster-dbt echoes every dbt event to stdout; keep the terminal for the summary.
    with open(log_path, "w") as log, contextlib.redirect_stdout(sys.stderr if args.verbose else log):
        from orchestration.instance import DeadRunReaper, configure_instance, process_tags, reap_dead_runs

        instance = DagsterInstance.get()
        configure_instance(instance)  # one DuckDB writer at a time (pool 'duckdb_writer' = 1 slot)
        os.environ.setdefault("DORA_WAREHOUSE_WAIT_SECONDS", "300")  # in-run readers wait for a writer
        reap_dead_runs(instance)  # free the slots of audits whose process was killed
        with DeadRunReaper(instance), _execute(args.executor, job, run_config, instance, partition, process_tags()) as result:
            pass
    if not result.success:
        for event in result.all_events:
            if event.is_step_failure and event.step_failure_data:  # (a RUN_FAILURE has no step data)
                print(f"dora: step {event.step_key} failed:\n{event.step_failure_data.error.to_string()}", file=sys.stderr)
        print(f"dora: audit failed (Dagster run {result.run_id}); dbt log: {log_path}; run logs: `dora ui`", file=sys.stderr)
        return 1
    audit_id = None
    for mat in result.get_asset_materialization_events():
        md = mat.materialization.metadata
        if "audit_id" in md and mat.materialization.asset_key.path[-1] == "t2t_completions":
            audit_id = md["audit_id"].value
    print(audit_summary(audit_id, top=args.top, run_id=result.run_id))
    print(_scoring_report(result))
    vision = _vision_report(result)
    if vision:
        print(vision, file=sys.stderr)
    return 0


def cmd_query(args) -> int:
    _home()
    from analytics.query import QueryRefusedError, WarehouseBusyError, format_result, run_query

    import duckdb

    try:
        print(format_result(run_query(args.sql), args.format))
    except (QueryRefusedError, WarehouseBusyError, FileNotFoundError) as exc:
        print(f"dora query: {exc}", file=sys.stderr)
        return 2
    except duckdb.Error as exc:
        print(f"dora query: SQL error: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_ui(args) -> int:
    _home()
    import subprocess

    from dagster import DagsterInstance

    from orchestration.instance import configure_instance, reap_dead_runs

    with DagsterInstance.get() as instance:
        configure_instance(instance)  # runs launched from the UI share the 1-slot 'duckdb_writer' pool
        reap_dead_runs(instance)
    os.environ.setdefault("DORA_WAREHOUSE_WAIT_SECONDS", "300")  # in-run readers wait for a writer

    cmd = [sys.executable, "-m", "dagster", "dev", "-m", "orchestration.definitions", "-h", args.host, "-p", str(args.port)]
    print(f"dora: starting the Dagster UI on http://{args.host}:{args.port} (DAGSTER_HOME={os.environ['DAGSTER_HOME']})", file=sys.stderr)
    return subprocess.call(cmd)


def cmd_models(args) -> int:
    _home()
    from analytics.diff import models_overview
    from analytics.query import format_result
    from ingestion.registry import RegistryError, load_registry

    try:
        registry = load_registry(args.registry)
    except RegistryError as exc:
        print(f"dora models: {exc}", file=sys.stderr)
        return 2
    print(format_result(models_overview(registry, resolve=not args.no_resolve), args.format))
    return 0


def cmd_diff(args) -> int:
    _home()
    from analytics.diff import DiffError, audit_diff
    from analytics.query import WarehouseBusyError, WarehouseMissingError

    try:
        report = audit_diff(args.target, args.from_ref, args.to_ref, top=args.top)
    except (DiffError, WarehouseBusyError, WarehouseMissingError) as exc:
        print(f"dora diff: {exc}", file=sys.stderr)
        return 2
    print(report.text(args.format))
    return 0


def cmd_report(args) -> int:
    home = _home()
    from analytics.query import WarehouseBusyError, WarehouseMissingError
    from analytics.report import write_report

    try:
        path = write_report(args.out, audit_id=args.audit_id, top=args.top)
    except (WarehouseMissingError, WarehouseBusyError, LookupError) as exc:
        print(f"dora report: {exc}", file=sys.stderr)
        return 2
    print(f"dora: report written to {path} (DORA_HOME={home})")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    handler = {"audit": cmd_audit, "report": cmd_report, "query": cmd_query, "ui": cmd_ui, "models": cmd_models, "diff": cmd_diff}[args.command]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
