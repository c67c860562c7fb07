"""Python client for placerd. See client/python/README.md.

    from placer_client import PlacerClient
    with PlacerClient("127.0.0.1:50051") as placer:
        for chunk in placer.generate([1, 17, 300], max_new_tokens=8):
            print(chunk.token_ids)
"""

from .client import DEFAULT_TARGET, PlacerClient
from .errors import PlacerError
from .request_messages import SAMPLING_PARAMS
from .results import Completion, GenerateChunk, Logits, TokenizeResult, Usage

__all__ = ["DEFAULT_TARGET", "PlacerClient", "PlacerError", "SAMPLING_PARAMS", "Completion",
           "GenerateChunk", "Logits", "TokenizeResult", "Usage"]
