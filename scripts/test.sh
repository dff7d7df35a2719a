#!/usr/bin/env bash
# The test command (README): offline, quiet dbt, the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DBT_SEND_ANONYMOUS_USAGE_STATS=false
exec python -m pytest -q "$@"
