"""The dbt resource of dora's dbt assets (orchestration/defs/dbt/resources.py): dagster-dbt's,
without the `dbt --version` subprocess and the in-process adapter it does not need."""

from dagster_dbt import DbtCliResource
from packaging import version

from orchestration.defs.dbt.resources import DoraDbtCliResource, dbt_resource
from orchestration.instance import DBT_PROJECT_DIR


def test_the_version_is_the_installed_dbt_cores_and_what_dbt_version_prints():
    resource = dbt_resource()
    assert isinstance(resource, DoraDbtCliResource) and isinstance(resource, DbtCliResource)
    # dagster-dbt's own way: `dbt --version`, parsed
    assert resource._cli_version == DbtCliResource._cli_version.func(resource)
    assert resource._initialize_dbt_core_adapter(["build"]) is None  # no row counts or column metadata asked


def test_another_dbt_executable_is_still_asked_its_version(tmp_path):
    fake = tmp_path / "dbt"
    fake.write_text("#!/bin/sh\necho 'Core:'\necho '  - installed: 2.0.0-beta'\n")
    fake.chmod(0o755)
    resource = DoraDbtCliResource(project_dir=str(DBT_PROJECT_DIR), profiles_dir=str(DBT_PROJECT_DIR), dbt_executable=str(fake))
    assert resource._cli_version == version.parse("2.0.0")


def test_a_model_moved_to_another_layer_makes_the_manifest_stale(tmp_path, monkeypatch):
    """`mv` keeps a file's time; its folders' times change, and the folder is the model's layer."""
    import os
    from types import SimpleNamespace

    from orchestration.defs.dbt import resources

    project = tmp_path / "dbt_project"
    for folder in ("models/staging/fam", "models/marts/fam", "tests", "macros"):
        (project / folder).mkdir(parents=True)
    for name in ("dbt_project.yml", "profiles.yml", "models/staging/fam/m.sql"):
        (project / name).write_text("x")
    manifest = tmp_path / "target" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text("{}")
    past = manifest.stat().st_mtime - 60
    for p in [*project.rglob("*"), project]:
        os.utime(p, (past, past))
    monkeypatch.setattr(resources, "DBT_PROJECT_DIR", project)
    fake = SimpleNamespace(manifest_path=manifest)
    assert not resources._manifest_is_stale(fake)
    (project / "models/staging/fam/m.sql").rename(project / "models/marts/fam/m.sql")
    assert os.stat(project / "models/marts/fam/m.sql").st_mtime == past  # the file's own time is unchanged
    assert resources._manifest_is_stale(fake)
