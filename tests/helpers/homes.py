"""The session's finished audit: one real Dagster run of the audit job (every asset, every probe
family, small samples, the real SmolLM2) into a scratch DORA_HOME, built once per test session
(once per pytest-xdist worker) by the ``finished_audit`` fixture in tests/conftest.py.

Tests that only read an audit's results share it: the run's materialisations, check outcomes
and metadata are kept here (``FinishedAudit``), its landing and warehouse stay in ``home``.
A test that must change the home (a rerun, another audit, a report written into it) takes a
copy (``copy_home``). ``tree_digest`` is checked again when the session ends, so a test that
writes into the shared home fails the session instead of silently leaking into the next test.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: The audit job's T2T sample: 9 dimensions x 2 settings x 2 letters x 2 runs = 72 rows.
T2T_CONFIG = {"per_dimension": 1, "settings": ["singular", "noun"], "letters": "bm", "runs": 2, "progress": False}
#: ModSCAN's smallest text sample: persona 1 trait x 2 attributes x 2 conditions + faces
#: 3 scenarios x 1 instance x 2 attributes = 10 rows.
MODSCAN_CONFIG = {"instances_per_scenario": 1, "runs": 1, "progress": False}
#: Counterfactual text sets on SmolLM2: race_gender x nurse, 2 prompts (12 members x 2 = 24
#: responses, 12 of them numeric); the same config for each of the family's three ops.
COUNTERFACTUAL_CONFIG = {
    "occupations": ["nurse"],
    "prompts": ["Characteristics", "Hiring"],
    "runs": 1,
    "max_new_tokens": 12,
    "numeric_max_new_tokens": 4,
    "progress": False,
}
COUNTERFACTUAL_OPS = ("counterfactual_responses", "counterfactual_toxicity", "counterfactual_stereotype_filter")
#: dbt arguments that leave out dbt's unit tests, as an audit's builds do. The one full build
#: of tests/test_associations_sql.py runs all of them (~0.1 s of CPU each); every other build in
#: the suite adds these.
NO_UNIT_TESTS = ("--exclude-resource-type", "unit_test")
#: The other families run their `dora audit` defaults (a quick sample each).
RUN_CONFIG = {
    "ops": {
        "t2t_completions": {"config": T2T_CONFIG},
        "modscan_responses": {"config": MODSCAN_CONFIG},
        **{op: {"config": COUNTERFACTUAL_CONFIG} for op in COUNTERFACTUAL_OPS},
    }
}


@dataclass(frozen=True)
class FinishedAudit:
    """What one run of the audit job left: its home and what its events said."""

    home: Path
    run_config: dict
    #: asset key path -> materialisation metadata (raw values)
    metadata: dict[tuple, dict] = field(repr=False)
    #: one (asset key path, check name, passed) per check evaluation of the run
    checks: tuple[tuple, ...] = field(repr=False)
    digest: dict[str, tuple] = field(repr=False)
    #: the run's partition key (``adhoc:<model>@<version>``), id and tags (as stored after the run)
    partition: str | None = None
    run_id: str = ""
    run_tags: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def materialised(self) -> set[tuple]:
        return set(self.metadata)

    def env(self, monkeypatch: pytest.MonkeyPatch, home: Path | None = None) -> Path:
        """Point DORA_HOME / DAGSTER_HOME at the shared home (read-only use) or at a copy of it."""
        home = home or self.home
        monkeypatch.setenv("DORA_HOME", str(home))
        monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
        return home


def tree_digest(root: Path) -> dict[str, tuple]:
    """(size, mtime_ns) of every file under ``root``: what a read-only test must leave as it was."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            st = path.stat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def build_finished_audit(root: Path) -> FinishedAudit:
    """Run the audit job once into ``root / 'home'``, as ``dora audit`` does: into the Dagster
    instance of ``$DAGSTER_HOME`` (so ``dora ui`` on the home shows the run), as a partition of
    the audited model (``adhoc:<model>@<version>``) with the run tags of an ad-hoc audit
    (:func:`orchestration.defs.audits.runs.adhoc_run`, the code path of ``dora audit``)."""
    from orchestration import families as fam
    from orchestration.definitions import AUDIT_JOB, defs
    from orchestration.defs.audits.runs import adhoc_run
    from orchestration.defs.biasdora.config import AuditConfig
    from orchestration.instance import configure_instance, open_instance, write_dagster_yaml

    home = root / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DORA_HOME", str(home))
        mp.setenv("DAGSTER_HOME", str(home / "dagster"))
        write_dagster_yaml(home / "dagster")
        job = defs.resolve_job_def(AUDIT_JOB)
        t2t = AuditConfig(**T2T_CONFIG)
        with open_instance() as instance:
            configure_instance(instance)
            partition, tags = adhoc_run(instance, t2t.model, t2t.backend, [f.name for f in fam.FAMILIES])
            result = job.execute_in_process(run_config=RUN_CONFIG, instance=instance, partition_key=partition, tags=tags)
            run_tags = dict(instance.get_run_by_id(result.run_id).tags)
        assert result.success, "the session's finished audit failed (see the log above)"
        metadata = {
            tuple(e.materialization.asset_key.path): {k: v.value for k, v in e.materialization.metadata.items()}
            for e in result.get_asset_materialization_events()
        }
        checks = tuple(
            (tuple(e.event_specific_data.asset_key.path), e.event_specific_data.check_name, e.event_specific_data.passed)
            for e in result.all_events
            if e.event_type_value == "ASSET_CHECK_EVALUATION"
        )
    return FinishedAudit(
        home=home,
        run_config=RUN_CONFIG,
        metadata=metadata,
        checks=checks,
        digest=tree_digest(home),
        partition=partition,
        run_id=result.run_id,
        run_tags=run_tags,
    )


