"""Model inference: what to ask a model, how to call it, and how to score what it said.

Plain Python (no Dagster import); imports only :mod:`ingestion` (ARCHITECTURE.md):

* :mod:`models_inference.model_ref`: model references (alias / path / hub id / API model),
  reachability, and the one model-version function;
* :mod:`models_inference.backends`: how to call a model, one interface per modality
  (``text``, ``image``, ``vision``) and one OpenAI client helper (``openai_api``);
* :mod:`models_inference.probes`: one package per probe family (``biasdora``: the T2T, T2I
  and I2T probes of BiasDora, their prompts, paper constants and answer parsing, its
  association scoring and LLM judge);
* :mod:`models_inference.scoring`: text scorers (sentiment, toxicity), the score cache and
  the one loop that lands scores, knowing no family;
* :mod:`models_inference.resumable`: the resumable landing loop every probe runs on, and
  what it builds on: the audit events and identity (:mod:`models_inference.audit_log`), the
  failed-call limit (:mod:`models_inference.error_share`) and the inter-process locks
  (:mod:`models_inference.landing_locks`);
* :mod:`models_inference.image_store`: the content-addressed PNG store.

Floors, lowest first (``tests/test_layering.py``): ``api_retry``, ``image_store`` <
``backends``, ``model_ref``, ``resumable`` (with ``audit_log``, ``error_share``,
``landing_locks``) < ``scoring`` < ``probes``.
"""
