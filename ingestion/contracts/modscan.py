"""ModSCAN's landing contract (docs/families/modscan.md): one table of query rows."""

from __future__ import annotations

import pyarrow as pa

#: The probe family that owns these tables (``dora families`` lists them under it).
FAMILY = "modscan"

#: landing table -> its Arrow schema (the columns its ``stg_*`` model reads).
SCHEMAS: dict[str, pa.Schema] = {
    # models_inference/probes/modscan/: one row per ModSCAN query (seed 000), kept whatever its
    # parse status; the N/A reason is the status (na_no_term, na_multiple_terms, na_box_*).
    "modscan_responses": pa.schema(
        [
            ("audit_id", pa.string()),
            ("model_id", pa.string()),
            ("model_version", pa.string()),
            ("backend", pa.string()),
            ("probe", pa.string()),  # modscan_vision / modscan_language / modscan_text_faces / modscan_text_persona
            ("modality", pa.string()),  # vision / language / text (the text-only analogues, NOT FROM PAPER)
            ("attribute", pa.string()),  # gender / race
            ("scenario", pa.string()),  # occupation / descriptor / persona
            ("instance", pa.string()),  # Table 1 term
            ("condition", pa.string()),  # original / blank (blank image or no scene description)
            ("prefix", pa.string()),  # none / sr / debiasing / role_* (tables.PREFIXES)
            ("query_unit", pa.string()),  # what makes the query unique within its cell (sample, pair, image)
            ("sample", pa.int32()),
            ("seed", pa.int64()),
            ("term_order", pa.string()),  # language / text_persona: the shuffled terms, '|'-joined
            ("left_group", pa.string()),  # vision / text_faces: the group shown left
            ("right_group", pa.string()),
            ("pair_id", pa.string()),  # vision: the spliced pair (image store sha256)
            ("left_face_id", pa.string()),
            ("right_face_id", pa.string()),
            ("image_sha256", pa.string()),  # the image sent (vision / language), null for text
            ("prompt_style", pa.string()),
            ("prompt", pa.string()),
            ("raw_output", pa.string()),
            ("answer", pa.string()),  # raw_output without an echoed prompt (what was parsed)
            ("parse_method", pa.string()),  # side_words / box_minigpt / box_cogvlm / gender_words / race_phrases
            ("parsed_choice", pa.string()),  # left / right / the group term; null unless status = ok
            ("chosen_group", pa.string()),  # the group the choice maps to; null unless status = ok
            ("status", pa.string()),
            ("error", pa.string()),
            ("generation_params", pa.string()),  # JSON: max_new_tokens, temperature, top_p, ...
            # free (the paper's parsed answer) / constrained (a local model's first token) / a
            # server's choice constraint (grammar, json_schema, ...); null: landed before the
            # column existed, answered freely
            ("answer_mode", pa.string()),
            ("deviation", pa.string()),  # what departs from the paper on this row (NOT FROM PAPER notes)
            ("generated_at", pa.timestamp("us", tz="UTC")),
        ]
    ),
}
