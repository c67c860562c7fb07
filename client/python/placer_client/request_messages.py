"""Builds request messages from Python values, refusing wrong names and types before any RPC.

Ranges that depend on the model (a token id inside the vocabulary, top_k at most its size) are
placerd's to check: it answers INVALID_ARGUMENT naming the field.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Union

from ._stubs import placer_pb2

Prompt = Union[str, Iterable[int]]

_INT32 = (-(2**31), 2**31 - 1)
_UINT32 = (0, 2**32 - 1)
_UINT64 = (0, 2**64 - 1)


def _integer(name: str, value: Any, bounds: tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} {value!r}")
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{name}: {value} is outside [{bounds[0]}, {bounds[1]}]")
    return value


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__} {value!r}")
    return float(value)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected True or False, got {type(value).__name__} {value!r}")
    return value


def _strings(name: str, value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = _sequence(name, value)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{name}[{index}]: expected a str, got {type(item).__name__} {item!r}")
    return items


def _sequence(name: str, value: Any) -> list:
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name}: expected a list, got {type(value).__name__} {value!r}")
    return list(value)


def token_ids(name: str, value: Any) -> list[int]:
    return [_integer(f"{name}[{index}]", item, _INT32)
            for index, item in enumerate(_sequence(name, value))]


# SamplingParams fields, each with the check that turns a Python value into the field's value.
_SAMPLING: dict[str, Callable[[str, Any], Any]] = {
    "max_new_tokens": lambda name, value: _integer(name, value, _UINT32),
    "temperature": _number,
    "top_k": lambda name, value: _integer(name, value, _UINT32),
    "top_p": _number,
    "repetition_penalty": _number,
    "stop": _strings,
    "stop_token_ids": token_ids,
    "ignore_eos": _flag,
    "seed": lambda name, value: _integer(name, value, _UINT64),
}
SAMPLING_PARAMS = tuple(_SAMPLING)


def sampling_params(params: dict[str, Any]) -> placer_pb2.SamplingParams:
    """SamplingParams from keyword arguments; None leaves a field unset (the model's default)."""
    message = placer_pb2.SamplingParams()
    for name, value in params.items():
        check = _SAMPLING.get(name)
        if check is None:
            raise TypeError(f"generate() got an unknown parameter {name!r}; sampling parameters "
                            f"are {', '.join(SAMPLING_PARAMS)}")
        if value is None:
            continue
        checked = check(name, value)
        if isinstance(checked, list):
            getattr(message, name).extend(checked)
        else:
            setattr(message, name, checked)
    return message


def generate_request(prompt: Prompt, params: dict[str, Any], request_id: str,
                     return_logprobs: bool) -> placer_pb2.GenerateRequest:
    request = placer_pb2.GenerateRequest(params=sampling_params(params),
                                         return_logprobs=_flag("return_logprobs", return_logprobs))
    if not isinstance(request_id, str):
        raise TypeError(f"request_id: expected a str, got {type(request_id).__name__}")
    request.request_id = request_id
    if isinstance(prompt, str):
        request.prompt = prompt
    else:
        request.prompt_token_ids.extend(token_ids("prompt", prompt))
    return request
