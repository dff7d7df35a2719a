"""The drift check state as a version page shows it (``analytics/version_report.py``): per
family and modality of a target's latest audit, the worst state of its checks (``ok``,
``change``, ``collapse``, ``not comparable``; ``first audit``), as ``dora models list`` gives it,
and one line per check that is not ok (:attr:`analytics.drift.DriftResult.text`). The results
come from :func:`analytics.drift.evaluate_drift`; this module only draws them."""

from __future__ import annotations

import html
from collections.abc import Sequence

from analytics.drift import DriftResult, worst_state

__all__ = ["drift_html", "other_families_html"]


def drift_html(results: Sequence[DriftResult] | None) -> str:
    """A family's drift check state on a version page, as ``dora models list`` gives it: per
    modality of its latest audit, the worst state (``ok`` / ``change`` / ``collapse`` / ``not
    comparable``; ``first audit`` without a previous one) and one row per check that is not ok
    (``DriftResult.text``). ``""`` when ``results`` is None (the drift was not judged)."""
    if results is None:
        return ""
    if not results:
        return "<p class='drift' data-state='first audit'>Drift checks: first audit (nothing to compare yet).</p>"
    parts = []
    for modality in dict.fromkeys(r.modality for r in results):
        mine = [r for r in results if r.modality == modality]
        state = worst_state([r.state for r in mine])
        flagged = [r for r in mine if r.state != "ok"]
        items = "".join(f"<li data-check='{html.escape(r.check)}' data-state='{html.escape(r.state)}'>{html.escape(r.text)}</li>" for r in flagged)
        parts.append(
            f"<p class='drift' data-modality='{html.escape(modality)}' data-state='{html.escape(state)}'>Drift checks "
            f"({html.escape(modality)}, version {html.escape(str(mine[0].previous_model_version))} -&gt; "
            f"{html.escape(str(mine[0].model_version))}): <strong>{html.escape(state)}</strong>"
            + (f" ({html.escape(', '.join(dict.fromkeys(r.check for r in flagged if r.state == state)))})" if flagged else "")
            + "</p>"
            + (f"<ul class='drift'>{items}</ul>" if items else "")
        )
    return "".join(parts)


def other_families_html(target: str, family: str, drift: Sequence[DriftResult] | None) -> str:
    """One ``<section data-family=...>`` per other family with drift results for ``target``: its
    drift check state (its own numbers are on its own report page)."""
    if drift is None:
        return ""
    others = dict.fromkeys(r.family for r in drift if r.target == target and r.family != family)
    return "".join(
        f"<section class='family' data-family='{html.escape(name)}'><h2>{html.escape(name)}</h2>"
        + drift_html([r for r in drift if r.target == target and r.family == name])
        + "</section>"
        for name in others
    )
