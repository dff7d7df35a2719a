"""The batch sensor lands the finished batches of an audit run in batch mode without waiting
(as a scheduled re-audit runs), so the audit reaches ``finished`` with no command run by hand,
and a concurrent run holding the audit's landing lock keeps every batch landed exactly once.

Against the local Files + Batches server (tests/helpers/batch_server.py).
"""

from __future__ import annotations

import pytest

from models_inference.backends.batch_api import execute_batched
from models_inference.backends.batch_ledger import ledger_path, load_ledger
from models_inference.landing_locks import landing_lock
from tests.helpers.batch_server import BatchStubServer
from tests.test_batch_api import _answered, _events, _rows, letter_reply


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")


def _submitted(server):
    """A T2T audit in batch mode, run as its asset runs it (no --api-batch-wait): submitted, returned."""
    from orchestration.defs.biasdora.config import AuditConfig
    from orchestration.defs.biasdora.family import t2t_work
    from orchestration.defs.common import batch_options

    config = AuditConfig(
        model="stub-model",
        backend="openai",
        base_url=server.base_url,
        prompt_style="chat",
        descriptors=["child"],
        settings=["noun"],
        letters="bks",
        runs=2,
        progress=False,
        api_batch=True,
        api_batch_max_requests=4,
    )
    work = t2t_work(config, model_version="stub-model")
    summary = execute_batched(work, batch_options(config, "t2t", model_version="stub-model", target=None), progress=False)
    assert (summary.pending, summary.generated, len(server.created)) == (6, 0, 2)
    return work


def _tick():
    import dagster as dg

    from orchestration import families as fam
    from orchestration.defs.audits.batch_sensor import build_batch_sensor

    sensor = build_batch_sensor(fam.FAMILIES)
    with dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral()) as context:
        return sensor(context)


def test_the_sensor_finishes_an_audit_and_leaves_a_locked_one_to_its_run(dora_home, api_key):
    with BatchStubServer() as server:
        server.chat_reply = letter_reply
        work = _submitted(server)
        assert _events(work.name) == ["started"]
        lock = landing_lock(work.name)
        lock.acquire()  # a `dora audit` of the same audit is landing right now
        try:
            skipped = _tick()
        finally:
            lock.release()
        assert "left to it" in skipped.skip_message and _rows(work.name) == []
        assert [e.state for e in load_ledger(work.name).entries] == ["submitted", "submitted"]
        landed = _tick()  # the batches ended meanwhile: landed, and the audit finished
        assert f"{work.name}: 6 rows landed, 0 requests still in open batches" in landed.skip_message
        assert "no batch open at the API" in _tick().skip_message  # nothing left: nothing sent, nothing landed
        again = execute_batched(work, load_options(work), progress=False)  # the audit's own next run: nothing to do
        assert (again.generated, len(server.created)) == (0, 2)
    rows = _rows(work.name)
    assert len(rows) == 6 and set(_answered(rows).values()) == {1}
    events = _events(work.name)
    assert events[-1] == "finished" and events.count("finished") == 1  # the sensor's pass is a run: 'started', then 'finished'

    assert [e.state for e in load_ledger(work.name).entries] == ["closed", "closed"]


def test_the_sensor_names_an_unreadable_ledger_and_goes_on(dora_home, api_key):
    with BatchStubServer() as server:
        server.chat_reply = letter_reply
        work = _submitted(server)
        broken = ledger_path("t2t-other-audit")
        broken.write_text('{"name": "t2t-other-audit", "entries": [')
        result = _tick()
    assert f"the batch ledger {broken} is not JSON (cut short?)" in result.skip_message
    assert f"{work.name}: 6 rows landed" in result.skip_message and len(_rows(work.name)) == 6


def load_options(work):
    from orchestration.defs.audits.batch_sensor import _options

    return _options(load_ledger(work.name))


@pytest.mark.slow  # the T2T asset under Dagster (in process), as a scheduled run of a partition runs it
def test_a_partition_run_in_batch_mode_reaches_finished_through_the_sensor_alone(dora_home, api_key):
    import dagster as dg

    from orchestration.defs.audits.partitions import audit_partitions
    from orchestration.defs.biasdora.config import AuditConfig
    from orchestration.defs.biasdora.t2t.assets import t2t_completions

    instance, key = dg.DagsterInstance.ephemeral(), "adhoc:stub-model@stub-model"
    instance.add_dynamic_partitions(audit_partitions.name, [key])
    with BatchStubServer() as server:
        server.chat_reply, server.polls_to_finish = letter_reply, 3
        config = AuditConfig(
            model="stub-model",
            backend="openai",
            base_url=server.base_url,
            prompt_style="chat",
            descriptors=["child"],
            settings=["noun", "singular"],
            letters="ab",
            runs=2,
            progress=False,
            api_batch=True,
            api_batch_max_requests=3,
        )
        result = dg.materialize([t2t_completions], run_config=dg.RunConfig(ops={"t2t_completions": config}), instance=instance, partition_key=key)
        md = {k: v.value for k, v in result.get_asset_materialization_events()[0].materialization.metadata.items()}
        audit_id = md["audit_id"]
        assert (md["batch_pending"], md["rows_generated"], len(server.created)) == (8, 0, 3) and _events(audit_id) == ["started"]
        ticks = 0
        while _events(audit_id)[-1] != "finished" and ticks < 5:  # what the daemon does every 2 minutes; no command by hand
            _tick()
            ticks += 1
        assert len(server.created) == 3
    rows = _rows(audit_id)
    assert ticks == 2 and len(rows) == 8 and set(_answered(rows).values()) == {1} and {r["parse_status"] for r in rows} == {"ok"}
    assert [e.state for e in load_ledger(audit_id).entries] == ["closed"] * 3


