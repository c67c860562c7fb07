"""A client written for Triton's vLLM backend, against a real placerd: stubs generated from
Triton's own grpc_service.proto (tests/e2e/upstream_triton, nothing of placer's), requests
shaped as the backend's sample client (samples/client.py) makes them through tritonclient:
[1]-shaped text_input, stream, sampling_parameters (JSON with numbers as strings) and
exclude_input_in_output, tensors serialised into raw_input_contents as tritonclient does
(BYTES: 4-byte little-endian length, then the bytes), every prompt on one ModelStreamInfer
stream, each with its request id. It must generate text knowing nothing about placer.

tritonclient itself is not a Debian package; this does what its InferInput,
set_data_from_numpy, async_stream_infer and as_numpy do, with numpy and the generated stubs.
"""

from __future__ import annotations

import json
import shutil
import struct
import tempfile
import unittest

import grpc
import numpy

import grpc_service_pb2
import grpc_service_pb2_grpc
from placer_client import PlacerClient
from placerd_process import Placerd, make_checkpoint

MODEL = "vllm_model"  # the sample client's model name, given to placerd with --model-name
PROMPTS = ["Hello, my name is", "The most dangerous animal is", "The capital of France is",
           "The future of AI is"]


def serialize_byte_tensor(values: numpy.ndarray) -> bytes:
    """tritonclient.utils.serialize_byte_tensor: each element length-prefixed."""
    out = bytearray()
    for value in values.flatten():
        data = value if isinstance(value, bytes) else str(value).encode("utf-8")
        out += struct.pack("<I", len(data)) + data
    return bytes(out)


def deserialize_bytes_tensor(raw: bytes) -> list[bytes]:
    values, at = [], 0
    while at < len(raw):
        (length,) = struct.unpack_from("<I", raw, at)
        at += 4
        values.append(raw[at:at + length])
        at += length
    return values


def infer_input(request, name: str, datatype: str, data: numpy.ndarray) -> None:
    """InferInput(name, shape, datatype).set_data_from_numpy(data), appended to `request`."""
    tensor = request.inputs.add()
    tensor.name = name
    tensor.datatype = datatype
    tensor.shape.extend(data.shape)
    raw = serialize_byte_tensor(data) if datatype == "BYTES" else data.tobytes()
    request.raw_input_contents.append(raw)


def create_request(prompt: str, stream: bool, request_id: str, sampling_parameters: dict,
                   exclude_input_in_output: bool):
    """The vLLM backend sample client's create_request."""
    request = grpc_service_pb2.ModelInferRequest(model_name=MODEL, id=request_id)
    infer_input(request, "text_input", "BYTES",
                numpy.array([prompt.encode("utf-8")], dtype=numpy.object_))
    infer_input(request, "stream", "BOOL", numpy.array([stream], dtype=bool))
    infer_input(request, "sampling_parameters", "BYTES",
                numpy.array([json.dumps(sampling_parameters).encode("utf-8")],
                            dtype=numpy.object_))
    infer_input(request, "exclude_input_in_output", "BOOL",
                numpy.array([exclude_input_in_output], dtype=bool))
    request.outputs.add().name = "text_output"
    return request


def text_output(response) -> str:
    """result.as_numpy("text_output")[0].decode()"""
    for index, output in enumerate(response.outputs):
        if output.name == "text_output":
            return deserialize_bytes_tensor(response.raw_output_contents[index])[0].decode()
    raise AssertionError(f"no text_output in {response}")


class TritonVllmClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model_dir = tempfile.mkdtemp(prefix="placer-triton-")
        cls.addClassCleanup(shutil.rmtree, cls.model_dir, True)
        make_checkpoint(cls.model_dir, seed=4)
        cls.placerd = Placerd("--model", cls.model_dir, "--model-name", MODEL)
        cls.addClassCleanup(cls.placerd.stop)
        cls.placerd.wait_health("SERVING")
        cls.channel = grpc.insecure_channel(cls.placerd.target)
        cls.addClassCleanup(cls.channel.close)
        cls.stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(cls.channel)

    def test_the_sample_clients_stream_generates_text_for_every_prompt(self):
        self.assertTrue(self.stub.ServerReady(grpc_service_pb2.ServerReadyRequest()).ready)
        self.assertTrue(self.stub.ModelReady(grpc_service_pb2.ModelReadyRequest(name=MODEL)).ready)
        sampling = {"temperature": "0.1", "top_p": "0.95", "max_tokens": "16"}
        requests = [create_request(prompt, True, str(i), sampling, False)
                    for i, prompt in enumerate(PROMPTS)]
        texts = {str(i): "" for i in range(len(PROMPTS))}
        finals = {str(i): 0 for i in range(len(PROMPTS))}
        for response in self.stub.ModelStreamInfer(iter(requests), timeout=60):
            self.assertEqual(response.error_message, "")
            result = response.infer_response
            texts[result.id] += text_output(result)
            final = result.parameters["triton_final_response"].bool_param
            finals[result.id] += int(final)
        for request_id, text in texts.items():
            self.assertTrue(text, f"request {request_id} generated no text")
            self.assertEqual(finals[request_id], 1)

    def test_a_whole_greedy_answer_is_the_prompt_then_generates_text(self):
        sampling = {"temperature": "0", "max_tokens": "12", "ignore_eos": True}
        request = create_request(PROMPTS[2], False, "whole", sampling, False)
        response = self.stub.ModelInfer(request, timeout=60)
        self.assertEqual(response.id, "whole")
        self.assertEqual(response.model_name, MODEL)
        with PlacerClient(self.placerd.target, timeout=30) as placer:
            expected = placer.generate(PROMPTS[2], stream=False, max_new_tokens=12,
                                       temperature=0, ignore_eos=True)
        self.assertEqual(text_output(response), PROMPTS[2] + expected.text)

    def test_a_bad_request_is_refused_naming_the_input(self):
        request = create_request(PROMPTS[0], False, "bad", {"temperature": "hot"}, False)
        with self.assertRaises(grpc.RpcError) as refused:
            self.stub.ModelInfer(request, timeout=60)
        self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("sampling_parameters.temperature", refused.exception.details())


if __name__ == "__main__":
    unittest.main()
