"""VLStereoSet probe family: Dagster asset group ``vlstereoset``."""