def _run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder of this test run that every pytest-xdist worker shares (the parent
    of each worker's own); without xdist, the session's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_finished_audit(tmp_path_factory: pytest.TempPathFactory) -> FinishedAudit:
    """The finished audit of this test run, built once however many pytest-xdist workers ask.

    The first worker to ask builds it under a file lock in the run's shared temporary folder
    (the parent of every worker's own) and leaves a pickle of the record beside it; the others
    wait on the lock, then load the record and read the same home. Without xdist the folder is
    the session's own.
    """
    import pickle

    from filelock import FileLock

    root = _run_root(tmp_path_factory)
    record = root / "finished_audit.pickle"
    with FileLock(str(root / "finished_audit.lock")):
        if record.exists():
            return pickle.loads(record.read_bytes())
        folder = root / "finished_audit"
        folder.mkdir(exist_ok=True)
        audit = build_finished_audit(folder)
        record.write_bytes(pickle.dumps(audit))
        return audit


def copy_home(audit: FinishedAudit, dest: Path) -> Path:
    """A private copy of the finished audit's home (timestamps kept), for a test that changes it."""
    shutil.copytree(audit.home, dest, symlinks=True)
    return dest


def shared_build(tmp_path_factory: pytest.TempPathFactory, name: str, build) -> Path:
    """A folder built once per test run by ``build(folder)``, however many pytest-xdist workers
    ask (the first builds it under a file lock in the run's shared temporary folder, as
    :func:`shared_finished_audit`); tests read it, or copy it (``shutil.copytree``) to change it."""
    from filelock import FileLock

    root = _run_root(tmp_path_factory)
    folder, done = root / name, root / f"{name}.built"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


def build_empty_warehouses(folder: Path) -> None:
    """Two warehouses built by dbt from an empty landing zone (only the ``_schema.parquet``
    shards): ``without_scores`` (``dbt build --exclude tag:scores``: the score marts are
    missing, as after an audit that never scored) and ``full`` (the same home after ``dbt
    build --select tag:scores``: every model exists and is empty)."""
    from analytics.dbt_runner import invoke_dbt
    from ingestion.contracts import SCHEMAS
    from ingestion.landing import landing_dir

    partial, full = folder / "without_scores", folder / "full"
    with pytest.MonkeyPatch.context() as mp:  # invoke_dbt sets DORA_HOME; the context restores it
        mp.setenv("DORA_HOME", str(partial))
        for table in SCHEMAS:
            landing_dir(table)
        invoke_dbt(["build", "--exclude", "tag:scores", *NO_UNIT_TESTS], partial)
        shutil.copytree(partial, full, symlinks=True)
        mp.setenv("DORA_HOME", str(full))
        invoke_dbt(["build", "--select", "tag:scores", *NO_UNIT_TESTS], full)
