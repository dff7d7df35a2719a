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
