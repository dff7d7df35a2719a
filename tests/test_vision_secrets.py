"""The API key never reaches storage through the vision paths: the T2I probe (DALL-E 3 settings)
and the I2T probe (GPT-4o) against the local OpenAI-compatible stub (``tests/helpers/openai_server.py``)
whose scripted errors quote the request's key, as some proxies do. The failed calls must land
as ``error`` / ``refused`` rows with the key redacted (``***``), and the key must be in no
landed Parquet value and no file under ``$DORA_HOME``."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ingestion.landing import read_landing
from models_inference.backends.image import OpenAIImagesBackend
from models_inference.backends.openai_api import map_concurrently, redact
from models_inference.backends.vision import OpenAIVisionBackend
from models_inference.probes.biasdora.i2t import I2TProbeConfig, probe_i2t
from models_inference.probes.biasdora.t2i import (
    T2IProbeConfig,
    curated_t2i_templates,
    probe_t2i,
    select_t2i_templates,
)
from tests.helpers.openai_server import OpenAIStubServer


def _marker_locations(home: Path, marker: str) -> list[str]:
    """Every file under ``home`` holding ``marker`` in its bytes or, for Parquet (compressed),
    in a decoded value (the idea of ``_secret_locations`` in ``tests/test_fault_tolerance.py``)."""
    found = [f"bytes of {p}" for p in home.rglob("*") if p.is_file() and marker.encode() in p.read_bytes()]
    for path in home.rglob("*.parquet"):
        table = pq.read_table(path)
        for name in table.column_names:
            if any(marker in str(v) for v in table.column(name).to_pylist() if v is not None):
                found.append(f"parquet {path} column {name}")
    return found


@pytest.mark.parametrize(
    "marker",
    [
        f"sk-proj-{uuid.uuid4().hex}",  # OpenAI-shaped: also caught by the key-shape pattern
        f"dora{uuid.uuid4().hex[:10]}",  # not key-shaped (14 chars): only the exact-key masking catches it
    ],
    ids=["sk-shaped", "short"],
)
def test_vision_error_rows_never_store_the_key(dora_home, monkeypatch, marker):
    monkeypatch.setenv("OPENAI_API_KEY", marker)
    templates = select_t2i_templates(curated_t2i_templates(["singular"]), descriptors=["child"])
    with OpenAIStubServer() as server:
        server.echo_key_in_errors = True
        # DALL-E 3 settings (1024x1024, standard, vivid + natural); one call at a time, no client
        # retries, so the scripted failures hit images 1 and 2 in order
        images = OpenAIImagesBackend("dall-e-3", base_url=server.base_url, concurrency=1, max_retries=0)
        server.fail_next(500)  # server error -> 'error' row
        server.fail_next(400)  # content policy -> 'refused' row
        # max_error_share=None: the failed calls are stored as rows and the runs go on (the limit:
        # tests/test_error_share_families.py)
        t2i = probe_t2i(templates, images, T2IProbeConfig(images_per_descriptor=3), progress=False, max_error_share=None)
        assert dict(t2i.statuses) == {"error": 1, "refused": 1, "ok": 1}

        vision = OpenAIVisionBackend("gpt-4o", base_url=server.base_url, concurrency=1, max_retries=0)
        server.fail_next(401)  # a rejected key, quoted back in the error text
        i2t = probe_i2t(t2i.audit_id, vision, I2TProbeConfig(settings=("comprehensive", "stereotypical")), progress=False, max_error_share=None)
        assert dict(i2t.statuses) == {"error": 1, "ok": 1}
        sent = list(server.requests)

    # the key was really used on every call (so the stub really had it to quote back)
    assert len(sent) == 5
    assert all({k.lower(): v for k, v in r["headers"].items()}["authorization"] == f"Bearer {marker}" for r in sent)

    image_rows = {r["image_index"]: r for r in read_landing("t2i_images").to_pylist()}
    assert image_rows[1]["status"] == "error" and image_rows[2]["status"] == "refused"
    assert image_rows[1]["error"].startswith("InternalServerError: Error code: 500")
    assert image_rows[2]["error"].startswith("BadRequestError: Error code: 400")
    for row in (image_rows[1], image_rows[2]):
        assert "invalid api key ***" in row["error"] and row["image_path"] is None
    (err,) = [r for r in read_landing("i2t_descriptions").to_pylist() if r["status"] == "error"]
    assert err["error"].startswith("AuthenticationError: Error code: 401") and "invalid api key ***" in err["error"]
    assert err["raw_output"] is None

    assert _marker_locations(dora_home, marker) == []


def test_redact_masks_the_given_key_and_key_shaped_tokens():
    assert redact("invalid api key dora1234 (retry)", ["dora1234"]) == "invalid api key *** (retry)"
    assert redact("token sk-abc***wxyz rejected") == "token *** rejected"
    assert redact("bearer " + "a1B2" * 8 + " rejected") == "bearer *** rejected"
    assert redact("scripted 500 (no key here)", ["", "absent"]) == "scripted 500 (no key here)"


def test_map_concurrently_keeps_order_and_ticks_once_per_item():
    ticks, in_flight, peak, lock = [], [0], [0], threading.Lock()

    def call(n: int) -> int:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.02 * (5 - n))  # later items finish first
        with lock:
            in_flight[0] -= 1
        return n * n

    assert map_concurrently(call, range(5), 3, ticks.append) == [0, 1, 4, 9, 16]
    assert ticks == [1] * 5 and peak[0] == 3
    assert map_concurrently(call, [], 2) == []
