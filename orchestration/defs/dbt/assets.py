"""dbt models as Dagster assets; dbt tests become asset checks (dagster-dbt)."""


from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, dbt_assets

from orchestration.defs.dbt.resources import dbt_env, dbt_project


class DoraDbtTranslator(DagsterDbtTranslator):
    """Groups dbt assets by their folder (staging / intermediate / marts); sources keep the
    default ``[source, table]`` keys, i.e. ``landing/<table>``, the Python assets' keys."""

    def get_asset_spec(self, manifest: Mapping[str, Any], unique_id: str, project) -> dg.AssetSpec:
        spec = super().get_asset_spec(manifest, unique_id, project)
        node = manifest.get("nodes", {}).get(unique_id) or {}
        fqn = node.get("fqn") or []
        if node.get("resource_type") in ("model", "seed", "snapshot") and len(fqn) > 2:
            spec = spec.replace_attributes(group_name=fqn[1])
        return spec


TRANSLATOR = DoraDbtTranslator(settings=DagsterDbtTranslatorSettings(enable_asset_checks=True))


@dbt_assets(manifest=dbt_project().manifest_path, project=dbt_project(), dagster_dbt_translator=TRANSLATOR, pool="duckdb_writer", exclude="tag:scores")  # score marts: orchestration/defs/scoring/
def dora_dbt_models(context: dg.AssetExecutionContext, dbt: DbtCliResource):
    """``dbt build`` of the selected models: runs models, then their tests as asset checks."""
    dbt_env()
    yield from dbt.cli(["build"], context=context).stream()
