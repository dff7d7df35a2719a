"""Versioned audits: registry-driven partitions, the new-version sensor, the re-audit
schedule and the collapse checks (one partition per audit target x model version)."""
