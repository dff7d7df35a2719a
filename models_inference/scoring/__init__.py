"""Scoring of texts, knowing no probe family (docs/method.md#4-scoring): the scorers (``sentiment``,
``toxicity``, ``hf_evaluate``, sharing ``common``: the :class:`TextScorer` interface), the score
``cache`` (a text is scored once per scorer version) and ``run`` (score the texts a family
landed, resumable, under the landing lock). A family says what its texts are and where the
scores land: BiasDora's association sentences and its LLM judge are in
:mod:`models_inference.probes.biasdora`.
"""
