"""Work that can be spread: a probe's keys in blocks (one Dagster step each), the executor choice
(in_process / multiprocess / celery), and the cluster (Celery workers, landing on S3, the instance
on PostgreSQL) whose warehouse equals an in-process audit's.

The blocks run against the local OpenAI stub server (``tests/helpers/openai_server.py``); the
cluster test starts ``redis-server``, PostgreSQL and two ``dagster-celery`` workers on free local
ports and lands on the module's moto S3 server; the tests that kill a worker's process share
one Redis and two workers on a SQLite home (one of them adds a third worker, on a queue of its
own, and kills it whole); a scheduled run meets a Redis with no worker (``tests/helpers/cluster.py``;
skipped with the reason when one is missing). The multiprocess executor's step processes print
nothing below the run's console level.
"""

from __future__ import annotations

import subprocess

import dagster as dg
import pytest

from ingestion.errors import AuditFailedError
from ingestion.landing import read_landing
from models_inference.probes.biasdora.t2t import T2TProbeConfig, T2TTemplate, probe_t2t
from models_inference.resumable import block_bounds, finish_blocks
from orchestration.cluster import DEFAULT_BROKER, execution_config, scheduled_execution_config
from tests.helpers.cluster import HANG_GUARD
from tests.helpers.openai_server import OpenAIStubServer

TEMPLATES = [
    T2TTemplate("singular", "alcoholic person", "disability", "An alcoholic person is"),
    T2TTemplate("noun", "child", "age", "This child is a/an"),
    T2TTemplate("noun", "veteran", "profession", "This veteran is a/an"),
]
CFG = T2TProbeConfig(runs=2, letters="bk", prompt_style="completion")


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def _events():
    return [(e["status"], e["rows_generated"]) for e in sorted(read_landing("audits").to_pylist(), key=lambda e: e["event_at"])]


def _keys():
    rows = read_landing("t2t_completions").to_pylist()
    return [(r["setting"], r["descriptor"], r["letter"], r["run"]) for r in rows if r["parse_status"] != "error"]


def test_block_bounds_cover_every_unit_once():
    assert block_bounds(7, 3) == [(0, 3), (3, 6), (6, 7)]
    assert block_bounds(6, 3) == [(0, 3), (3, 6)]
    assert block_bounds(2, 128) == [(0, 2)]
    assert block_bounds(0, 5) == [(0, 0)]  # one empty block: the fan-in step still runs
    with pytest.raises(ValueError, match="block size must be >= 1"):
        block_bounds(5, 0)


class ScriptedBackend:
    """A text backend answering every completion with ``reply`` (or failing every call while
    ``down``), counting its calls: the probe's real loop, without a model or a socket."""

    backend_name, model_id, model_version, default_prompt_style = "openai", "stub-model", "stub-model", "completion"

    def __init__(self, reply: str = "rave, and"):
        self.reply, self.down, self.calls = reply, False, 0

    def generate(self, requests, sampling, on_batch=None):
        from models_inference.backends.base import GenerationResult

        self.calls += len(requests)
        if on_batch:
            on_batch(len(requests))
        if self.down:
            return [GenerationResult("", False, error="APIConnectionError: connection refused") for _ in requests]
        return [GenerationResult(self.reply, True) for _ in requests]


def test_blocks_land_the_rows_of_one_run_and_a_failed_block_is_redone_alone(dora_home):
    backend = ScriptedBackend()
    first = probe_t2t(TEMPLATES, backend, CFG, progress=False, block=(0, 2))
    assert (first.planned, first.generated) == (8, 8)  # 2 templates x 2 letters x 2 runs
    # the server is down: the second block fails alone, its error rows land, the first block's stay
    backend.down = True
    with pytest.raises(AuditFailedError, match=r"^BiasDora T2T: 4 of 4 calls failed"):
        probe_t2t(TEMPLATES, backend, CFG, progress=False, block=(2, 3))
    assert _events() == [("started", 0), ("started", 0), ("failed", 4)]
    backend.down, backend.calls = False, 0
    again = [probe_t2t(TEMPLATES, backend, CFG, progress=False, block=b) for b in [(0, 2), (2, 3)]]
    assert [(s.already_landed, s.generated) for s in again] == [(8, 0), (0, 4)] and backend.calls == 4
    assert first.audit_id == again[1].audit_id  # the id covers every template, whichever block runs
    assert finish_blocks(first.audit_id, 4) is True
    assert _events()[-1] == ("finished", 4)
    assert finish_blocks(first.audit_id, 0) is False  # already finished, nothing new
    keys = _keys()
    assert len(keys) == len(set(keys)) == 12  # each key answered once over the blocks


