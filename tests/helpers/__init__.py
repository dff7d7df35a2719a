"""Test helpers shared by several test modules: tiny random-weight model builders, the local
OpenAI-compatible stub server, landing-row factories, ``dora`` subprocess helpers and the
session's finished audit homes. Test modules import from here, never from each other (pytest
would collect a test module imported by another twice, and a helper's home should be obvious)."""
