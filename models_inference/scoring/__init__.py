"""Scoring of associations (docs/method.md#4-scoring): ``sentiment``, ``toxicity`` and the LLM
``judge`` (prompts + ``ratings`` parser + a loop over a text backend), sharing ``common``
(association sentences, the landing loop) and ``cache`` (scores cached per scorer version).
The associations to score come from the dbt model ``int_associations_to_score``.
"""
