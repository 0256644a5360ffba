"""Encoding: value codecs, timestamps, time buckets, row keys, serialization."""
