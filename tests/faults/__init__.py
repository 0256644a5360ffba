"""Fault injection between tsmodel and the Cloud Bigtable emulator (tests only)."""
