"""One exception for every way a call to placerd can fail, carrying gRPC's status code name."""

import grpc


class PlacerError(Exception):
    """placerd (or the channel to it) answered a call with a non-OK gRPC status.

    code: the status code name, e.g. "INVALID_ARGUMENT", "UNAUTHENTICATED", "UNAVAILABLE".
    message: placerd's own text (it names the field at fault), or gRPC's for channel errors.
    target: the address the client called.
    """

    def __init__(self, code: str, message: str, target: str):
        super().__init__(f"{code} from placerd at {target}: {message}")
        self.code = code
        self.message = message
        self.target = target


def error_from_rpc(error: grpc.RpcError, target: str) -> PlacerError:
    # Errors raised by calls are also grpc.Call objects; anything else is a bug in grpc itself.
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    return PlacerError(code.name, details or "", target)
