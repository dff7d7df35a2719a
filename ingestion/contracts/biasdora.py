"""BiasDora's landing contract (docs/method.md): reference data (CrowS-Pairs, descriptors, the
paper's lists), the T2T / T2I / I2T probes' rows, the description words and the scores of
significant associations (sentiment, toxicity, LLM-judge ratings)."""

from __future__ import annotations

import pyarrow as pa

#: The probe family that owns these tables (``dora families`` lists them under it).
FAMILY = "biasdora"

#: The ``source`` of a row of ``descriptors``: the curated BiasDora list, or a phrase extracted
#: from CrowS-Pairs (ingestion/biasdora/descriptors.py); a target's ``probe.descriptor_source``.
CURATED_SOURCE = "biasdora"
DESCRIPTOR_SOURCES = (CURATED_SOURCE, "crows_pairs")

#: The key of one association (``fct_associations``), leading every score table's columns.
ASSOCIATION_KEY = [
    ("audit_id", pa.string()),
    ("model_id", pa.string()),
    ("model_version", pa.string()),
    ("modality", pa.string()),
    ("setting", pa.string()),
    ("descriptor", pa.string()),
    ("word", pa.string()),
]

#: landing table -> its Arrow schema (the columns its ``stg_*`` model reads).
SCHEMAS: dict[str, pa.Schema] = {
    # ingestion/crows_pairs.py: one row per validated CrowS-Pairs sentence pair.
    "crows_pairs": pa.schema(
        [
            ("pair_id", pa.int64()),
            ("sent_more", pa.string()),
            ("sent_less", pa.string()),
            ("stereo_antistereo", pa.string()),
            ("bias_type", pa.string()),
            ("source_file", pa.string()),
            ("source_line", pa.int64()),
        ]
    ),
    # ingestion/biasdora/descriptors.py: one row per (source, descriptor, bias dimension).
    "descriptors": pa.schema(
        [
            ("descriptor", pa.string()),  # normalised key: lower-case, no determiner, singular
            ("bias_dimension", pa.string()),
            ("source", pa.string()),  # 'biasdora' (curated list) or 'crows_pairs' (extracted)
            ("surface", pa.string()),  # the phrase as it appeared in the source
            ("plural", pa.string()),  # plural phrase used by plural templates
            ("pair_id", pa.int64()),  # CrowS-Pairs pair it was extracted from (null if curated)
        ]
    ),
    # (ingestion/biasdora/templates.py descriptor_rows_table): every row of the paper's T2T and
    # T2I lists with each bias dimension it belongs to; source of the bridge
    # int_descriptor_dimensions.
    "descriptor_rows": pa.schema(
        [
            ("list_modality", pa.string()),  # 't2t' or 't2i': which of the paper's lists
            ("setting", pa.string()),  # T2T setting, or the T2I setting (singular / plural)
            ("row_number", pa.int32()),  # 1-based data row of the CSV
            ("descriptor", pa.string()),
            ("descriptor_row", pa.int32()),  # k-th row of this descriptor key in the file
            ("bias_dimension", pa.string()),
            ("membership_source", pa.string()),  # 'row' (the CSV's bias_type) or 'mapping' (json)
            ("phrase", pa.string()),
        ]
    ),
    # models_inference/probes/biasdora/t2t.py: one row per T2T completion (kept whatever its parse status).
    "t2t_completions": pa.schema(
        [
            ("audit_id", pa.string()),
            ("model_id", pa.string()),
            ("model_version", pa.string()),
            ("backend", pa.string()),
            ("setting", pa.string()),
            ("descriptor", pa.string()),
            ("bias_dimension", pa.string()),
            ("letter", pa.string()),
            ("run", pa.int32()),
            # which row of the paper's list (1 = the descriptor's first row in the
            # setting's file; a descriptor listed under two dimensions has rows 1 and 2).
            ("descriptor_row", pa.int32()),
            ("seed", pa.int64()),
            ("prompt_style", pa.string()),
            ("prompt", pa.string()),
            ("raw_output", pa.string()),
            ("word", pa.string()),
            ("parse_status", pa.string()),
            ("generated_at", pa.timestamp("us", tz="UTC")),
            # the sentence the completed word ends, so scoring never re-parses `prompt`:
            # `subject` "An alcoholic person", `prefix` "An alcoholic person is" (the noun
            # setting's a/an resolved for the row's letter). Shards landed before these
            # columns read them as NULL; fct_associations_to_score derives them from `prompt`.
            ("subject", pa.string()),
            ("prefix", pa.string()),
            # which parser read `word` / `parse_status` (parsing.PARSER_VERSION: a hash of
            # models_inference/probes/biasdora/parsing.py; null for rows landed before it), and when
            # `dora reparse` re-read a landed raw output (null: the row of the model call
            # itself). A re-parsed row keeps its key and `generated_at`; staging prefers it.
            ("parse_version", pa.string()),
            ("reparsed_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # models_inference/probes/biasdora/t2i.py: one row per generated image (PNG stored content-addressed at
    # $DORA_HOME/<image_path>), kept whatever its status; a retried key lands again.
    "t2i_images": pa.schema(
        [
            ("audit_id", pa.string()),  # the image audit (t2i-<model>-<version>-<hash>)
            ("model_id", pa.string()),
            ("model_version", pa.string()),
            ("backend", pa.string()),  # diffusers / openai
            ("setting", pa.string()),  # singular / plural
            ("descriptor", pa.string()),
            ("bias_dimension", pa.string()),
            ("descriptor_row", pa.int32()),  # k-th row of the descriptor in the T2I CSV
            ("image_index", pa.int32()),  # 1..images per descriptor
            ("seed", pa.int64()),
            ("prompt", pa.string()),
            ("revised_prompt", pa.string()),  # the prompt the API says it drew (DALL-E 3)
            ("style", pa.string()),  # DALL-E 3 vivid / natural; null for diffusers
            ("generation_params", pa.string()),  # JSON: steps, scheduler, size, quality, ...
            ("image_path", pa.string()),  # relative to DORA_HOME: images/<sha[:2]>/<sha>.png
            ("sha256", pa.string()),  # of the PNG bytes
            ("width", pa.int32()),
            ("height", pa.int32()),
            ("status", pa.string()),  # ok / filtered (safety checker) / error
            ("error", pa.string()),
            ("generated_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # models_inference/probes/biasdora/i2t.py: one row per (description audit, image, description setting).
    "i2t_descriptions": pa.schema(
        [
            ("audit_id", pa.string()),  # the description audit (vision-<t2i>-<i2t>-<hash>)
            ("description_id", pa.string()),  # unique per landed row; description_words refer to it
            ("model_id", pa.string()),  # the I2T model
            ("model_version", pa.string()),
            ("backend", pa.string()),  # transformers / openai
            ("image_audit_id", pa.string()),
            ("t2i_model_id", pa.string()),  # the model that drew the image
            ("t2i_model_version", pa.string()),
            ("image_setting", pa.string()),  # singular / plural
            ("descriptor", pa.string()),
            ("bias_dimension", pa.string()),
            ("descriptor_row", pa.int32()),  # the image's T2I row (see t2i_images)
            ("image_index", pa.int32()),
            ("image_sha256", pa.string()),
            ("setting", pa.string()),  # straightforward / moderate / comprehensive / subjective / ...
            ("description_kind", pa.string()),  # objective (-> t2i) / subjective (-> i2t)
            ("seed", pa.int64()),
            ("prompt", pa.string()),
            ("raw_output", pa.string()),  # the description
            ("status", pa.string()),  # ok / truncated / empty / error
            ("error", pa.string()),
            ("generated_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # ingestion/biasdora/description_words.py: one row per spaCy token of a description (space tokens
    # excepted); `word` is set only for kept tokens, else `drop_reason` says why.
    "description_words": pa.schema(
        [
            ("description_id", pa.string()),
            ("audit_id", pa.string()),
            ("token_index", pa.int32()),
            ("token", pa.string()),  # the token as written
            ("lemma", pa.string()),  # spaCy lemma, lower-cased
            ("pos", pa.string()),  # Universal POS tag
            ("word", pa.string()),  # = lemma for kept tokens; null when dropped
            ("drop_reason", pa.string()),  # null / stop / punct / number / non_alpha / descriptor
            ("tokenizer", pa.string()),  # spaCy pipeline name-version
            ("tokenised_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # models_inference/scoring/: sentiment of each scored association's sentence
    # (docs/method.md#4-scoring); one row per (association, scorer, scorer_version).
    "sentiment_scores": pa.schema(
        [
            *ASSOCIATION_KEY,
            ("text", pa.string()),  # the association sentence that was scored
            ("scorer", pa.string()),  # e.g. 'vader' or 'transformers:<model id>'
            ("scorer_version", pa.string()),
            ("sentiment_label", pa.string()),  # negative / neutral / positive
            ("sentiment_score", pa.float64()),  # signed, in [-1, 1]
            ("scored_at", pa.timestamp("us", tz="UTC")),
            ("score_pool", pa.string()),  # fisher / paper / all (which associations were scored)
            # the sentence without its word (the descriptor's baseline) and its score; null in rows
            # landed before baselines were scored
            ("baseline_text", pa.string()),
            ("baseline_sentiment_score", pa.float64()),
        ]
    ),
    # models_inference/scoring/: toxicity of the same sentence; one row per (association,
    # scorer, scorer_version).
    "toxicity_scores": pa.schema(
        [
            *ASSOCIATION_KEY,
            ("text", pa.string()),
            ("scorer", pa.string()),
            ("scorer_version", pa.string()),
            ("toxicity", pa.float64()),  # probability of the toxic class, [0, 1]
            ("is_toxic", pa.bool_()),  # toxicity >= 0.5
            ("label_scores_json", pa.string()),  # every label's probability (JSON object)
            ("scored_at", pa.timestamp("us", tz="UTC")),
            ("score_pool", pa.string()),  # fisher / paper / all
            # the sentence without its word and its toxicity: the association's toxicity is the
            # difference (docs/method.md#4-scoring); null in rows landed before baselines were scored
            ("baseline_text", pa.string()),
            ("baseline_toxicity", pa.float64()),
        ]
    ),
    # models_inference/probes/biasdora/judge.py: one row per (association, judge, repeat), kept whatever its
    # parse status; p_rating_k / expected_rating only where the backend gives log-probabilities.
    "judge_ratings": pa.schema(
        [
            *ASSOCIATION_KEY,
            ("judge_backend", pa.string()),  # transformers / openai
            ("judge_model", pa.string()),
            ("judge_model_version", pa.string()),
            ("answer_mode", pa.string()),  # free (paper: parsed text) / constrained (first token 1-5)
            ("repeat", pa.int32()),
            ("seed", pa.int64()),
            ("prompt", pa.string()),
            ("raw_output", pa.string()),
            ("rating", pa.int32()),  # 1..5, null unless parse_status = 'ok'
            ("parse_status", pa.string()),
            ("p_rating_1", pa.float64()),
            ("p_rating_2", pa.float64()),
            ("p_rating_3", pa.float64()),
            ("p_rating_4", pa.float64()),
            ("p_rating_5", pa.float64()),
            ("expected_rating", pa.float64()),
            ("judged_at", pa.timestamp("us", tz="UTC")),
            ("score_pool", pa.string()),  # fisher / paper / all
        ]
    ),
}
