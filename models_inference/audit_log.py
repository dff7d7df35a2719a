"""The audit log's writer side: who an audit is and the events it lands (docs/operations.md).

Every probe run lands ``landing/audits`` events (schema: ``ingestion/contracts/shared.py``):
``started`` before its first model call, then ``finished`` or ``failed``
(:func:`models_inference.resumable.land_resumable`). This module holds what those events carry
(:class:`AuditInfo`, with the probe family that ran it), the recipe of readable audit ids
(:func:`readable_audit_id`), the events landed so far (:func:`audit_events`), the refusal to mix
two identities in one audit (:func:`check_audit_identity`) and an audit's attribution to a
registry target (:func:`record_audit_target`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Mapping, Sequence

from ingestion.errors import AuditIdentityError
from ingestion.landing import read_landing, write_shard

#: Version of the probe code, stored on every audit event (``landing/audits.code_version``).
CODE_VERSION = "0.1.0"


@dataclass(frozen=True)
class AuditInfo:
    """What every ``landing/audits`` event of one probe run carries.

    Attributes:
        audit_id: the audit; also the landing partition (sub-folder) of every shard of the run.
        model_id, model_version: the probed model.
        modality: the probe that lands the rows: BiasDora's ``t2t``, ``t2i`` or ``i2t``, or
            another family's probe (``counterfactual``, ``modscan_text``, ``modscan_language``,
            ``modscan_vision``, ``vlstereoset``).
        config: the run's parameters (JSON-serialisable; other values are stored as ``str``).
            Stored as sorted-key JSON in ``config_json``; ``config_hash`` is the first 16 hex
            digits of its sha256.
        target: the audit registry target (``ingestion/registry.py``); ``None`` if ad hoc.
        family: the probe family that runs the probe (the ``FAMILY`` of its landing contract,
            ``ingestion/contracts/<family>.py``), so the audit log names it instead of dbt
            mapping it back from ``modality``. ``None`` only for callers of older code: dbt then
            falls back to that mapping (``dbt_project/macros/audit_family.sql``).
    """

    audit_id: str
    model_id: str
    model_version: str
    modality: str
    config: Mapping = field(default_factory=dict)
    target: str | None = None
    family: str | None = None

    def event(self, status: str, rows_generated: int) -> dict:
        """One ``landing/audits`` row: ``status`` is started / finished / failed, stamped now (UTC)."""
        cfg = json.dumps(self.config, sort_keys=True, default=str)
        return {
            "audit_id": self.audit_id,
            "model_id": self.model_id,
            "model_version": self.model_version,
            "modality": self.modality,
            "config_json": cfg,
            "config_hash": hashlib.sha256(cfg.encode()).hexdigest()[:16],
            "code_version": CODE_VERSION,
            "status": status,
            "rows_generated": rows_generated,
            "event_at": datetime.now(timezone.utc),
            "target": self.target,
            "family": self.family,
        }

    def land_event(self, status: str, rows_generated: int) -> None:
        """Land :meth:`event` as its own shard in the audit's partition of ``landing/audits``."""
        write_shard("audits", [self.event(status, rows_generated)], partition=self.audit_id)


def slug(text: str, limit: int = 40) -> str:
    """Lower-case ``[a-z0-9._-]`` form of a model name for readable audit ids (``model`` if empty)."""
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text.lower()).strip("-")[:limit] or "model"


def readable_audit_id(kind: str, names: Sequence[tuple[str, int]], payload: Mapping | str) -> str:
    """The one recipe of dora's deterministic audit ids: ``<kind>-<name>-...-<hash8>``.

    Args:
        kind: the probe's prefix (``t2t``, ``modscan-text``, ``cfsets``, ``vlstereoset-clip``...).
        names: readable parts (model, version...), each as ``(text, limit)``: slugged with
            :func:`slug` and cut to ``limit`` characters.
        payload: everything that changes the audit's rows (JSON, keys sorted), or an already
            computed hex digest; its SHA-256 decides the id, so the same identity always resumes
            the same audit and two identities never share one.

    Returns:
        The id, e.g. ``modscan-text-smollm2-135m-instruct.q4_1.gguf-sha256-3f2a-1a2b3c4d``.
    """
    if isinstance(payload, str):
        digest = payload
    else:
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    return "-".join([kind, *(slug(text, limit) for text, limit in names), digest[:8]])


def audit_events(audit_id: str) -> list[dict]:
    """Every landed ``landing/audits`` event of ``audit_id``, oldest first."""
    rows = read_landing("audits", filters={"audit_id": audit_id}).to_pylist()
    return sorted(rows, key=lambda r: (r["event_at"] is None, r["event_at"]))


def check_audit_identity(audit: AuditInfo, identity: Mapping | None) -> None:
    """Refuse to add rows to an existing audit of another identity.

    The identity of an audit is everything that changes its rows: model id, full model
    version, modality and ``identity`` (backend, generation config, selection; stored as
    ``config["identity"]`` on every event). Events of older code without an ``identity``
    are compared on model id / version / modality only.

    Raises:
        AuditIdentityError: ``audit.audit_id`` names an audit whose events say otherwise.
    """
    for event in audit_events(audit.audit_id):
        theirs = {"model_id": event["model_id"], "model_version": event["model_version"], "modality": event["modality"]}
        ours = {"model_id": audit.model_id, "model_version": audit.model_version, "modality": audit.modality}
        try:
            stored = json.loads(event["config_json"] or "{}").get("identity")
        except ValueError:
            stored = None
        if isinstance(stored, dict) and identity is not None:
            mine = json.loads(json.dumps(dict(identity), default=str))
            for k in sorted(set(stored) | set(mine)):
                if k not in ("model", "version"):  # = model_id / model_version, compared above
                    theirs[k], ours[k] = stored.get(k), mine.get(k)
        diff = [k for k in ours if theirs.get(k) != ours[k]]
        if diff:
            detail = ", ".join(f"{k}: {_short(theirs.get(k))} vs {_short(ours[k])}" for k in diff)
            raise AuditIdentityError(
                f"audit {audit.audit_id!r} already exists with another identity ({detail}); its rows would "
                "be mixed with this run's. Drop --audit-id (the default id is derived from the identity) or "
                "name a new audit id"
            )
        return  # one event is enough: every event of an audit carries the same identity


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def record_audit_target(audit_id: str, target: str, model_id: str, model_version: str, modality: str) -> bool:
    """Land one ``landing/audits`` event attributing ``audit_id`` to a registry target.

    The event copies the audit's latest event (status, config, rows) with ``target`` and the
    model id, model version and modality its associations carry (``int_document_words``:
    objective descriptions -> the image model, ``t2i``; subjective -> the describer, ``i2t``).
    ``dim_audits`` takes the latest event's fields, so the audit joins its target's history.

    Returns:
        True if an event landed; False when the latest event already says so, or the audit
        has no event (nothing was generated).
    """
    events = read_landing("audits", filters={"audit_id": audit_id}).to_pylist()
    if not events:
        return False
    latest = max(events, key=lambda e: e["event_at"])
    tag = {"target": target, "model_id": model_id, "model_version": model_version, "modality": modality}
    if all(latest[k] == v for k, v in tag.items()):
        return False
    write_shard("audits", [{**latest, **tag, "event_at": datetime.now(timezone.utc)}], partition=audit_id)
    return True
