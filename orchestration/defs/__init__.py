"""One folder per integration (dagster-open-platform layout): assets.py, resources.py, ..."""
