"""supervise's settings in the container image (examples/docker/Dockerfile).

The Kubernetes manifests in examples/kubernetes/ are sized from these numbers
(probe paths and ports, terminationGracePeriodSeconds); tests/test_container.py
checks that they agree.
"""

import os

# Every address, since the container's network is its own.
bind = ["0.0.0.0:8000"]
# One worker per CPU the pod may use: set WEB_CONCURRENCY from the pod's CPU
# limit (the Deployment does), not from the node's cores.
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = os.environ.get("WORKER_CLASS", "gthread")

# Probes answered by supervise itself: /healthz/ready and /healthz/live.
health_path = "/healthz"
# TERM arrives while Kubernetes is still taking the pod out of the Service's
# endpoints: keep serving (readiness 503) this long, then stop gracefully.
shutdown_delay = 10
graceful_timeout = 20

# Prometheus scrapes this port (the pod's annotations say so).
metrics_bind = "0.0.0.0:9100"

# Logs to stdout/stderr, where the container runtime collects them.
accesslog = "-"
errorlog = "-"
