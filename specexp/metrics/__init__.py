"""Metrics: the registry (every key declared once), the pure functions over per-request records,
acceptance from raw engine counts, and statistics over repeated measurements."""
