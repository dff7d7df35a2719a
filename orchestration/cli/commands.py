"""The ``dora`` commands other than ``audit``: ``query``, ``tables``, ``reparse``, ``ui``, ``models``, ``diff``, ``report``."""

from __future__ import annotations

import os
import sys

from orchestration.instance import prepare_environment, prepare_run_readers


def cmd_query(args) -> int:
    """``dora query SQL``: read-only SQL on the warehouse (analytics/query.py); it opens no
    Dagster instance, so ``$DAGSTER_HOME`` is neither created nor written."""
    prepare_environment(dagster=False)
    import duckdb

    from analytics.query import (
        QueryRefusedError,
        QueryTimeoutError,
        WarehouseBusyError,
        case_hint,
        execute_query,
        format_result,
        matched_nothing,
        one_line_sql_error,
    )

    try:
        result = execute_query(args.sql, timeout=getattr(args, "timeout", None) or None)
    except (QueryRefusedError, WarehouseBusyError, FileNotFoundError) as exc:
        print(f"dora query: {exc}", file=sys.stderr)
        return 2
    except QueryTimeoutError as exc:
        print(f"dora query: {exc}", file=sys.stderr)
        return 1
    except duckdb.Error as exc:
        # DuckDB's whole message on one line: its "Did you mean ..." / candidate bindings and the
        # LINE n: position are the fix (the caret line under the position says nothing on one line)
        print(f"dora query: SQL error: {one_line_sql_error(exc)}", file=sys.stderr)
        return 2
    print(format_result(result, args.format))
    if matched_nothing(result):
        hint = case_hint(args.sql)
        if hint:
            print(f"dora query: {hint}", file=sys.stderr)
    return 0


def cmd_tables(args) -> int:
    """``dora tables [NAME]``: the public relations by family, or NAME's columns (analytics/catalog.py)."""
    prepare_environment()
    from analytics.catalog import columns_text, relation, tables_text

    if not args.name:
        print(tables_text(include_all=args.all))
        return 0
    rel = relation(args.name)  # UnknownRelationError: one line, exit 2
    from analytics.query import WarehouseMissingError, execute_query

    try:  # the DuckDB types, when the relation is built
        types = dict(
            execute_query(
                "select column_name, data_type from information_schema.columns where table_name = ? order by ordinal_position", params=[rel.name]
            ).rows
        )
    except WarehouseMissingError:
        types = {}
    print(columns_text(rel.name, types))
    return 0


def cmd_reparse(args) -> int:
    """``dora reparse``: the re-parser of the family ``--family`` names (``ProbeFamily.reparse``)."""
    home = prepare_environment()
    from orchestration import families as fam

    return fam.get_family(args.family).reparse(args, home)


def cmd_ui(args) -> int:
    prepare_environment()
    problem = listen_problem(args.host, args.port)
    if problem:  # a port in use or a host that does not resolve: say so before the instance and dagster dev start
        print(f"dora ui: cannot listen on {args.host}:{args.port}: {problem}", file=sys.stderr)
        return 2
    from orchestration.instance import configure_instance, open_instance
    from orchestration.run_reaper import reap_dead_runs

    with open_instance() as instance:  # creates / checks the storage before dagster dev opens it
        configure_instance(instance)  # runs launched from the UI share the 1-slot 'duckdb_writer' pool
        reap_dead_runs(instance)
    prepare_run_readers()  # in-run readers wait for a writer

    cmd = [sys.executable, "-m", "dagster", "dev", "-m", "orchestration.definitions", "-h", args.host, "-p", str(args.port)]
    print(f"dora: starting the Dagster UI on http://{args.host}:{args.port} (DAGSTER_HOME={os.environ['DAGSTER_HOME']})", file=sys.stderr)
    return _run_forwarding_signals(cmd, watch=WebserverWatch(args.host, args.port))


