"""Rewrite the flag tables of docs/cli.md from the `dora` argument parser, and the family tables
of README.md and docs/families/README.md from the family records.

    python scripts/cli_reference.py           # rewrite the pages in place
    python scripts/cli_reference.py --check   # exit 1 (and name the tables) when one is not current

The flag tables sit between `<!-- flags: <command> / <group> (...) -->` and `<!-- /flags -->`
markers (orchestration/cli/reference.py), the family tables between `<!-- families: <name> (...) -->`
and `<!-- /families -->` (orchestration/cli/family_tables.py); the prose around them is written by hand.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestration.cli.family_tables import stale_pages, write_pages  # noqa: E402
from orchestration.cli.reference import CLI_PAGE, flag_tables, missing_tables, update_document  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when a page is not current")
    args = parser.parse_args()
    tables = flag_tables()
    text = CLI_PAGE.read_text(encoding="utf-8")
    new = update_document(text, tables)
    missing = missing_tables(new, tables)
    if args.check:
        stale = new != text
        if stale or missing:
            print(
                f"docs/cli.md: {'flag tables out of date' if stale else ''}"
                f"{'; ' if stale and missing else ''}{'no marker for: ' + ', '.join(missing) if missing else ''}; "
                "run python scripts/cli_reference.py",
                file=sys.stderr,
            )
        pages = stale_pages()
        for page in pages:
            print(f"{page.relative_to(ROOT)}: family tables out of date or missing; run python scripts/cli_reference.py", file=sys.stderr)
        return 1 if stale or missing or pages else 0
    CLI_PAGE.write_text(new, encoding="utf-8")
    for page in write_pages():
        print(f"{page.relative_to(ROOT)}: family tables written")
    if missing:
        print("docs/cli.md: add a marker for: " + ", ".join(missing), file=sys.stderr)
        return 1
    print(f"docs/cli.md: {len(tables)} flag tables written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
