"""Jobs over whole tables: snapshots and repair."""
