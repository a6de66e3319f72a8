"""A local Ray cluster for tests: one per session, on loopback only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


def local_ray() -> Iterator[str]:
    """Starts Ray in this process unless it runs already (two CPUs, no dashboard), yields the
    cluster's address, and shuts it down after; skips where Ray is not installed."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        # Loopback only: tests never open ports on other interfaces.
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    address = ray.get_runtime_context().gcs_address
    yield address
    ray.shutdown()
