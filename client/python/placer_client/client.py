"""PlacerClient: a blocking Python client for placerd's gRPC API (proto/placer/v1/placer.proto)."""

from __future__ import annotations

from typing import Any, Iterator, Optional, Union

import grpc

from . import credentials, request_messages
from ._stubs import health_pb2, health_pb2_grpc, placer_pb2, placer_pb2_grpc
from .errors import PlacerError, error_from_rpc
from .results import Completion, GenerateChunk, Logits, TokenizeResult

DEFAULT_TARGET = "127.0.0.1:50051"


class PlacerClient:
    """One channel to one placerd. Every call has a deadline (`timeout` seconds, per call
    overridable), so an unreachable daemon costs at most that. Failed calls raise PlacerError.

    Access: `token=` or `token_file=` sends `authorization: Bearer <token>` on every call;
    `tls=True` uses TLS with the system's roots, `ca_file=` trusts that CA instead, and
    `cert_file=` with `key_file=` presents a client certificate (mTLS); either file implies TLS.
    """

    def __init__(self, target: str = DEFAULT_TARGET, *, timeout: float = 30.0,
                 token: Optional[str] = None, token_file: Optional[str] = None,
                 tls: bool = False, ca_file: Optional[str] = None,
                 cert_file: Optional[str] = None, key_file: Optional[str] = None,
                 channel_options: tuple = ()):
        self.target = target
        self.timeout = timeout
        token = credentials.bearer_token(token, token_file)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        channel_credentials = credentials.channel_credentials(tls, ca_file, cert_file, key_file)
        if channel_credentials is None:
            self._channel = grpc.insecure_channel(target, options=channel_options)
        else:
            self._channel = grpc.secure_channel(target, channel_credentials,
                                                options=channel_options)
        self._placer = placer_pb2_grpc.PlacerStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> PlacerClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def health(self, service: str = "", *, timeout: Optional[float] = None) -> str:
        """"SERVING" or "NOT_SERVING" (no model yet, or draining), for the whole daemon ("") or
        for "placer.v1.Placer"; another service raises PlacerError NOT_FOUND. Needs no token."""
        response = self._unary(self._health.Check, health_pb2.HealthCheckRequest(service=service),
                               timeout)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    def info(self, *, timeout: Optional[float] = None):
        """The placer.v1.ModelInfo message: state, architecture, device map, devices..."""
        return self._unary(self._placer.GetModelInfo, placer_pb2.GetModelInfoRequest(), timeout)

    def forward(self, token_ids, *, all_positions: bool = False,
                timeout: Optional[float] = None) -> Logits:
        """Logits after `token_ids`: of the last position (shape (1, vocab)), or of every
        position with all_positions (shape (len(token_ids), vocab))."""
        request = placer_pb2.ForwardRequest(
            token_ids=request_messages.token_ids("token_ids", token_ids),
            all_positions=bool(all_positions))
        response = self._unary(self._placer.Forward, request, timeout)
        return Logits.from_tensor(response.logits)

    def tokenize(self, text: str, *, add_special_tokens: bool = False,
                 timeout: Optional[float] = None) -> TokenizeResult:
        if not isinstance(text, str):
            raise TypeError(f"text: expected a str, got {type(text).__name__}")
        request = placer_pb2.TokenizeRequest(text=text, add_special_tokens=bool(add_special_tokens))
        response = self._unary(self._placer.Tokenize, request, timeout)
        return TokenizeResult(tuple(response.token_ids), tuple(response.tokens))

    def generate(self, prompt: request_messages.Prompt, stream: bool = True, *,
                 request_id: str = "", return_logprobs: bool = False,
                 timeout: Optional[float] = None,
                 **params: Any) -> Union[Iterator[GenerateChunk], Completion]:
        """Generates from `prompt`: a str (text) or a list of token ids.

        stream=True returns an iterator of GenerateChunk as placerd sends them (the call starts
        at the first next(); leaving the loop early cancels it); stream=False waits and returns
        one Completion. `params` are SamplingParams fields (max_new_tokens, temperature, top_k,
        top_p, repetition_penalty, stop, stop_token_ids, ignore_eos, seed); an unknown name or a
        wrong type raises TypeError here, before any call; None leaves a field to the model.
        `timeout` bounds the whole stream.
        """
        request = request_messages.generate_request(prompt, params, request_id, return_logprobs)
        chunks = self._generate_stream(request, timeout)
        return chunks if stream else Completion.from_chunks(chunks)

    def _generate_stream(self, request, timeout: Optional[float]) -> Iterator[GenerateChunk]:
        call = self._placer.Generate(request, timeout=self._deadline(timeout),
                                     metadata=self._metadata)
        try:
            for response in call:
                yield GenerateChunk.from_proto(response)
        except grpc.RpcError as error:
            raise error_from_rpc(error, self.target) from None
        finally:
            # Frees placerd's generation slot when the caller stops reading early.
            call.cancel()

    def _unary(self, method, request, timeout: Optional[float]):
        try:
            return method(request, timeout=self._deadline(timeout), metadata=self._metadata)
        except grpc.RpcError as error:
            raise error_from_rpc(error, self.target) from None

    def _deadline(self, timeout: Optional[float]) -> float:
        return self.timeout if timeout is None else timeout


__all__ = ["PlacerClient", "PlacerError", "DEFAULT_TARGET"]
