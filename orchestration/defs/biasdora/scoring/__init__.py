"""Scoring of significant associations: sentiment, toxicity, LLM-judge bias levels (docs/method.md#4-scoring)."""