def listen_problem(host: str, port: int) -> str | None:
    """Why a webserver could not listen on ``host:port`` (the host does not resolve, the address
    is not this machine's, the port is in use), or ``None``. A bind with ``SO_REUSEADDR``, as
    uvicorn binds, released at once: cheap, and it catches the usual causes before ``dagster dev``
    spends seconds starting."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        return f"the host does not resolve ({exc}); pass --host an address or host name of this machine"
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        hint = "; pick another --port" if exc.errno == 98 else ""
        return f"{reason} ({address[0]}){hint}"
    finally:
        sock.close()
    return None


#: Seconds ``dora ui`` gives the webserver, from when its process appears, to accept
#: connections. uvicorn that cannot bind logs the error and its process stays up (no UI, no
#: exit): this bound is what turns that into an exit.
UI_LISTEN_TIMEOUT_SECONDS = 30.0


class WebserverWatch:
    """Called by :func:`_run_forwarding_signals` about every 0.1 s: the reason ``dagster dev`` is
    up without a UI (its webserver process exited, or has not accepted a connection on
    ``host:port`` within :data:`UI_LISTEN_TIMEOUT_SECONDS` of appearing), else ``None``. Linux
    (``/proc``) only; elsewhere it never reports."""

    def __init__(self, host: str, port: int, timeout: float = UI_LISTEN_TIMEOUT_SECONDS):
        import time

        self.host, self.port, self.timeout = host, port, timeout
        self.seen_at: float | None = None  # when the webserver process was first seen
        self.listening = False
        self._next_look = time.monotonic()

    def _webserver_alive(self, pgid: int) -> bool:
        from pathlib import Path

        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if os.getpgid(int(proc.name)) != pgid:
                    continue
                if b"dagster_webserver" in (proc / "cmdline").read_bytes():
                    return True
            except (OSError, ValueError):
                continue
        return False

    def _accepts(self) -> bool:
        import socket

        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        try:
            with socket.create_connection((host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def __call__(self, pgid: int) -> str | None:
        import time

        now = time.monotonic()
        if self.listening or now < self._next_look or not os.path.isdir("/proc"):
            return None
        self._next_look = now + 1.0  # one look a second
        alive = self._webserver_alive(pgid)
        if self.seen_at is None:
            if alive:
                self.seen_at = now
            return None
        if not alive:
            return "its webserver process exited"
        if self._accepts():
            self.listening = True
            return None
        if now - self.seen_at > self.timeout:
            return f"its webserver accepted no connection within {self.timeout:.0f} s (see its error above)"
        return None


#: Seconds ``dora ui`` gives ``dagster dev`` to stop after Ctrl-C / SIGTERM before it SIGKILLs the
#: process group. ``dagster dev`` itself takes ~10 s to wind down its webserver, daemon and code
#: servers; a user who pressed Ctrl-C wants the prompt back, and the instance's SQLite storage is
#: transactional, so the group is cut short (every run state is in storage already).
UI_STOP_GRACE_SECONDS = 2.0


def _run_forwarding_signals(cmd: list[str], grace: float = UI_STOP_GRACE_SECONDS, stop_wait: float = 1.0, watch=None) -> int:
    """Run ``cmd`` in its own process group; SIGTERM / SIGINT / SIGHUP to this process are
    forwarded to the whole group (``dagster dev`` and its webserver, daemon and code servers),
    so stopping ``dora ui`` never orphans them.

    If the group has not stopped ``grace`` s after the first forwarded signal it is SIGKILLed;
    once ``cmd`` has exited, any process of its group still running is stopped too (SIGTERM,
    then SIGKILL after ``stop_wait`` s). A stop prints one line.

    ``watch(pgid)``, when given, is called while ``cmd`` runs; a reason it returns stops the
    group and is printed as one line naming ``cmd``'s listening address (:class:`WebserverWatch`).

    Returns:
        130 when stopped by Ctrl-C (SIGINT), 0 when stopped by SIGTERM / SIGHUP, 1 when ``watch``
        reported a problem, else ``cmd``'s exit code (128 + N if it was killed by signal N).
    """
    import signal
    import subprocess
    import time

    child = subprocess.Popen(cmd, start_new_session=True)
    stopping: list[tuple[float, int]] = []
    failed: str | None = None

    def signal_group(signum: int) -> None:
        try:
            os.killpg(child.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def forward(signum, _frame):
        stopping.append((time.monotonic(), signum))
        signal_group(signal.SIGTERM if signum == signal.SIGHUP else signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        while True:
            try:
                code = child.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                if stopping and time.monotonic() - stopping[0][0] > grace:
                    signal_group(signal.SIGKILL)
                elif not stopping and failed is None and watch is not None:
                    failed = watch(child.pid)
                    if failed:
                        stopping.append((time.monotonic(), signal.SIGTERM))
                        signal_group(signal.SIGTERM)
            except KeyboardInterrupt:  # a handler race: forward and keep waiting
                forward(signal.SIGINT, None)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    # asked to stop: what is left of the group goes now; else stragglers get SIGTERM, then SIGKILL
    _stop_group(child.pid, 0.0 if stopping else stop_wait)
    if failed:
        where = f"{watch.host}:{watch.port}" if hasattr(watch, "host") else "its address"
        print(f"dora ui: the Dagster UI is not serving on {where}: {failed}; stopped it and every process it started", file=sys.stderr)
        return 1
    if watch is not None and not stopping:  # dagster dev ended by itself (it exits 0 after losing its webserver)
        where = f"{watch.host}:{watch.port}" if hasattr(watch, "host") else "its address"
        print(f"dora ui: the Dagster UI on {where} exited by itself (exit code {code}); its error is above", file=sys.stderr)
        return code if code > 0 else 1
    if stopping:
        how = "Ctrl-C" if stopping[0][1] == signal.SIGINT else signal.Signals(stopping[0][1]).name
        print(f"dora ui: stopped ({how}); the Dagster UI and its processes have exited", file=sys.stderr)
        return 130 if stopping[0][1] == signal.SIGINT else 0
    return code if code >= 0 else 128 - code


def _stop_group(pgid: int, wait: float = 5.0) -> None:
    """SIGTERM every process still in process group ``pgid``, SIGKILL what is left after ``wait`` s."""
    import signal
    import time

    def alive() -> bool:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    if not alive():
        return
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive():
        os.killpg(pgid, signal.SIGKILL)


def cmd_models(args) -> int:
    """``dora models list``: one row per registry target and family it runs, with the family's
    latest audit and its drift-check state (``orchestration/defs/audits/checks.py``)."""
    prepare_environment()
    from analytics.models_overview import models_overview
    from analytics.query import format_result
    from ingestion.registry import RegistryError, load_registry

    try:
        registry = load_registry(args.registry)
    except RegistryError as exc:
        print(f"dora models: {exc}", file=sys.stderr)
        return 2
    from models_inference.model_ref import resolve_version
    from orchestration import families as fam
    from orchestration.cli.target import target_checker
    from orchestration.defs.audits.checks import judge_families
    from orchestration.defs.audits.runs import target_families

    def families_of(target) -> list[str]:
        try:
            return [f.name for f in target_families(target, fam.FAMILIES)]
        except ValueError:  # an invalid target: its problem is in the `valid` column
            return list(target.families or ["-"])

    check = target_checker(registry, args.registry)
    drift, _ = judge_families(fam.FAMILIES, deliver=False, registry_path=args.registry)
    overview = models_overview(registry, resolve=None if args.no_resolve else resolve_version, check=check, families_of=families_of, drift=drift)
    print(format_result(overview, args.format))
    return 0


def cmd_diff(args) -> int:
    """``dora diff``: the family's own diff (BiasDora), else its change-test mart (analytics/family_diff.py)."""
    prepare_environment()
    from orchestration import families as fam

    family = fam.get_family(args.family)
    if family.diff is not None:
        return family.diff(args, fam.change_tests())
    from analytics.diff import DiffError
    from analytics.family_diff import family_diff
    from analytics.query import WarehouseBusyError, WarehouseMissingError

    if family.change_test is None:
        print(f"dora diff: the {family.name} family has no change test", file=sys.stderr)
        return 2
    if args.fail_on == "collapse":
        print(
            f"dora diff: --fail-on collapse reads the parse rate and the significant associations, which the {family.name} "
            "family does not have: use --fail-on change",
            file=sys.stderr,
        )
        return 2
    try:
        report = family_diff(family.change_test, args.target, args.from_ref, args.to_ref, others=fam.change_tests())
        print(report.text(args.format, top=args.top))
    except (DiffError, WarehouseBusyError, WarehouseMissingError) as exc:
        print(f"dora diff: {exc}", file=sys.stderr)
        return 2
    if args.fail_on == "change" and report.significant:
        print(f"dora diff: --fail-on change: {report.significant} rows changed significantly (BH change q < 0.05)", file=sys.stderr)
        return 1
    return 0


