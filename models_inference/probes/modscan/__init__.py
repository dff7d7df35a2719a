"""ModSCAN probe family (seed 000): tables, prompts, parsers, probes (PROBES.md Part A)."""
