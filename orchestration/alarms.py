"""Alarms that reach people: a drift check's collapse or significant change, POSTed once to the
webhook a registry target names (``notify: {webhook: URL}``).

Each alarm (``analytics.drift.DriftResult`` in state ``change`` or ``collapse``) is one JSON
POST: target, family, modality, the versions and audits before and after, the check, its
figures and a one-line ``text`` that chat webhooks (Slack, Mattermost, Teams' incoming
webhooks) display. Delivery:

* **once**: a ledger file per alarm in ``$DORA_HOME/state/alarms/`` (its key: target, family,
  modality, audit, check and state) is claimed with an exclusive create before the POST, so two
  processes judging the same audit (the asset check of a Dagster run and ``dora audit``) never
  both send it, and a re-run finds it sent;
* **retried**: urllib3's ``Retry`` with exponential backoff on connection errors, 429 and 5xx
  (three retries, 0.5 s, 1 s, 2 s), each attempt with a 5 s timeout;
* **never in the way**: a delivery that still fails is logged as a warning, its claim released
  so the next evaluation tries again, and nothing is raised: the audit itself never fails or
  waits longer than the retries.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from ingestion.home import dora_home

log = logging.getLogger(__name__)

#: a claim older than this belongs to a process that died mid-POST: the alarm may be claimed again
STALE_CLAIM_SECONDS = 600
#: one attempt's connect / read timeout (seconds)
POST_TIMEOUT_SECONDS = 5.0


def alarm_folder() -> Path:
    """``$DORA_HOME/state/alarms`` (created)."""
    folder = dora_home() / "state" / "alarms"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def alarm_key(result) -> str:
    """The alarm's identity: the same check of the same audit in the same state is one alarm."""
    parts = (result.target, result.family, result.modality or "", result.audit_id, result.check, result.state)
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:32]


def _claim(path: Path) -> bool:
    """Create ``path`` exclusively (True), or take over a stale claim that was never marked sent."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        if entry.get("sent_at") or time.time() - entry.get("claimed_at", 0) < STALE_CLAIM_SECONDS:
            return False
        path.write_text(json.dumps({"claimed_at": time.time()}), encoding="utf-8")
        return True
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"claimed_at": time.time()}, f)
    return True


def _session():
    """A ``requests`` session retrying POSTs with backoff on connection errors, 429 and 5xx."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    retry = Retry(
        total=3,
        backoff_factor=0.5,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=frozenset({"POST"}),
        raise_on_status=False,
    )
    session = requests.Session()
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def post_alarm(url: str, payload: Mapping) -> str | None:
    """POST ``payload`` as JSON to ``url`` with retries; ``None`` when delivered (2xx), else why not (one line)."""
    import requests

    try:
        with _session() as session:
            response = session.post(url, json=dict(payload), timeout=POST_TIMEOUT_SECONDS)
    except requests.RequestException as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    if 200 <= response.status_code < 300:
        return None
    return f"HTTP {response.status_code}"


def deliver_alarms(results: Iterable, webhooks: Mapping[str, str]) -> list[str]:
    """POST every alarm of ``results`` whose target has a webhook, once each.

    Args:
        results: ``analytics.drift.DriftResult`` rows; those not alarms are skipped.
        webhooks: target name -> webhook URL (the registry's ``notify.webhook``).

    Returns:
        One line per delivery that failed after its retries (the alarm is tried again by the
        next evaluation); never raises.
    """
    failures = []
    for result in results:
        url = webhooks.get(result.target)
        if not url or not result.is_alarm:
            continue
        path = alarm_folder() / f"{alarm_key(result)}.json"
        try:
            if not _claim(path):
                continue
        except OSError as exc:
            failures.append(f"alarm ledger {path}: {exc}")
            continue
        problem = post_alarm(url, result.as_json())
        if problem is None:
            path.write_text(json.dumps({"sent_at": time.time(), "url_host": url.split("/")[2] if "//" in url else url, **result.as_json()}))
        else:
            path.unlink(missing_ok=True)  # not delivered: the next evaluation sends it again
            line = f"webhook for target {result.target!r}: alarm not delivered ({problem}): {result.text}"
            log.warning(line)
            failures.append(line)
    return failures


def registry_webhooks(registry) -> dict[str, str]:
    """{target name: webhook URL} of a parsed registry (targets without ``notify`` left out)."""
    out = {}
    for target in getattr(registry, "targets", ()):
        notify = getattr(target, "notify", None)
        if notify is not None and notify.webhook:
            out[target.name] = str(notify.webhook)
    return out
