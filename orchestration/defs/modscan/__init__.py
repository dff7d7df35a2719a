"""ModSCAN probe family (seed 000): Dagster asset and run config."""
