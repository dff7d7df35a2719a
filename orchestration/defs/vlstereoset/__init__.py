"""VLStereoSet probe family: Dagster asset group ``vlstereoset`` (issue 14)."""
