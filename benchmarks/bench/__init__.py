"""The benchmark harness: one module per job (venvs, servers, load, report, charts)."""
