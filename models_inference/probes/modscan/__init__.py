"""ModSCAN probe family (seed 000): tables, prompts, parsers, probes (docs/families/modscan.md)."""
