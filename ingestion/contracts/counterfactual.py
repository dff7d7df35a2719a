"""The counterfactual family's landing contract (Howard et al.; docs/families/counterfactual.md):
its responses, their toxicity heads, the competence lexicon and the stereotype filter's answers
(models_inference/probes/counterfactual/)."""

from __future__ import annotations

import pyarrow as pa

#: The probe family that owns these tables (``dora families`` lists them under it).
FAMILY = "counterfactual"

#: Its own DuckDB functions, registered on the warehouse connection by dbt's plugin
#: (analytics/duckdb_plugin.py): ``kruskal_p`` of ``agg_numeric_ratings``.
DUCKDB_FUNCTIONS = ("analytics.counterfactual_stats",)

#: landing table -> its Arrow schema (the columns its ``stg_*`` model reads).
SCHEMAS: dict[str, pa.Schema] = {
    # one row per response (set x member x prompt x mitigation x seed), kept whatever its status.
    "counterfactual_responses": pa.schema(
        [
            ("audit_id", pa.string()),
            ("model_id", pa.string()),
            ("model_version", pa.string()),
            ("backend", pa.string()),
            ("variant", pa.string()),  # text (section 5.1 prefix) / image
            ("modality", pa.string()),  # text_only_llm / lvlm
            ("subset", pa.string()),  # race_gender / physical_gender / physical_race
            ("set_id", pa.string()),
            ("occupation", pa.string()),  # normalised key
            ("occupation_text", pa.string()),  # as in the prompt
            ("a1_type", pa.string()),
            ("a1", pa.string()),
            ("a2_type", pa.string()),
            ("a2", pa.string()),
            ("group_label", pa.string()),  # "<a1> <a2>"
            ("prompt_kind", pa.string()),  # open / additional / numeric
            ("prompt_label", pa.string()),  # Tables 6, 7, 15 labels
            ("mitigation", pa.string()),  # none / M1..M5 (Table 17)
            ("seed", pa.int32()),  # the run's index 0..runs-1 (not an RNG seed; staging names it run)
            ("generation_seed", pa.int64()),  # shared by the members of a (set, prompt, mitigation, seed)
            ("prompt", pa.string()),
            ("prompt_variant", pa.string()),  # paper (verbatim tables)
            ("prompt_style", pa.string()),  # chat (user turn) / completion (numeric prompts, small local models)
            ("image_sha256", pa.string()),  # image sets only
            ("image_path", pa.string()),
            ("max_new_tokens", pa.int32()),
            ("temperature", pa.float64()),
            ("top_p", pa.float64()),
            ("raw_output", pa.string()),
            ("status", pa.string()),  # ok / truncated / empty / error
            ("is_refusal", pa.bool_()),
            ("refusal_rule", pa.string()),
            ("parsed_value", pa.float64()),  # numeric prompts: kept rating / annual salary (App. F)
            ("parsed_number", pa.float64()),  # the number read, also when out of range
            ("parse_status", pa.string()),  # numeric prompts: ok / no_number / out_of_range / empty / error
            ("hourly", pa.bool_()),
            ("response_id", pa.string()),
            ("generated_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # toxicity heads of each response (one row per response and scorer version).
    "counterfactual_toxicity": pa.schema(
        [
            ("audit_id", pa.string()),
            ("response_id", pa.string()),
            ("scorer", pa.string()),
            ("scorer_version", pa.string()),
            ("toxicity", pa.float64()),
            ("severe_toxicity", pa.float64()),
            ("obscene", pa.float64()),
            ("threat", pa.float64()),
            ("insult", pa.float64()),
            ("identity_attack", pa.float64()),
            ("scored_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # competence lexicon and stop list (snapshots, App. E.1).
    "counterfactual_lexicon": pa.schema([("lexicon", pa.string()), ("word", pa.string()), ("dimension", pa.string()), ("direction", pa.int32())]),
    # stereotype filter answers (App. D.2): one row per (audit, subset, group, repeat, word list).
    "counterfactual_stereotype_flags": pa.schema(
        [
            ("audit_id", pa.string()),
            ("subset", pa.string()),
            ("group_label", pa.string()),
            ("repeat", pa.int32()),
            ("judge_backend", pa.string()),
            ("judge_model", pa.string()),
            ("judge_model_version", pa.string()),
            ("temperature", pa.float64()),
            ("prompt", pa.string()),
            ("candidate_words", pa.list_(pa.string())),
            ("word_list_hash", pa.string()),
            ("raw_output", pa.string()),
            ("parse_status", pa.string()),  # ok / empty_list / no_list / error
            ("flagged_words", pa.list_(pa.string())),
            ("hallucinated_words", pa.list_(pa.string())),
            ("judged_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
}
