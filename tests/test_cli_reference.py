"""docs/cli.md's flag tables are what the parser says (orchestration/cli/reference.py)."""

from __future__ import annotations

import argparse

from orchestration.cli.reference import CLI_PAGE, flag_tables, missing_tables, update_document


def test_docs_cli_flag_tables_are_current():
    tables = flag_tables()
    text = CLI_PAGE.read_text(encoding="utf-8")
    assert missing_tables(text, tables) == [], "add a marker to docs/cli.md for these tables"
    assert update_document(text, tables) == text, "docs/cli.md is out of date: run python scripts/cli_reference.py"


def test_every_family_flag_is_in_the_page():
    """Every flag `dora audit --help-family NAME` shows is a row of docs/cli.md (the hand-written
    page once missed eleven)."""
    from orchestration.cli.parser import add_audit_arguments
    from orchestration.families import FAMILIES

    text = CLI_PAGE.read_text(encoding="utf-8")
    for family in FAMILIES:
        parser = argparse.ArgumentParser()
        add_audit_arguments(parser, shown=family.name)
        flags = [
            a.option_strings[0]
            for a in parser._actions
            if a.option_strings and a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)
        ]
        assert flags and all(f"| `{f}`" in text for f in flags), [f for f in flags if f"| `{f}`" not in text]


def test_a_new_flag_changes_the_page():
    tables = flag_tables()
    text = CLI_PAGE.read_text(encoding="utf-8")
    changed = dict(tables, **{"audit / common": tables["audit / common"] + "| `--new-flag` | none | new |\n"})
    assert "`--new-flag`" in update_document(text, changed) and "`--new-flag`" not in text


def test_family_tables_are_current():
    """The family tables of README.md and docs/families/README.md are what the family records say
    (orchestration/cli/family_tables.py), a row per family of FAMILIES with a link to its page."""
    from orchestration.cli.family_tables import FAMILY_PAGES, family_tables, stale_pages
    from orchestration.families import FAMILIES

    assert stale_pages() == [], "a family table is out of date: run python scripts/cli_reference.py"
    for page in FAMILY_PAGES:
        text = page.read_text(encoding="utf-8")
        for family in FAMILIES:
            assert f"| `{family.name}` | {family.paper} |" in text, (page, family.name)
    readme, index = (family_tables(page) for page in FAMILY_PAGES)
    assert "[biasdora](docs/families/biasdora.md)" in readme["overview"] and "[biasdora.md](biasdora.md)" in index["index"]


def test_a_new_family_changes_the_tables():
    """A family record added to the list gets its row, linked to its own page, with no hand edit."""
    import dataclasses

    from orchestration.cli.family_tables import FAMILY_PAGES, family_tables, stale_pages, update_page
    from orchestration.families import FAMILIES

    page = FAMILY_PAGES[0]
    extra = dataclasses.replace(FAMILIES[-1], name="newfam", paper="New (seed 999)", docs_page=page.parent / "plugins" / "newfam.md")
    families = (*FAMILIES, extra)
    new = update_page(page.read_text(encoding="utf-8"), family_tables(page, families))
    assert "| `newfam` | New (seed 999) |" in new and new.count("[newfam](plugins/newfam.md)") == 1
    assert stale_pages(families) == list(FAMILY_PAGES)
