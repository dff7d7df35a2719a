"""Append a benchmark's figures to BENCHMARKS.md (one section per benchmark, replaced on re-run)."""

from __future__ import annotations

import platform
import re
from datetime import datetime, timezone
from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parents[1] / "BENCHMARKS.md"


def write_section(name: str, body: str) -> None:
    """Replace (or add) the section ``## <name>`` of BENCHMARKS.md with ``body``."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{platform.machine()}, {__import__('os').cpu_count()} cores, Python {platform.python_version()}"
    section = f"## {name}\n\n_measured {stamp} on {machine}_\n\n{body.strip()}\n"
    text = (
        BENCHMARKS_MD.read_text()
        if BENCHMARKS_MD.exists()
        else "# dora benchmarks\n\nFigures printed by the scripts in `benchmarks/`; each run replaces its section.\n"
    )
    pattern = re.compile(rf"^## {re.escape(name)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(section + "\n", text) if pattern.search(text) else text.rstrip() + "\n\n" + section
    BENCHMARKS_MD.write_text(text)
