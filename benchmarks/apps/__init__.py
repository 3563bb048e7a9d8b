"""Benchmark apps: one module per interface, serving the same bytes on the same paths."""