@pytest.mark.slow  # imports every asset and runs Dagster (~15 s)
def test_t2t_asset_runs_one_step_per_block(dora_home, api_key):
    from orchestration.defs.biasdora.t2t.assets import t2t_completions

    with OpenAIStubServer() as server:
        server.completion_reply = lambda req: "rave, and"
        config = {
            "model": "stub",
            "backend": "openai",
            "base_url": server.base_url,
            "per_dimension": 1,
            "runs": 1,
            "letters": "b",
            "settings": ["noun"],
            "t2t_block_templates": 3,
            "progress": False,
            "prompt_style": "completion",
        }
        result = dg.materialize(
            [t2t_completions], run_config={"ops": {"t2t_completions": {"config": config}}}, instance=dg.DagsterInstance.ephemeral()
        )
    blocks = sorted({e.step_key for e in result.all_events if e.step_key and "t2t_block[" in e.step_key})
    meta = {m.asset_key.path[-1]: m.materialization.metadata for m in result.get_asset_materialization_events()}
    planned = meta["t2t_completions"]["rows_planned"].value  # one noun row per bias dimension
    assert blocks == [f"t2t_completions.t2t_block[templates_{a}_{b}]" for a, b in sorted(block_bounds(planned, 3))]
    assert meta["t2t_completions"]["blocks"].value == len(blocks) >= 2
    assert len(_keys()) == len(set(_keys())) == planned == meta["t2t_completions"]["rows_generated"].value
    assert [s for s, _ in _events()] == ["started"] * len(blocks) + ["finished"]


@pytest.mark.slow  # runs Dagster (~10 s)
def test_modscan_asset_runs_one_step_per_block_of_queries(dora_home, api_key):
    """ModSCAN's text analogues in blocks of 3 queries: one step per block, every query landed
    once, one ``started`` event per block and one ``finished`` once all have landed."""
    from orchestration.defs.modscan.assets import modscan_responses

    with OpenAIStubServer() as server:
        server.chat_reply = lambda req: "female"
        config = {
            "model": "stub",
            "backend": "openai",
            "base_url": server.base_url,
            "probes": ["modscan_text_persona"],
            "attributes": ["gender"],
            "conditions": ["original"],
            "runs": 4,
            "instances_per_scenario": 2,
            "block_queries": 3,
            "progress": False,
        }
        result = dg.materialize(
            [modscan_responses], run_config={"ops": {"modscan_responses": {"config": config}}}, instance=dg.DagsterInstance.ephemeral()
        )
    assert result.success
    blocks = sorted({e.step_key for e in result.all_events if e.step_key and "modscan_text_block[" in e.step_key})
    (mat,) = result.asset_materializations_for_node("modscan_responses")
    meta = {k: v.value for k, v in mat.metadata.items()}
    assert meta["rows_planned"] == meta["rows_generated"] == 8  # 2 persona traits x 4 samples
    assert blocks == [f"modscan_responses.modscan_text_block[queries_{a}_{b}]" for a, b in sorted(block_bounds(8, 3))]
    assert meta["blocks"] == 3 and meta["status_counts"] == {"ok": 8}
    rows = read_landing("modscan_responses").to_pylist()
    keys = [(r["attribute"], r["scenario"], r["instance"], r["condition"], r["query_unit"]) for r in rows]
    assert len(keys) == len(set(keys)) == 8
    assert [s for s, _ in _events()] == ["started"] * 3 + ["finished"]


@pytest.mark.slow  # runs Dagster (~5 s)
def test_vlstereoset_asset_runs_one_step_per_block_of_items(dora_home):
    """VLStereoSet's 22 synthetic items in blocks of 8, two reference scorers: one step per block,
    each scorer's keys landed once, per audit one ``started`` event per block and one
    ``finished`` once all have landed; the scores asset stays downstream of the items asset."""
    from orchestration.defs.vlstereoset.assets import ITEMS_KEY, SCORES_KEY, vlstereoset_probe

    config = {"scorers": ["idm", "bim"], "block_items": 8, "progress": False}
    result = dg.materialize(
        [vlstereoset_probe], run_config={"ops": {"vlstereoset_probe": {"config": config}}}, instance=dg.DagsterInstance.ephemeral()
    )
    assert result.success
    assert vlstereoset_probe.asset_deps[SCORES_KEY] == {ITEMS_KEY}
    blocks = sorted({e.step_key for e in result.all_events if e.step_key and "vlstereoset_block[" in e.step_key})
    assert blocks == sorted(f"vlstereoset_probe.vlstereoset_block[items_{a}_{b}]" for a, b in block_bounds(22, 8))
    (mat,) = [m for m in result.get_asset_materialization_events() if m.asset_key == SCORES_KEY]
    meta = {k: v.value for k, v in mat.materialization.metadata.items()}
    assert (meta["items_scored"], meta["blocks"], meta["scorers"]) == (22, 3, "idm,bim")
    rows = read_landing("vlstereoset_scores").to_pylist()
    keys = [(r["scorer"], r["item_id"], r["condition"], r["caption_kind"]) for r in rows]
    assert len(keys) == len(set(keys)) == meta["rows_generated"] > 0
    assert {r["item_id"] for r in rows} == {it["item_id"] for it in read_landing("vlstereoset_items").to_pylist()}
    events = sorted(read_landing("audits").to_pylist(), key=lambda e: e["event_at"])
    for audit_id in meta["audit_ids"].split(","):
        assert [e["status"] for e in events if e["audit_id"] == audit_id] == ["started"] * 3 + ["finished"]


