"""Execution: connections, the QuerySet facade, the read cache."""