def cmd_report(args) -> int:
    """``dora report``: every family's page (BiasDora's index.html holds the other families'
    sections), into one folder."""
    home = prepare_environment()
    from pathlib import Path

    from analytics.query import WarehouseBusyError, WarehouseMissingError
    from ingestion.home import safe_path_component
    from orchestration import families as fam

    out = Path(args.out) if args.out else home / "reports" / (safe_path_component(args.audit_id) if args.audit_id else "all")
    sections = [f.report_section for f in fam.FAMILIES if f.report_section is not None]
    # every page left unwritten or unlinked is said in one line, where the user looks: a link to a
    # missing page, or a page of empty tables, said nothing
    written, skipped, notes = [], [], []
    from orchestration.defs.audits.checks import judge_families

    try:  # the drift check state each version page shows, as `dora models list` (no alarm is sent)
        drift, _ = judge_families(fam.FAMILIES, deliver=False)
    except (WarehouseMissingError, WarehouseBusyError):
        drift = None
    for family in fam.FAMILIES:
        if family.report_page is None:
            continue
        try:
            page = family.report_page(out, args.audit_id, top=args.top, sections=sections, notes=notes, drift=drift)
        except LookupError as exc:  # that family's marts are not built, or hold no audit of it: the other pages may exist
            from ingestion.errors import first_line

            skipped.append(f"no {family.name} page: {first_line(exc)}")  # a library's message may span lines
            continue
        except (WarehouseMissingError, WarehouseBusyError) as exc:
            print(f"dora report: {exc}", file=sys.stderr)
            return 2
        if page is not None:
            written.append(page)
    if not written:
        print(f"dora report: {skipped[0] if skipped else 'nothing to report: no family has built its marts'}", file=sys.stderr)
        return 2
    index = out / "index.html"
    if index in written:  # the index links every page written beside it
        from analytics.report import link_pages

        link_pages(index, [p for p in written if p != index])
    for page in written:
        print(f"dora: report written to {page} (DORA_HOME={home})")
    for line in skipped + notes:
        print(f"dora report: {line}", file=sys.stderr)
    return 0


def cmd_families(args) -> int:
    """``dora families``: each family's Dagster group, flag prefix, landing tables (from its
    landing contract) and marts (from the YAML of ``dbt_project/models/marts/<family>/``)."""
    from analytics.query import QueryResult, format_result
    from orchestration import families as fam

    columns = ["family", "group", "flags", "landing_tables", "marts", "title"]
    rows = [
        (
            f.name,
            ",".join(f.groups),
            f.flag_prefix + "*" if f.flag_prefix != "--" else "unprefixed",
            ",".join(f.landing_tables),
            ",".join(f.marts),
            f.title,
        )
        for f in fam.FAMILIES
    ]
    if args.format != "table":
        print(format_result(QueryResult(columns, rows), args.format))
        return 0
    for name, group, flags, landing, marts, title in rows:
        print(
            f"{name}: {title}\n  Dagster group: {group}\n  flags: {flags} (dora audit --help-family {name})"
            f"\n  landing tables: {landing.replace(',', ', ')}\n  marts: {marts.replace(',', ', ')}"
        )
    return 0
