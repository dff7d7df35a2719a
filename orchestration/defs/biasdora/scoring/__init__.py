"""Scoring of significant associations: sentiment, toxicity, LLM-judge bias levels (METHOD.md section 4)."""
