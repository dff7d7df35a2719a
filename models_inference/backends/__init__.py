"""How to call a model: one interface per modality, shared request/result types and helpers.

``base`` (request / result / prompt types), ``text`` (T2T probe and LLM judge),
``image`` (T2I), ``vision`` (I2T), ``openai_api`` (the one OpenAI client helper of every API
backend), ``local`` (per-row sampling and other helpers of local ``transformers`` models).
"""