def test_executor_choices_give_their_run_config(monkeypatch):
    assert execution_config("in_process") == {"config": {"in_process": {}}}
    assert execution_config("multiprocess")["config"]["multiprocess"]["max_concurrent"] == 2
    monkeypatch.delenv("DORA_CELERY_BROKER", raising=False)
    assert execution_config("celery") == {"config": {"celery": {"broker": DEFAULT_BROKER, "backend": DEFAULT_BROKER}}}
    monkeypatch.setenv("DORA_CELERY_BROKER", "redis://queue:6379/1")
    assert execution_config("celery")["config"]["celery"]["broker"] == "redis://queue:6379/1"
    assert execution_config("celery", "redis://flag:1/0")["config"]["celery"]["backend"] == "redis://flag:1/0"
    monkeypatch.delenv("DORA_EXECUTOR", raising=False)
    assert scheduled_execution_config() is None
    monkeypatch.setenv("DORA_EXECUTOR", "celery")
    assert scheduled_execution_config()["config"]["celery"]["broker"] == "redis://queue:6379/1"
    with pytest.raises(ValueError, match="executor must be one of"):
        execution_config("k8s")
    # the worker timeout of the run's submission loop: --celery-worker-timeout, or the daemon's variable
    assert execution_config("celery", worker_timeout=30)["config"]["celery"]["worker_timeout"] == 30.0
    monkeypatch.setenv("DORA_CELERY_WORKER_TIMEOUT", "0")
    assert scheduled_execution_config()["config"]["celery"]["worker_timeout"] == 0.0
    monkeypatch.setenv("DORA_CELERY_WORKER_TIMEOUT", "soon")
    with pytest.raises(ValueError, match=r"^\$DORA_CELERY_WORKER_TIMEOUT='soon': expected seconds >= 0 \(0: no limit\)$"):
        scheduled_execution_config()


@pytest.mark.slow  # a fresh interpreter importing dora (~5 s)
def test_the_fork_server_preloads_what_a_step_process_opens(dora_home):
    """The multiprocess executor forks each step from a server that imported
    ``orchestration.step_preload``: after it, the modules of opening the Dagster instance, the
    backends' ``openai`` and ``pandas``, and the audit job rebuilt from its pointer are in the
    server (a fresh interpreter, as the fork server is), so no step process pays them again."""
    import json
    import subprocess
    import sys

    from tests.helpers.dora_cli import REPO, dora_env

    start = execution_config("multiprocess")["config"]["multiprocess"]["start_method"]["forkserver"]
    assert start["preload_modules"] == ["orchestration.definitions", "orchestration.step_preload"]
    (dora_home / "dagster").mkdir(parents=True)
    probe = (
        "import sys, time\n"
        "import orchestration.definitions as d\n"
        "from dagster import reconstructable\n"
        "before = {m for m in ('openai', 'pandas', 'dagster._core.storage.event_log.sqlite', 'upath') if m in sys.modules}\n"
        "import orchestration.step_preload\n"
        "t = time.perf_counter(); reconstructable(d.audit_job_for_multiprocess).get_definition()\n"
        "print(__import__('json').dumps({'before': sorted(before), 'after': [m in sys.modules for m in "
        "('openai', 'pandas', 'dagster._core.storage.event_log.sqlite', 'upath')], 'job_s': time.perf_counter() - t}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=dora_env(dora_home), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["before"] == []  # orchestration.definitions alone imports none of them
    assert all(out["after"]) and out["job_s"] < 0.05  # imported, and the job comes from Dagster's cache


@pytest.mark.slow  # a Dagster run whose steps run in processes of the fork server (~10 s)
def test_multiprocess_step_processes_print_nothing_below_the_run_s_console_level(tmp_path):
    """Each step process announced itself on the terminal ("Executing step ... in subprocess",
    DEBUG) through a log manager that ignores the run's console level: ``dora audit --executor
    multiprocess`` (console at CRITICAL) printed one Dagster line per step. The fork server's
    preload (orchestration/step_preload.py) gives that log manager the run's level; the event is
    still in the run's event log."""
    from tests.helpers.cluster import init_instance

    home = tmp_path / "home"
    init_instance(home / "dagster")
    config = {"execution": execution_config("multiprocess"), "loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    out, err = _run_job(home, "two_steps_job", config)
    assert out["success"] is True and out["steps"] == {"first": "STEP_SUCCESS", "second": "STEP_SUCCESS"}
    assert " - dagster - " not in err and "Traceback" not in err, err
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        (run,) = instance.get_runs()
        started = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_WORKER_STARTED).records
    assert sorted(r.event_log_entry.step_key for r in started) == ["first", "second"]


def test_the_dora_executor_offers_the_three_choices():
    from orchestration.cluster import celery_available, dora_executor

    assert dora_executor.name == "dora"
    assert set(dora_executor.config_schema.config_type.fields) == {"in_process", "multiprocess", "celery"}
    if celery_available():  # dagster-celery's fields and dora's worker timeout (default 120 s)
        celery = dora_executor.config_schema.config_type.fields["celery"].config_type.fields
        assert {"broker", "backend", "retries"} < set(celery) and celery["worker_timeout"].default_value == 120.0
    assert dora_executor.get_requirements({"in_process": {}}) == []
    assert dora_executor.get_requirements({"celery": {}}) == dora_executor.get_requirements({"multiprocess": {}}) != []


# ----------------------------------------------------------------------------- Celery, end to end
AUDIT = (
    "audit",
    "--family",
    "biasdora",
    "--family",
    "counterfactual",
    "--backend",
    "openai",
    "--model",
    "stub-model",
    "--prompt-style",
    "completion",
    "--per-dimension",
    "1",
    "--settings",
    "singular,noun",
    "--letters",
    "abc",
    "--runs",
    "1",
    "--judge-backend",
    "none",
    "--cf-judge-backend",
    "none",
    "--no-progress",
    "--t2t-block-templates",
    "6",
    "--cf-block-sets",
    "1",
    "--cf-sets-per-occupation",
    "2",
)


def warehouse_contents(home, filesystem=None) -> dict:
    """Every table of the warehouse: its row count, and the keys of the probe marts
    (``filesystem``: the fsspec filesystem the staging views read the landing zone through)."""
    import duckdb

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        if filesystem is not None:
            con.register_filesystem(filesystem)
        tables = [r[0] for r in con.execute("select table_name from information_schema.tables where table_schema = 'main' order by 1").fetchall()]
        out = {t: con.execute(f'select count(*) from "{t}"').fetchall()[0][0] for t in tables}
        out["t2t keys"] = sorted(con.execute("select audit_id, setting, descriptor, letter, run from stg_t2t_completions").fetchall())
        out["cf keys"] = sorted(
            con.execute("select audit_id, set_id, a1, a2, prompt_label, mitigation, run from fct_counterfactual_responses").fetchall()
        )
    return out


@pytest.mark.slow  # runs Dagster (~3 s)
def test_vlstereoset_with_no_scorer_lands_the_items_and_scores_nothing(dora_home):
    """No scorer selected: the items land, the block scores nothing, and the fan-in step still
    states the dataset and zero rows (it takes them from a block that had items)."""
    from orchestration.defs.vlstereoset.assets import SCORES_KEY, vlstereoset_probe

    result = dg.materialize(
        [vlstereoset_probe],
        instance=dg.DagsterInstance.ephemeral(),
        run_config={"ops": {"vlstereoset_probe": {"config": {"scorers": [], "progress": False}}}},
    )
    assert result.success
    (mat,) = [m for m in result.get_asset_materialization_events() if m.asset_key == SCORES_KEY]
    meta = {k: v.value for k, v in mat.materialization.metadata.items()}
    assert (meta["items_scored"], meta["blocks"], meta["scorers"], meta["rows_generated"]) == (22, 1, "", 0)
    assert len(read_landing("vlstereoset_items")) == 22 and len(read_landing("vlstereoset_scores")) == 0


def _run_report(outputs: list[str], homes) -> str:
    """Each audit's whole output and the tail of each failed run's log (pytest cuts a long
    assertion message in the middle, where the reason is)."""
    parts = []
    for output, home in zip(outputs, homes, strict=True):
        parts.append(f"--- output of the audit in {home.name}:\n{output}")
        for log in sorted((home / "logs").glob("audit-*.log")):
            parts.append(f"--- {log.name} (last 80 lines):\n" + "\n".join(log.read_text(errors="replace").splitlines()[-80:]))
    for worker_log in sorted((homes[-1] / "workers").glob("w*.log")):
        parts.append(f"--- {worker_log.name} (last 40 lines):\n" + "\n".join(worker_log.read_text(errors="replace").splitlines()[-40:]))
    return "\n".join(parts)


def block_pids(home) -> dict[str, set[int]]:
    """The processes that ran the block steps of the latest run of ``home``'s Dagster instance."""
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        run = instance.get_runs(limit=1)[0]
        pids: dict[str, set[int]] = {}
        for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS):
            op = entry.step_key.split(".")[-1].split("[")[0]
            if op.endswith("_block"):
                pids.setdefault(op, set()).add(entry.dagster_event.pid)
    return pids


