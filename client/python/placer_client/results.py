"""What PlacerClient returns: small immutable dataclasses, decoupled from the generated messages.

(info() is the exception: it returns the placer.v1.ModelInfo message as it is.)
"""

from __future__ import annotations

import array
import math
import sys
from dataclasses import dataclass
from typing import Iterable, Optional


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class GenerateChunk:
    """One streamed GenerateResponse. placerd sends one new token a chunk; the last chunk
    carries no token, only finish_reason ("length", "stop" or "cancelled") and usage."""

    token_ids: tuple[int, ...]
    text: str
    logprobs: tuple[float, ...]
    finish_reason: str
    usage: Optional[Usage]

    @classmethod
    def from_proto(cls, response) -> GenerateChunk:
        usage = None
        if response.HasField("usage"):
            usage = Usage(response.usage.prompt_tokens, response.usage.completion_tokens)
        return cls(tuple(response.token_ids), response.text, tuple(response.logprobs),
                   response.finish_reason, usage)


@dataclass(frozen=True)
class Completion:
    """A whole generation: what generate(..., stream=False) returns."""

    token_ids: tuple[int, ...]
    text: str
    logprobs: tuple[float, ...]
    finish_reason: str
    usage: Optional[Usage]

    @classmethod
    def from_chunks(cls, chunks: Iterable[GenerateChunk]) -> Completion:
        token_ids: list[int] = []
        texts: list[str] = []
        logprobs: list[float] = []
        finish_reason, usage = "", None
        for chunk in chunks:
            token_ids.extend(chunk.token_ids)
            texts.append(chunk.text)
            logprobs.extend(chunk.logprobs)
            if chunk.finish_reason:
                finish_reason, usage = chunk.finish_reason, chunk.usage
        return cls(tuple(token_ids), "".join(texts), tuple(logprobs), finish_reason, usage)


@dataclass(frozen=True)
class TokenizeResult:
    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]


_FLOAT32_BYTES = 4
# Positions and vocabulary ids are int32 on the wire; a larger dimension is a corrupt shape.
_MAX_DIM = 2**31 - 1


@dataclass(frozen=True)
class Logits:
    """Forward's logits: float32 values, row-major, `shape` (positions, vocab); (vocab,) is
    accepted too, as a single position."""

    shape: tuple[int, ...]
    data: bytes  # little-endian float32, as on the wire

    @classmethod
    def from_tensor(cls, tensor) -> Logits:
        """Checks a placer.v1.Tensor from the wire; ValueError names what is wrong."""
        if tensor.dtype != "float32":
            raise ValueError(f"ForwardResponse.logits.dtype: {tensor.dtype!r}, expected 'float32'")
        shape = tuple(tensor.shape)
        if len(shape) not in (1, 2) or any(not 0 <= dim <= _MAX_DIM for dim in shape):
            raise ValueError(f"ForwardResponse.logits.shape: {list(shape)} is not [vocab] or "
                             "[positions, vocab]")
        expected = math.prod(shape) * _FLOAT32_BYTES
        if len(tensor.data) != expected:
            raise ValueError(f"ForwardResponse.logits.data: {len(tensor.data)} bytes, shape "
                             f"{list(shape)} needs {expected}")
        return cls(shape, bytes(tensor.data))

    def values(self) -> list[float]:
        """All values, flat, in row-major order."""
        floats = array.array("f")
        floats.frombytes(self.data)
        if sys.byteorder != "little":
            floats.byteswap()
        return floats.tolist()

    def rows(self) -> list[list[float]]:
        """One list of vocab values per position."""
        flat = self.values()
        width = self.shape[-1]
        return [flat[start:start + width] for start in range(0, len(flat), width)] if width else []

    def argmax(self) -> list[int]:
        """The most likely next token at each position."""
        return [max(range(len(row)), key=row.__getitem__) for row in self.rows()]

    def numpy(self):
        """A numpy array of `shape` (python3-numpy; imported only here)."""
        import numpy

        return numpy.frombuffer(self.data, dtype="<f4").reshape(self.shape)