@pytest.mark.slow  # a registry partition's T2T asset under Dagster (in process)
def test_a_registry_partitions_landed_batches_get_one_run_that_builds_its_marts(dora_home, tmp_path, monkeypatch):
    import dagster as dg

    from ingestion.registry import load_registry
    from orchestration import families as fam
    from orchestration.defs.audits.partitions import audit_partitions
    from orchestration.defs.audits.runs import run_config_for_target
    from orchestration.defs.biasdora.t2t.assets import t2t_completions
    from tests.test_target_batch_mode import REGISTRY, _letter

    monkeypatch.setenv("BD_STUB_KEY", "sk-test-target-batch")
    with BatchStubServer() as server:
        server.chat_reply, server.polls_to_finish = _letter, 3
        registry = tmp_path / "registry.yaml"
        registry.write_text(REGISTRY.format(url=server.base_url, options="api_batch: true, api_batch_max_requests: 3"))
        monkeypatch.setenv("DORA_REGISTRY", str(registry))
        config = run_config_for_target(load_registry(registry).target("bd"), fam.FAMILIES, str(registry)).ops["t2t_completions"]
        instance = dg.DagsterInstance.ephemeral()
        instance.add_dynamic_partitions(audit_partitions.name, ["bd@v3"])
        result = dg.materialize([t2t_completions], run_config=dg.RunConfig(ops={"t2t_completions": config}), instance=instance, partition_key="bd@v3")
        md = {k: v.value for k, v in result.get_asset_materialization_events()[0].materialization.metadata.items()}
        assert md["batch_pending"] == 4
        first = _tick()  # the batches are still running
        assert isinstance(first, dg.SkipReason) and "0 rows landed, 4 requests still in open batches" in first.skip_message
        second = _tick()
    (run,) = second.run_requests
    assert (run.partition_key, run.tags["dora/trigger"]) == ("bd@v3", "sensor") and run.run_key.startswith("bd@v3:batches-landed:")
    assert len(_rows(md["audit_id"])) == 4 and _events(md["audit_id"])[-1] == "finished"
    assert "no batch open at the API" in _tick().skip_message  # one run only: nothing left to land


def test_after_a_cancel_the_sensor_lands_what_ran_and_sends_nothing_new(dora_home, api_key, capsys):
    from orchestration.cli import main

    with BatchStubServer() as server:
        server.chat_reply = letter_reply
        work = _submitted(server)
        assert main(["batches", work.name, "--cancel"]) == 0
        landed = _tick()  # the cancelled batches ran half of their requests
        assert f"{work.name}: 3 rows landed, 0 requests still in open batches" in landed.skip_message
        assert len(server.created) == 2 and "no batch open at the API" in _tick().skip_message
    assert len(_rows(work.name)) == 3 and _events(work.name)[-1] != "finished"


@pytest.mark.slow  # a run waiting on its batches in a thread while the sensor ticks (~4 s)
def test_a_concurrent_run_and_the_sensor_land_every_key_once(dora_home, api_key):
    import threading
    import time

    from models_inference.backends.batch_requests import BatchOptions

    assert "no batch open at the API" in _tick().skip_message  # (the sensor's imports done before the race)
    with BatchStubServer() as server:
        server.chat_reply, server.polls_to_finish = letter_reply, 8
        work = _submitted(server)
        waiting = threading.Thread(
            target=execute_batched, args=(work, BatchOptions(max_requests=4, wait=True, poll_seconds=0.05)), kwargs={"progress": False}
        )
        waiting.start()  # `dora audit --api-batch-wait` of the same audit, holding its landing lock while it waits
        skipped = 0
        while waiting.is_alive():
            skipped += "left to it" in (_tick().skip_message or "")
            time.sleep(0.05)
        waiting.join()
        _tick()
        assert len(server.created) == 2
    rows = _rows(work.name)
    assert skipped >= 1 and len(rows) == 6 and set(_answered(rows).values()) == {1}
    assert _events(work.name).count("finished") == 1