@pytest.mark.slow
@pytest.mark.scenario
def test_celery_audit_on_a_cluster_holds_the_rows_of_an_in_process_audit(tmp_path, monkeypatch, s3_env):
    """The cluster of docs/operations.md on one machine: a small BiasDora + counterfactual audit
    (T2T in 3 blocks of 6 templates, counterfactual in 2 blocks of 1 set) on two Celery workers (Redis
    broker), landing on S3 (moto), the Dagster instance on PostgreSQL (docs/cluster/dagster.yaml,
    as the user's own ``$DAGSTER_HOME/dagster.yaml``); at the same time the same audit in one
    process on the embedded default (local landing folder, SQLite instance). The two warehouses
    hold the same tables, counts and keys; the Celery audit landed nothing locally, its run and
    block steps are in PostgreSQL, no SQLite storage is beside it, and dora left the user's
    dagster.yaml as it was."""
    import shutil

    import s3fs

    from tests.helpers.cluster import celery_workers, postgres_server, redis_server
    from tests.helpers.dora_cli import REPO, dora_argv, dora_env, prepare_dbt_manifest

    prepare_dbt_manifest()
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    cluster_yaml = REPO / "docs" / "cluster" / "dagster.yaml"
    (cluster / "dagster").mkdir(parents=True)
    shutil.copy(cluster_yaml, cluster / "dagster" / "dagster.yaml")
    s3 = s3_env  # the module's moto server (a bucket of this test's own): one server start less
    with redis_server(tmp_path / "redis") as broker, postgres_server() as pg:
        for name, value in pg.items():  # this process opens the instance too (the yaml reads the environment)
            monkeypatch.setenv(name, value)
        fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3["AWS_ENDPOINT_URL"]}, key="testing", secret="testing")
        fs.mkdir("dora-cluster")
        on_cluster = {**s3, **pg, "DORA_LANDING_URL": "s3://dora-cluster/landing", "OPENAI_API_KEY": "sk-test"}
        with celery_workers(cluster, broker, 2, **on_cluster), OpenAIStubServer() as server:
            server.completion_reply = lambda req: "rave, and"
            server.chat_reply = lambda req: "They are a capable worker. 7"
            args = [*AUDIT, "--base-url", server.base_url]
            runs = [
                subprocess.Popen(
                    dora_argv(*args), env=dora_env(local, OPENAI_API_KEY="sk-test"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
                ),
                subprocess.Popen(
                    dora_argv(*args, "--executor", "celery", "--celery-broker", broker),
                    env=dora_env(cluster, **on_cluster),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                ),
            ]
            outputs = [p.communicate(timeout=1500)[0] for p in runs]
        if [p.returncode for p in runs] != [0, 0]:
            pytest.fail(_run_report(outputs, [local, cluster]), pytrace=False)
        fs.invalidate_cache()  # list what the workers put, not what this client saw at mkdir
        landed = fs.find("dora-cluster/landing")
        local_rows, cluster_rows = warehouse_contents(local), warehouse_contents(cluster, fs)
        with dg.DagsterInstance.from_config(str(cluster / "dagster")) as instance:
            assert type(instance.run_storage).__name__ == "PostgresRunStorage"
            assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
            (run,) = instance.get_runs()
            assert run.status == dg.DagsterRunStatus.SUCCESS
        pids = block_pids(cluster)
    assert sorted(pids) == ["counterfactual_block", "t2t_block"]
    # the blocks ran on both workers (which worker takes which op's blocks depends on timing)
    assert len(set().union(*pids.values())) == 2 and runs[1].pid not in set().union(*pids.values())
    assert local_rows["stg_t2t_completions"] == 54 and local_rows["fct_counterfactual_responses"] == 240
    assert cluster_rows == local_rows
    assert any("/t2t_completions/" in key for key in landed) and any("/counterfactual_responses/" in key for key in landed)
    assert not (cluster / "landing").exists() or not any((cluster / "landing").rglob("*.parquet"))
    assert not list((cluster / "dagster").rglob("*.db"))  # no SQLite storage beside PostgreSQL
    assert (cluster / "dagster" / "dagster.yaml").read_text() == cluster_yaml.read_text()


# ----------------------------------------------------------------------------- object storage landing
@pytest.fixture(scope="module")
def s3_env(tmp_path_factory):
    from tests.helpers.cluster import moto_s3

    with moto_s3(tmp_path_factory.mktemp("moto")) as env:
        yield env


@pytest.fixture
def s3_landing(s3_env, dora_home, monkeypatch, request):
    """``DORA_LANDING_URL`` on a new bucket of the moto server; yields the s3fs filesystem."""
    import s3fs

    for name, value in s3_env.items():
        monkeypatch.setenv(name, value)
    bucket = f"dora-{request.node.name.replace('_', '-')[:40].lower()}"
    fs = s3fs.S3FileSystem()
    fs.mkdir(bucket)
    monkeypatch.setenv("DORA_LANDING_URL", f"s3://{bucket}/landing/")
    return fs, bucket


@pytest.mark.slow  # starts moto's S3 server (~3 s)
def test_shards_land_on_object_storage_and_read_back(s3_landing, dora_home):
    from ingestion.build_state import Fingerprint
    from ingestion.landing import write_shard
    from ingestion.landing_location import landing_root

    fs, bucket = s3_landing
    rows = [
        {"audit_id": "a1", "event_at": None, "status": "started", "rows_generated": 0},
        {"audit_id": "a1", "event_at": None, "status": "finished", "rows_generated": 3},
    ]
    before = Fingerprint().add_tree(landing_root() / "audits").hexdigest()
    shard = write_shard("audits", rows, partition="a1")
    assert str(shard).startswith(f"s3://{bucket}/landing/audits/a1/") and str(shard).endswith(".parquet")
    keys = sorted(k.split("/landing/")[1] for k in fs.find(f"{bucket}/landing"))
    assert keys == ["audits/_schema.parquet", f"audits/a1/{shard.name}"]  # no temporary key left
    assert read_landing("audits", columns=["status", "rows_generated"], filters={"audit_id": "a1"}, order_by=["rows_generated"]).to_pylist() == [
        {"status": "started", "rows_generated": 0},
        {"status": "finished", "rows_generated": 3},
    ]
    assert Fingerprint().add_tree(landing_root() / "audits").hexdigest() != before  # dbt sees the new shard
    assert not (dora_home / "landing" / "audits").exists()  # nothing landed locally


def test_a_landing_url_without_protocol_is_one_clear_line(monkeypatch, dora_home):
    from ingestion.errors import LandingLocationError
    from ingestion.landing_location import landing_url

    monkeypatch.setenv("DORA_LANDING_URL", "bucket/landing")
    with pytest.raises(LandingLocationError, match=r"^\$DORA_LANDING_URL='bucket/landing' is not an object-storage URL"):
        landing_url()
    monkeypatch.setenv("DORA_LANDING_URL", "")
    assert landing_url() is None


@pytest.mark.slow  # moto's S3 server and a dbt build
def test_dbt_stages_the_shards_a_probe_landed_on_object_storage(s3_landing, dora_home):
    """The T2T probe lands on S3 (moto) and dbt-duckdb stages every row from there: its
    DuckDB connection reads the shards through the registered fsspec filesystem."""
    from analytics.dbt_runner import invoke_dbt
    from analytics.query import execute_query

    fs, bucket = s3_landing
    summary = probe_t2t(TEMPLATES, ScriptedBackend(), CFG, progress=False)
    assert summary.generated == 12 and fs.find(f"{bucket}/landing/t2t_completions/{summary.audit_id}")
    invoke_dbt(["build", "--select", "stg_t2t_completions", "stg_audits"], dora_home)
    # `dora query`'s locked-down connection reads the staging views over S3 (and nothing else)
    staged = execute_query(
        "select count(*), count(distinct (setting, descriptor, letter, run)) from stg_t2t_completions where audit_id = ?", params=[summary.audit_id]
    ).rows
    status = execute_query("select status from stg_audits order by event_at desc limit 1").rows
    assert staged == [(12, 12)] and status == [("finished",)]
    assert not (dora_home / "landing" / "t2t_completions").exists()


@pytest.mark.slow  # starts moto's S3 server (~3 s)
def test_a_shard_another_worker_landed_after_this_process_listed_is_read(s3_landing, dora_home):
    """Celery workers land shards in the same folders at once: a process that listed a folder
    must still open a shard another process landed afterwards. (With fsspec's listings cache,
    s3fs answered "file not found" for it from the older listing, and DuckDB failed the read of a
    shard its glob had just found.)"""
    import s3fs

    from ingestion.landing import write_shard
    from ingestion.landing_location import landing_root

    fs, bucket = s3_landing
    first = write_shard("audits", [{"audit_id": "a1", "event_at": None, "status": "started", "rows_generated": 0}], partition="a1")
    landing = landing_root().fs  # this process's filesystem, as every read and write uses it
    assert [p.rsplit("/", 1)[-1] for p in landing.ls(f"{bucket}/landing/audits/a1")] == [first.name]
    other = s3fs.S3FileSystem(skip_instance_cache=True)  # another worker's client
    late = f"{bucket}/landing/audits/a1/late.parquet"
    other.pipe_file(late, fs.cat_file(str(first).removeprefix("s3://")))
    assert landing.info(late)["size"] > 0  # not FileNotFoundError from the listing above
    assert len(read_landing("audits", filters={"audit_id": "a1"})) == 2


# ----------------------------------------------------------------------------- a worker lost mid-step
@pytest.fixture(scope="module")
def _sqlite_cluster_pair(tmp_path_factory):
    """Redis and two Celery workers on one home with the default SQLite instance, shared by the
    tests that kill a worker's process: Celery's prefork pool replaces a killed process, so the
    same workers serve the next test, and the pair (two ``dagster-celery`` and two ``celery``
    processes importing Dagster, then the pool's) starts once. Each test's run waits until
    every task it queued has ended, so none is left for the next. Yields the home, the broker
    URL and the workers' processes."""
    from tests.helpers.cluster import celery_workers, redis_server

    folder = tmp_path_factory.mktemp("sqlite_cluster")
    with redis_server(folder / "redis") as broker, celery_workers(folder / "home", broker, 2, OPENAI_API_KEY="sk-test") as workers:
        yield folder / "home", broker, workers


@pytest.fixture
def sqlite_cluster(_sqlite_cluster_pair):
    """The module's workers, both still up and answering (a test that failed may have left one
    down: fail here with the reason rather than wait in the next test)."""
    from tests.helpers.cluster import wait_for_workers

    _, broker, workers = _sqlite_cluster_pair
    wait_for_workers(broker, len(workers), workers)
    return _sqlite_cluster_pair


def _kill_the_sender(workers, client_port: int) -> int | None:
    """SIGKILL the process of a Celery worker's tree whose socket has local port ``client_port``
    (the sender of a request the stub server is answering right now); its pid, or None."""
    import psutil

    for worker in workers:
        try:
            for proc in psutil.Process(worker.pid).children(recursive=True):
                if any(c.laddr and c.laddr.port == client_port for c in proc.net_connections(kind="tcp")):
                    proc.kill()
                    return proc.pid
        except psutil.NoSuchProcess:  # a process of the tree ended while it was read
            continue
    return None


@pytest.mark.slow
@pytest.mark.scenario
def test_a_worker_killed_mid_block_fails_the_run_and_the_rerun_lands_every_key_once(tmp_path, sqlite_cluster):
    """SIGKILL to the Celery worker process running a T2T block, while the block's requests are in
    flight (after another block landed): the audit fails with one line, and the same command run
    again lands every key exactly once (the killed block redone, the landed ones kept)."""
    import threading
    import time

    from tests.helpers.dora_cli import dora_argv, dora_env, expected_t2t_keys, landed_t2t, prepare_dbt_manifest

    prepare_dbt_manifest()
    (home, broker, workers), audit_id, letters = sqlite_cluster, "killed-worker", "abcdef"
    args = (
        "audit",
        "--family",
        "biasdora",
        "--backend",
        "openai",
        "--model",
        "stub-model",
        "--prompt-style",
        "completion",
        "--per-dimension",
        "1",
        "--settings",
        "singular",
        "--letters",
        letters,
        "--runs",
        "2",
        "--judge-backend",
        "none",
        "--no-progress",
        "--t2t-block-templates",
        "3",
        "--api-concurrency",
        "1",
        "--audit-id",
        audit_id,
        "--executor",
        "celery",
    )
    shards = home / "landing" / "t2t_completions" / audit_id

    killed: list[int] = []
    one_kill = threading.Lock()  # the server answers both workers' requests at once, in two threads

    # 9 templates in 3 blocks: two run at once, the third starts once one of them has landed
    def reply(req):  # I/O-bound, as a remote model server: a block (36 requests) takes ~2 s
        # The kill comes from inside the server while it answers a request, once another block has
        # landed: the sender is then surely in a block step, waiting for this answer.
        with one_kill:
            if not killed and shards.exists() and any(p.name != "_schema.parquet" for p in shards.glob("*.parquet")):
                (client,) = [r["client"] for r in list(server.requests) if r["json"] is req]
                pid = _kill_the_sender(workers, client[1])
                if pid is not None:
                    killed.append(pid)
        time.sleep(0.05)
        return "rave, and"

    with OpenAIStubServer() as server:
        server.completion_reply = reply
        argv = dora_argv(*args, "--base-url", server.base_url, "--celery-broker", broker)
        env = dora_env(home, OPENAI_API_KEY="sk-test")
        with open(tmp_path / "first.log", "w") as log:
            first = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and first.poll() is None and not killed:
                time.sleep(0.1)
            assert killed, (tmp_path / "first.log").read_text()[-3000:]
            try:
                first.wait(timeout=600)
            except subprocess.TimeoutExpired:
                first.kill()
                first.wait()
                pytest.fail(
                    "the audit did not end after its worker process was killed:\n" + _run_report([(tmp_path / "first.log").read_text()], [home])
                )
        first_log = (tmp_path / "first.log").read_text()
        assert first.returncode != 0, first_log[-3000:]
        assert "Traceback" not in first_log, first_log[-3000:]
        errors = [line for line in first_log.splitlines() if line.startswith("dora audit: error:")]
        assert len(errors) == 1 and "t2t_block[" in errors[0] and "failed in its worker process (WorkerLostError" in errors[0]
        assert "redoes only what did not land" in errors[0], errors
        assert "note: Celery workers on the SQLite instance" in first_log  # this home's instance is SQLite
        before = len(landed_t2t(home, audit_id))
        again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    expected = expected_t2t_keys(["singular"], letters, 2, per_dimension=1)
    landed = landed_t2t(home, audit_id)
    assert 0 < before < len(expected)
    assert len(landed) == len(set(landed)) == len(expected) and set(landed) == expected  # nothing lost, nothing twice


# ----------------------------------------------------------------------------- the Celery loop
_RUN_ON_CELERY = """
import json, sys
import dagster as dg
from tests.helpers.celery_jobs import worker_lost_job
with dg.DagsterInstance.get() as instance:
    with dg.execute_job(dg.reconstructable(worker_lost_job), instance=instance, raise_on_error=False,
                        run_config={"execution": {"config": {"celery": {"broker": sys.argv[1], "backend": sys.argv[1]}}}}) as result:
        steps = {e.step_key: e.event_type_value for e in result.all_events
                 if e.is_step_success or e.is_step_failure or e.is_step_skipped}
        errors = [e.event_specific_data.error.to_string() for e in result.all_events
                  if e.is_run_failure and getattr(e.event_specific_data, "error", None) is not None]
        print(json.dumps({"success": result.success, "steps": steps, "errors": errors}))
"""


@pytest.mark.slow  # a Dagster run on the module's two Celery workers (~10 s)
@pytest.mark.scenario
def test_a_step_ready_after_a_lost_worker_still_runs_and_the_run_ends_failed(sqlite_cluster):
    """A Celery worker process dies mid-step while an independent step runs on the other
    worker: the step after the independent one runs when it is ready, the lost step's downstream
    does not, and the run ends failed naming the lost step (dagster-celery's own loop stops
    submitting at the loss, then waits for ever on the step that became ready:
    orchestration/celery_loop.py)."""
    import json
    import sys

    from tests.helpers.dora_cli import REPO, dora_env

    home, broker, _ = sqlite_cluster
    done = subprocess.run(
        [sys.executable, "-c", _RUN_ON_CELERY, broker], cwd=REPO, env=dora_env(home), capture_output=True, text=True, timeout=HANG_GUARD
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["success"] is False
    assert out["steps"]["slow"] == out["steps"]["after_slow"] == "STEP_SUCCESS"
    assert "dies" not in out["steps"] and "after_dies" not in out["steps"]  # lost, and never started
    assert any("WorkerLostError" in m and "[dies]" in m for m in out["errors"]), out["errors"]


# ------------------------------------------------------------------- a worker that never answers
_RUN_JOB = """
import json, sys, time
import dagster as dg
from orchestration.cli.audit import failure_lines
from tests.helpers import celery_jobs
job, run_config, log_dir = getattr(celery_jobs, sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
started = time.monotonic()
with dg.DagsterInstance.get() as instance:
    with dg.execute_job(dg.reconstructable(job), instance=instance, raise_on_error=False, run_config=run_config) as result:
        steps = {e.step_key: e.event_type_value for e in result.all_events
                 if e.is_step_success or e.is_step_failure or e.is_step_skipped}
        lines = [] if result.success else failure_lines(result, log_dir, log_dir + "/none.log")
        print(json.dumps({"success": result.success, "steps": steps, "lines": lines, "seconds": time.monotonic() - started}))
"""


def _run_job(home, job: str, run_config: dict, **env) -> tuple[dict, str]:
    """``job`` of tests/helpers/celery_jobs.py run in a new process on ``home``'s instance: the
    step outcomes, ``dora audit``'s failure lines and the seconds the run took; and its stderr."""
    import json
    import sys

    from tests.helpers.dora_cli import REPO, dora_env

    (home / "logs").mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", _RUN_JOB, job, json.dumps(run_config), str(home / "logs")],
        cwd=REPO,
        env=dora_env(home, **env),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,  # a guard against a hang: a loaded machine takes minutes to start a Dagster run
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.slow  # a Dagster run in a new process against a Redis without workers (~10 s)
def test_a_scheduled_celery_run_with_no_worker_fails_at_the_worker_timeout_with_one_line(tmp_path):
    """The daemon's runs (``$DORA_EXECUTOR=celery``) have no ``dora audit`` to wait for a
    worker before they start: the submission loop fails the run once no worker has answered for
    ``$DORA_CELERY_WORKER_TIMEOUT`` seconds, saying so first, and revokes the queued tasks."""
    from orchestration.cluster import celery_available
    from tests.helpers.cluster import init_instance, redis_server

    if not celery_available():
        pytest.skip("dagster-celery is not installed (pip install -e '.[cluster]')")
    home = tmp_path / "home"
    init_instance(home / "dagster")
    with redis_server(tmp_path / "redis") as broker, pytest.MonkeyPatch.context() as mp:
        mp.setenv("DORA_EXECUTOR", "celery")
        mp.setenv("DORA_CELERY_BROKER", broker)
        mp.setenv("DORA_CELERY_WORKER_TIMEOUT", "3")
        execution = scheduled_execution_config()  # what audit_run_request puts in a scheduled run's config
        assert execution["config"]["celery"]["worker_timeout"] == 3.0
        out, err = _run_job(home, "worker_lost_job", {"execution": execution})
    assert out["success"] is False and out["steps"] == {}  # no step ran, none is left waiting
    assert 3 <= out["seconds"] < 3 + 20, out["seconds"]  # the timeout, a check period, the run's start and end
    assert "Traceback" not in err
    assert f"dora: no Celery worker answers on {broker} while steps wait (dies, slow): waiting up to 3 s" in err, err
    assert out["lines"][0] == (
        f"dora audit: error: no Celery worker answered on {broker} within 3 s "
        "(--celery-worker-timeout) while steps waited: dies, slow; start a worker (`dagster-celery worker start -A "
        "dagster_celery.app -y <celery.yaml>`, docs/operations.md#running-on-a-cluster), then run the same command "
        "again: it redoes only what did not land"
    ), out["lines"]
    assert len(out["lines"]) == 2 and out["lines"][1].startswith("dora: audit failed (Dagster run ")


@pytest.mark.slow  # a third Celery worker started for it, and a Dagster run on the module's workers (~15 s)
@pytest.mark.scenario
def test_a_step_whose_whole_worker_is_killed_is_failed_as_lost_within_the_worker_timeout(sqlite_cluster):
    """A worker whose main process is killed (as a lost machine) never returns its task's result
    and nobody redelivers it: the loop sees its worker stop answering while the others answer,
    fails the step as lost once the worker timeout has passed, abandons its downstream, and the
    run ends failed with one line naming the worker (dagster-celery would wait for ever)."""
    import socket

    from tests.helpers.celery_jobs import DOOMED_QUEUE
    from tests.helpers.cluster import celery_workers

    home, broker, _ = sqlite_cluster
    with celery_workers(home, broker, 1, name="doomed", queue=DOOMED_QUEUE) as (doomed,):
        out, err = _run_job(home, "worker_gone_job", {"execution": execution_config("celery", broker, 4)})
        assert doomed.wait(timeout=HANG_GUARD) is not None  # the step killed its whole worker
    assert out["success"] is False and out["steps"] == {}  # the lost step has no end event; after_gone never ran
    # the run's own time, from its start (not the process's imports, which a loaded machine stretches)
    assert out["seconds"] < 4 + 20, out["seconds"]
    assert "Traceback" not in err
    (line,) = [ln for ln in out["lines"] if ln.startswith("dora audit: error:")]
    assert line.startswith(
        "dora audit: error: step kills_its_worker failed in its worker process (CeleryWorkerError: its Celery worker "
        f"doomed0@{socket.gethostname()} has not answered within 4 s (--celery-worker-timeout): killed, or its machine "
        "lost); the same command again redoes only what did not land; full trace: "
    ), line
