"""Importing the Dagster definitions has no side effect on the environment or on $DORA_HOME,
and the dbt executable is found next to the interpreter whatever PATH says."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import os, sys
before = dict(os.environ)
import orchestration.definitions as d
changed = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}
assert not changed, f"importing the definitions changed environment variables: {sorted(changed)}"
print(d.defs.resources["dbt"].dbt_executable)
"""


@pytest.mark.slow
def test_importing_the_definitions_sets_no_env_and_creates_no_folder(tmp_path):
    home = tmp_path / "not-created"
    venv_bin = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != venv_bin.resolve())
    env.update(DORA_HOME=str(home), DAGSTER_HOME=str(home / "dagster"))
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == str(venv_bin / "dbt")  # not "dbt" from PATH
    assert not home.exists()
    assert not (tmp_path / "data").exists()


def test_dbt_executable_prefers_the_interpreters_folder(tmp_path, monkeypatch):
    from orchestration.instance import dbt_executable

    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python").write_text("")
    monkeypatch.setattr(sys, "executable", str(fake_bin / "python"))
    monkeypatch.setenv("PATH", "")
    assert dbt_executable() == "dbt"  # nothing beside, nothing on PATH: dagster-dbt's own message follows
    dbt = fake_bin / "dbt"
    dbt.write_text("#!/bin/sh\n")
    dbt.chmod(0o755)
    assert dbt_executable() == str(dbt)
