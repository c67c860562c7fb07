"""The code protoc generates from proto/, which is never committed: it must be on sys.path.

`make python-client` (or the one protoc line in client/python/README.md) writes it to
build/client/python/gen; put that folder on PYTHONPATH next to client/python.
"""

try:
    from placer.v1 import placer_pb2, placer_pb2_grpc
    from placer_health.v1 import health_pb2, health_pb2_grpc
except ImportError as error:
    raise ImportError(
        f"placer_client cannot import its generated stubs ({error.name}): run "
        "`make python-client` and put build/client/python/gen on PYTHONPATH "
        "(see client/python/README.md)") from error

__all__ = ["placer_pb2", "placer_pb2_grpc", "health_pb2", "health_pb2_grpc"]
