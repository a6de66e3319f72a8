"""A real S3-compatible HTTP server (moto) on loopback for tests, and buckets on it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.processes import free_port


@contextmanager
def moto_server() -> Iterator[str]:
    """Starts the server, puts its endpoint and test credentials in the environment (and drops
    the storage layer's cached client, so it sees them); yields the endpoint. On exit the server
    stops and the environment is as before."""
    from moto.server import ThreadedMotoServer

    import dolma_pipe.storage as storage

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    storage._S3_CLIENT = None
    yield endpoint
    server.stop()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    storage._S3_CLIENT = None


def new_bucket() -> str:
    """A new empty bucket with a unique name, on the server the environment names."""
    import boto3

    name = f"test-{uuid.uuid4().hex[:10]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name
