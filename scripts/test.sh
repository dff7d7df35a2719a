#!/usr/bin/env bash
# The README's test command: set up (idempotent) and run the whole suite offline; with --cov,
# line coverage of the four packages (in-process code) printed at the end.
#
#   bash scripts/test.sh                 everything (CI runs this)
#   bash scripts/test.sh --cov           everything, with line coverage: coverage's tracer costs
#                                        about 5 CPU-minutes of the suite's 23 on Python 3.11 (3 to
#                                        4 minutes of wall time on 2 cores), so it is asked for
#   bash scripts/test.sh --fast          the fast tier: -m "not slow"
#   bash scripts/test.sh --fast --cov    the fast tier with coverage
#   bash scripts/test.sh --no-scenario   everything but the 12 process-level scenario tests
#                                        (-m "not scenario": killed, racing and restarted processes,
#                                        the cluster, the browser; ~40% of the suite's time)
#   bash scripts/test.sh --real-server   only the real_server tier (-m real_server): dora against a real
#                                        llama.cpp llama-server on 127.0.0.1 (tests/test_real_server.py)
#   bash scripts/test.sh [--fast] tests/test_fisher.py -k tables   extra arguments go to pytest
#
# DORA_TEST_WORKERS (default 2) is the number of pytest-xdist worker processes; 0 runs the tests
# in this process (e.g. to debug with pdb).
# DORA_SKIP_SETUP=1 skips scripts/setup.sh and uses the `python` on PATH (an environment set up
# some other way). Every run but --fast first builds llama-server once per machine
# (scripts/build_llama_server.sh, ~12 CPU-minutes, cached in ~/.cache/dora; DORA_NO_LLAMA_SERVER=1 skips the
# build, and the real_server tier then skips with one line saying why). DORA_SLOW_TEST_SECONDS (default 5) is the call time over which a test without
# @pytest.mark.slow fails (tests/helpers/slow_marker.py); 0 switches that check off.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${DORA_SKIP_SETUP:-0}" != 1 ]; then
  bash scripts/setup.sh
  . .venv/bin/activate
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DBT_SEND_ANONYMOUS_USAGE_STATS=false
# Lint and format first (pyproject.toml [tool.ruff]: unused imports and names, undefined names,
# bugbear's likely bugs; ruff's formatter): a second, not a run
python -m ruff check --quiet . || { echo "scripts/test.sh: ruff check failed (python -m ruff check --fix fixes most)" >&2; exit 1; }
python -m ruff format --check --quiet . || { echo "scripts/test.sh: ruff format --check failed (python -m ruff format . applies it)" >&2; exit 1; }
# SQL lint of the dbt models (.sqlfluff: the Jinja templater, no dbt parse): ~16 s of CPU
out=$(python -m sqlfluff lint --nocolor dbt_project/models 2>&1) \
  || { echo "$out" >&2; echo "scripts/test.sh: sqlfluff lint failed (python -m sqlfluff fix dbt_project/models fixes most)" >&2; exit 1; }
# Types of ingestion and analytics (pyproject.toml [tool.mypy]): ~9 s of CPU from a fresh clone, ~3 s with its cache
out=$(python -m mypy 2>&1) || { echo "$out" >&2; echo "scripts/test.sh: mypy failed" >&2; exit 1; }

args=() cov=0 fast=0 want_cov= marks=()
# Two pytest-xdist workers by default (DORA_TEST_WORKERS=0 runs in one process): much of the
# suite is single-threaded Python, so a second worker fills the second core. The end-to-end tests
# share one finished audit across workers (tests/helpers/homes.py); every test has its own home.
workers=${DORA_TEST_WORKERS:-2}
for a in "$@"; do
  case "$a" in
    --fast) marks+=("not slow") fast=1 ;;
    --no-scenario) marks+=("not scenario") ;;
    --real-server) marks+=("real_server") ;;
    --no-cov) want_cov=0 ;;  # the default; kept so older command lines still work
    --cov) want_cov=1 ;;
    *) args+=("$a") ;;
  esac
done
if [ "${#marks[@]}" -gt 0 ]; then
  expr=$(printf ' and %s' "${marks[@]}")
  args=(-m "${expr# and }" "${args[@]}")
fi
if [ "$workers" -gt 0 ] 2>/dev/null; then
  args=(-n "$workers" --dist worksteal "${args[@]}")
  # One OpenMP thread per process (torch's CPU kernels, in the workers and in the `dora`
  # processes they start): with two workers on two cores, torch's default of one thread per core
  # puts four spinning threads on two cores, and the spin-waits burned CPU for nothing (the
  # model tests took 87 s of CPU instead of 45, and 50 s instead of 29). A value set by the
  # caller is kept.
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
fi

# The real_server tier's llama-server, built before the clock of any test starts (once per machine).
if [ "$fast" = 0 ] && [ -z "${DORA_NO_LLAMA_SERVER:-}" ] && [ -z "${DORA_LLAMA_SERVER:-}" ]; then
  if built=$(bash scripts/build_llama_server.sh 2>/tmp/dora-llama-build.$$); then
    export DORA_LLAMA_SERVER=$built
    echo "dora: llama-server for the real_server tier: $built"
  else
    # the tests skip with this line instead of trying the build again
    export DORA_NO_LLAMA_SERVER="$(tail -1 /tmp/dora-llama-build.$$)"
    echo "dora: $DORA_NO_LLAMA_SERVER; the real_server tier will be skipped" >&2
  fi
  rm -f /tmp/dora-llama-build.$$
fi

# The whole suite lists its 20 slowest tests (setup and call): where its time goes, run by run.
[ "$fast" = 0 ] && args=(--durations=20 "${args[@]}")
[ -n "$want_cov" ] && cov=$want_cov
if [ "$cov" = 0 ]; then
  exec python -m pytest -q "${args[@]}"
fi

# Coverage data of this run only; the summary below reads the .coverage pytest-cov writes.
rm -f .coverage .coverage.*
status=0
python -m pytest -q --cov --cov-report= "${args[@]}" || status=$?
if [ -f .coverage ]; then
  python - <<'EOF'
"""Line coverage per package and in total (the figure the README states)."""
import io

import coverage

cov = coverage.Coverage()
cov.load()
print("\nline coverage (pyproject.toml [tool.coverage]; `python -m coverage report -m` lists the lines missed):")
for package in ("ingestion", "models_inference", "analytics", "orchestration"):
    percent = cov.report(include=[f"{package}/*"], file=io.StringIO())
    print(f"  {package:<17} {percent:5.1f}%")
print(f"  {'TOTAL':<17} {cov.report(file=io.StringIO()):5.1f}%")
EOF
fi
exit "$status"
