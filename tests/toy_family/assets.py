"""The toy family's one asset: ``landing/toy_rows``, landed through the resumable loop."""

from datetime import datetime, timezone

import dagster as dg

from models_inference.audit_log import AuditInfo
from models_inference.resumable import ResumableTable, land_resumable
from tests.toy_family.config import ToyConfig
from tests.toy_family.contract import FAMILY

TABLE = "toy_rows"  # its schema: tests/toy_family/contract.py


def toy_audit_id(config: ToyConfig) -> str:
    return f"toy-{config.model}-{config.word}"


@dg.multi_asset(name=TABLE, specs=[dg.AssetSpec(["landing", TABLE], group_name="toy", description="The toy family's landed rows (a test fixture).")])
def toy_rows(context: dg.AssetExecutionContext, config: ToyConfig):
    if not config.enabled:
        return dg.MaterializeResult(metadata={"status": "skipped"})
    audit = AuditInfo(toy_audit_id(config), config.model, "v1", "toy", {"rows": config.rows}, family=FAMILY)

    def generate(items, advance):
        advance(len(items))
        now = datetime.now(timezone.utc)
        return [
            {
                "audit_id": audit.audit_id,
                "model_id": config.model,
                "model_version": "v1",
                "item": i,
                "word": config.word,
                "status": "ok",
                "landed_at": now,
            }
            for i in items
        ]

    summary = land_resumable(
        range(config.rows),
        lambda i: (i,),
        generate,
        table=ResumableTable(TABLE, ("item",), "status"),
        audit=audit,
        shard_rows=10,
        progress=config.progress,
        max_error_share=config.max_error_share,
    )
    return dg.MaterializeResult(metadata={"audit_id": summary.audit_id, "rows_generated": summary.generated})


toy_assets = [toy_rows]
