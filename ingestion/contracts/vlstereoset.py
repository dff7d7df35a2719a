"""VLStereoSet's landing contract (docs/families/vlstereoset.md; models_inference/probes/vlstereoset/):
the validated items of a CSV and the probe's caption scores."""

from __future__ import annotations

import pyarrow as pa

#: The probe family that owns these tables (``dora families`` lists them under it).
FAMILY = "vlstereoset"

#: landing table -> its Arrow schema (the columns its ``stg_*`` model reads).
SCHEMAS: dict[str, pa.Schema] = {
    # dataset.py: one row per (dataset, item) of a validated VLStereoSet CSV, with its image's
    # status and the derived neutral captions; a re-landed snapshot has a later landed_at.
    "vlstereoset_items": pa.schema(
        [
            ("dataset_id", pa.string()),  # vls-<sha256 of the CSV file, 12 hex>
            ("source_file", pa.string()),
            ("is_synthetic", pa.bool_()),  # the shipped synthetic file (not VLStereoSet data)
            ("item_id", pa.string()),  # r<row>, unique per dataset
            ("source_row", pa.int64()),
            ("source_line", pa.int64()),
            ("category", pa.string()),  # gender / profession / race / religion
            ("target", pa.string()),
            ("context", pa.string()),
            ("caption_stereotype", pa.string()),  # S_s
            ("caption_anti_stereotype", pa.string()),  # S_a
            ("caption_unrelated", pa.string()),  # S_i
            ("caption_source", pa.string()),  # as_given / filled_blank
            ("label", pa.int32()),  # raw label column (0 / 1)
            ("y", pa.string()),  # s (stereotypical image) / a (anti-stereotypical image)
            ("image_url", pa.string()),
            ("image_status", pa.string()),  # ok / missing / download_failed / bad_image / not_fetched
            ("image_source", pa.string()),  # folder / url / none
            ("image_path", pa.string()),  # relative to DORA_HOME (image store), when ok
            ("image_sha256", pa.string()),
            ("image_width", pa.int32()),
            ("image_height", pa.int32()),
            ("image_error", pa.string()),
            ("neutral_stereotype", pa.string()),  # S'_s (derived, NOT FROM PAPER)
            ("neutral_anti_stereotype", pa.string()),  # S'_a
            ("neutral_method", pa.string()),
            ("neutral_rule", pa.string()),
            ("neutral_status", pa.string()),  # ok / target_not_found
            ("landed_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
    # probe.py: one row per (audit, scorer variant, item, condition, caption), kept whatever
    # its status; a retried key lands again with a later scored_at.
    "vlstereoset_scores": pa.schema(
        [
            ("audit_id", pa.string()),
            ("model_id", pa.string()),
            ("model_version", pa.string()),
            ("backend", pa.string()),
            ("scorer", pa.string()),  # clip / loglik / mcq / vlstereo_text_caption_prior / idm / bim / ram
            ("scorer_variant", pa.string()),  # e.g. clip:cosine, loglik:mean, vlstereo_text_caption_prior:sum
            ("from_paper", pa.bool_()),  # false for dora's adaptations (loglik, mcq, text prior)
            ("score_kind", pa.string()),  # logit (softmax over the condition) / share (already a share of picks)
            ("dataset_id", pa.string()),
            ("item_id", pa.string()),
            ("condition", pa.string()),  # original / pair / neutral / blank_neutral
            ("caption_kind", pa.string()),  # stereotype / anti-stereotype / unrelated
            ("caption_text", pa.string()),
            ("score", pa.float64()),  # null unless status = 'ok'
            ("n_tokens", pa.int32()),  # caption tokens scored (loglik variants)
            ("status", pa.string()),  # ok / no_image / na / error
            ("error", pa.string()),
            ("detail_json", pa.string()),  # mcq answers, logit scale, ...
            ("scored_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
}
