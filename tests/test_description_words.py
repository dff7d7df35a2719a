"""Description words (spaCy) and their T2I / I2T associations, checked by hand.

A fixture of real-looking image descriptions lands as ``i2t_descriptions`` rows; the real
tokeniser (:mod:`ingestion.biasdora.description_words`, spaCy en_core_web_sm) turns them into words;
``dbt build`` computes ``fct_associations``. Every expected word, lemma and statistic below
was worked out by hand from the sentences (docs/method.md#3-associations). These hand examples use the
options of dora before it followed the paper's released code (spaCy's stop list, the descriptor's own words dropped, singular
and plural images pooled: ``LEGACY``); the paper's defaults are tested at the end.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from analytics.dbt_runner import invoke_dbt
from ingestion.biasdora.description_words import (
    descriptor_word_forms,
    land_description_words,
    pending_descriptions,
    tokenise_descriptions,
)
from ingestion.landing import read_landing, write_shard
from tests.helpers.homes import NO_UNIT_TESTS

T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)
LN2 = math.log(2)
#: The models this chain feeds (others' marts are built by their own tests).
DBT_SELECTION = "+fct_associations +stg_t2i_images +stg_description_words"
#: The pre-issue-11 options the hand examples were worked out with.
LEGACY = {"stop_list": "spacy", "drop_descriptor_words": True}


def test_tokenising_lemmas_pos_and_drop_reasons():
    rows = tokenise_descriptions(["An old man with gray hair sits on a wooden bench in a park."], ["old person"], **LEGACY)[0]
    got = [(r["token"], r["lemma"], r["word"], r["drop_reason"]) for r in rows]
    assert got == [
        ("An", "an", None, "stop"),
        ("old", "old", None, "descriptor"),  # the descriptor's own word
        ("man", "man", "man", None),
        ("with", "with", None, "stop"),
        ("gray", "gray", "gray", None),
        ("hair", "hair", "hair", None),
        ("sits", "sit", "sit", None),  # lemmatised
        ("on", "on", None, "stop"),
        ("a", "a", None, "stop"),
        ("wooden", "wooden", "wooden", None),
        ("bench", "bench", "bench", None),
        ("in", "in", None, "stop"),
        ("a", "a", None, "stop"),
        ("park", "park", "park", None),
        (".", ".", None, "punct"),
    ]
    assert [r["token_index"] for r in rows] == list(range(15))
    assert {r["pos"] for r in rows if r["word"]} == {"NOUN", "ADJ", "VERB"}


def test_numbers_symbols_case_and_plural_descriptor_words():
    rows = tokenise_descriptions(
        ["She looks carefree and HAPPY; 2 birds fly by! Three $ signs.", "The elderly people are resting."],
        ["young person", "old person"],
        **LEGACY,
    )
    words = [[r["word"] for r in doc if r["word"]] for doc in rows]
    assert words == [["look", "carefree", "happy", "bird", "fly", "sign"], ["elderly", "rest"]]
    reasons = {r["token"]: r["drop_reason"] for r in rows[0]}
    assert reasons["2"] == "number" and reasons["Three"] == "number" and reasons["$"] == "non_alpha"
    assert reasons[";"] == "punct" and reasons["!"] == "punct" and reasons["by"] == "stop"
    assert {r["token"]: r["drop_reason"] for r in rows[1]}["people"] == "descriptor"  # plural of "person"
    assert descriptor_word_forms("old person") == {"old", "person", "people"}
    assert descriptor_word_forms("child") == {"child", "children"}
    with pytest.raises(ValueError, match="2 texts but 1 descriptors"):
        tokenise_descriptions(["a", "b"], ["x"])


# ----------------------------------------------------------------------------- the fixture


def description(did, descriptor, image_setting, image_index, setting, text, *, status="ok", at=T0):
    """One landing/i2t_descriptions row of the fixture description audit 'vision-fixture'."""
    kind = "objective" if setting in ("straightforward", "moderate", "comprehensive") else "subjective"
    return {
        "audit_id": "vision-fixture",
        "description_id": did,
        "model_id": "llava-fixture",
        "model_version": "lv1",
        "backend": "transformers",
        "image_audit_id": "t2i-fixture",
        "t2i_model_id": "sd-fixture",
        "t2i_model_version": "sv1",
        "image_setting": image_setting,
        "descriptor": descriptor,
        "bias_dimension": "age",
        "image_index": image_index,
        "image_sha256": f"{image_setting}-{descriptor}-{image_index}",
        "setting": setting,
        "description_kind": kind,
        "seed": image_index,
        "prompt": f"prompt of {setting}",
        "raw_output": text,
        "status": status,
        "error": "boom" if status == "error" else None,
        "generated_at": at,
    }


FIXTURE = [
    # objective (comprehensive) -> modality t2i; singular and plural images pool per descriptor
    description("o1", "old person", "singular", 1, "comprehensive", "An old man with gray hair sits on a wooden bench in a park."),
    description("o2", "old person", "plural", 1, "comprehensive", "The elderly man holds a wooden cane."),
    description("o3", "young person", "singular", 1, "comprehensive", "A young woman with long hair sits in a park."),
    # a failed call, retried later: only the later row counts
    description("o4", "young person", "singular", 2, "comprehensive", None, status="error"),
    description("o5", "young person", "singular", 2, "comprehensive", "A young man smiles.", at=T0 + timedelta(hours=1)),
    # subjective -> modality i2t
    description("s1", "old person", "singular", 1, "subjective", "He looks lonely and tired, but wise."),
    description("s2", "old person", "plural", 1, "subjective", "The elderly people are resting."),
    description("s3", "young person", "singular", 1, "subjective", "She looks carefree and happy; 2 birds fly by!", status="truncated"),
    description("s4", "young person", "singular", 2, "subjective", "", status="empty"),
]


@pytest.fixture(scope="module")
def fixture_warehouse(tmp_path_factory):
    home = tmp_path_factory.mktemp("desc_words_home")
    with pytest.MonkeyPatch.context() as mp:  # the module's home, restored afterwards
        mp.setenv("DORA_HOME", str(home))
        write_shard("i2t_descriptions", FIXTURE, partition="vision-fixture")
        first = land_description_words(**LEGACY)
        second = land_description_words(**LEGACY)  # idempotent: nothing pending any more
        invoke_dbt(["build", "--select", DBT_SELECTION, "--vars", "{pool_image_settings: true}", *NO_UNIT_TESTS], home)
        yield home, first, second


def _assoc(home, modality):
    import duckdb

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute(
            """select descriptor, word, model_id, model_version, setting, tf, df, idf, tfidf, pmi, fisher_p,
                      bias_dimensions
               from fct_associations where modality = ? order by descriptor, word""",
            [modality],
        ).fetchall()
    return {(r[0], r[1]): r[2:] for r in rows}


@pytest.mark.slow
def test_words_land_once_for_ok_and_truncated_descriptions(fixture_warehouse):
    home, first, second = fixture_warehouse
    # o1..o3, o5, s1..s3 are tokenised; o4 (error) and s4 (empty) have no text to tokenise
    assert first["descriptions"] == 7 and second == {"descriptions": 0, "tokens": 0, "words": 0, "dropped": {}}
    assert first["words"] == 12 + 7 + 6 + 5
    words = read_landing("description_words", order_by=["description_id", "token_index"])
    by_id: dict[str, list[str]] = {}
    for did, w in zip(words.column("description_id").to_pylist(), words.column("word").to_pylist(), strict=True):
        if w is not None:  # dropped tokens (stop words, ...) have no word
            by_id.setdefault(did, []).append(w)
    assert by_id["o2"] == ["elderly", "man", "hold", "wooden", "cane"]
    assert by_id["o5"] == ["man", "smile"]
    assert by_id["s2"] == ["elderly", "rest"]
    assert pending_descriptions() == []


@pytest.mark.slow
def test_t2i_associations_by_hand(fixture_warehouse):
    home, *_ = fixture_warehouse
    t2i = _assoc(home, "t2i")
    # documents (objective words, both image settings pooled, retried error replaced):
    #   old person   = man man gray hair sit wooden wooden bench park elderly hold cane  (12)
    #   young person = woman long hair sit park man smile                                (7)
    old = {"man", "gray", "hair", "sit", "wooden", "bench", "park", "elderly", "hold", "cane"}
    young = {"woman", "long", "hair", "sit", "park", "man", "smile"}
    assert set(t2i) == {("old person", w) for w in old} | {("young person", w) for w in young}
    model_id, version, setting, tf, df, idf, tfidf, pmi, fisher_p, dims = t2i[("old person", "wooden")]
    assert (model_id, version, setting) == ("sd-fixture", "sv1", "comprehensive") and "age" in dims  # the image model
    assert (tf, df) == (2, 1)
    assert idf == pytest.approx(LN2) and tfidf == pytest.approx(2 * LN2)
    assert pmi == pytest.approx(math.log2(2 * 19 / (12 * 2)))
    # Fisher 2x2 [[2, 10], [0, 7]]: P(X >= 2) = C(12,2) C(7,0) / C(19,2) = 66 / 171
    assert fisher_p == pytest.approx(66 / 171, rel=1e-9)
    assert t2i[("old person", "man")][3:7] == (2, 2, 0.0, 0.0)  # in both documents: idf 0
    _, _, _, tf, df, idf, tfidf, pmi, fisher_p, _ = t2i[("young person", "smile")]
    assert (tf, df, tfidf) == (1, 1, pytest.approx(LN2))
    assert pmi == pytest.approx(math.log2(19 / 7))
    assert fisher_p == pytest.approx(7 / 19, rel=1e-9)  # [[1, 6], [0, 12]]: C(7,1)/C(19,1)


@pytest.mark.slow
def test_i2t_associations_by_hand(fixture_warehouse):
    home, *_ = fixture_warehouse
    i2t = _assoc(home, "i2t")
    #   old person   = look lonely tired wise elderly rest   ('people': the descriptor's own word)
    #   young person = look carefree happy bird fly          (truncated still counts; empty s4 adds nothing)
    assert set(i2t) == {("old person", w) for w in ["look", "lonely", "tired", "wise", "elderly", "rest"]} | {
        ("young person", w) for w in ["look", "carefree", "happy", "bird", "fly"]
    }
    model_id, version, setting, tf, df, idf, tfidf, pmi, fisher_p, _ = i2t[("old person", "lonely")]
    assert (model_id, version, setting) == ("llava-fixture", "lv1", "subjective")  # the describing model
    assert (tf, df) == (1, 1) and idf == pytest.approx(LN2) and tfidf == pytest.approx(LN2)
    assert pmi == pytest.approx(math.log2(11 / 6))
    assert fisher_p == pytest.approx(6 / 11, rel=1e-9)  # [[1, 5], [0, 5]]: C(6,1)/C(11,1)
    assert i2t[("young person", "look")][3:7] == (1, 2, 0.0, 0.0)


@pytest.mark.slow
def test_staging_keeps_every_token_with_its_reason(fixture_warehouse):
    import duckdb

    home, *_ = fixture_warehouse
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        reasons = dict(
            con.execute("select coalesce(drop_reason, 'kept'), count(*) from stg_description_words where description_id = 'o1' group by 1").fetchall()
        )
        statuses = dict(con.execute("select status, count(*) from stg_i2t_descriptions group by 1").fetchall())
    assert reasons == {"kept": 7, "stop": 6, "descriptor": 1, "punct": 1}
    # o4 (error) is replaced by the later o5 for the same key
    assert statuses == {"ok": 6, "truncated": 1, "empty": 1}


def test_paper_defaults_nltk_stop_list_and_descriptor_words_kept():
    """docs/method.md#3a-paper-statistics: NLTK's English stop list keeps bias-bearing words spaCy's list
    drops, and the descriptor's own words are kept (dropping them is an option)."""
    from ingestion.biasdora.description_words import nltk_english_stop_words, tokenizer_name

    text = "The old man is serious and alone; the room is empty, full of people together, well lit."
    (rows,) = tokenise_descriptions([text], ["old person"])
    kept = [r["word"] for r in rows if r["word"]]
    for w in ("serious", "alone", "empty", "full", "together", "well", "old", "people"):
        assert w in kept, (w, kept)
    assert not any(r["drop_reason"] == "descriptor" for r in rows)
    (legacy,) = tokenise_descriptions([text], ["old person"], **LEGACY)
    legacy_kept = {r["word"] for r in legacy if r["word"]}
    assert not {"serious", "alone", "empty", "full", "together", "well"} & legacy_kept
    (dropped,) = tokenise_descriptions([text], ["old person"], drop_descriptor_words=True)
    assert {r["token"] for r in dropped if r["drop_reason"] == "descriptor"} == {"old", "people"}
    stops = nltk_english_stop_words()
    assert len(stops) == 179 and {"the", "is", "and", "of", "wouldn't"} <= stops
    assert tokenizer_name().endswith("+stop=nltk") and tokenizer_name("spacy", True).endswith("+stop=spacy+drop-descriptor")
    with pytest.raises(ValueError, match="stop_list"):
        tokenise_descriptions([text], ["old person"], stop_list="nope")


def test_spacy_stop_list_is_spacys_read_without_importing_spacy():
    import subprocess
    import sys

    from spacy.lang.en.stop_words import STOP_WORDS

    from ingestion.biasdora.description_words import spacy_english_stop_words

    assert spacy_english_stop_words() == frozenset(STOP_WORDS) and len(STOP_WORDS) == 326
    code = (
        "import sys; from ingestion.biasdora.description_words import spacy_english_stop_words as s; "
        "print(len(s()), 'spacy' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["326", "False", "False"]
