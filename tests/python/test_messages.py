"""The client's conversions without a daemon: request messages from Python values, and results
from response messages, including logits tensors with hostile shapes and sizes."""

from __future__ import annotations

import random
import struct
import unittest

import numpy
from placer.v1 import placer_pb2

from placer_client import Completion, GenerateChunk, Logits, Usage
from placer_client.request_messages import generate_request


class GenerateRequests(unittest.TestCase):
    def test_token_ids_text_and_sampling_params_land_in_their_fields(self):
        request = generate_request([1, 2, 3], {"max_new_tokens": 4, "temperature": 0,
                                               "stop": "\n", "stop_token_ids": (9,),
                                               "top_k": None}, "req-1", True)
        self.assertEqual(list(request.prompt_token_ids), [1, 2, 3])
        self.assertEqual(request.prompt, "")
        self.assertEqual(request.request_id, "req-1")
        self.assertTrue(request.return_logprobs)
        self.assertEqual(request.params.max_new_tokens, 4)
        # Explicitly set to 0 (greedy) is not the same as unset (the model's default).
        self.assertTrue(request.params.HasField("temperature"))
        self.assertFalse(request.params.HasField("top_k"))
        self.assertFalse(request.params.HasField("top_p"))
        self.assertEqual(list(request.params.stop), ["\n"])
        self.assertEqual(list(request.params.stop_token_ids), [9])
        text = generate_request("Hello", {}, "", False)
        self.assertEqual(text.prompt, "Hello")
        self.assertEqual(len(text.prompt_token_ids), 0)
        self.assertFalse(text.HasField("params") and text.params.HasField("max_new_tokens"))

    def test_wrong_values_name_the_parameter(self):
        for prompt, params, error, pattern in [
            ([1], {"top_p": "0.9"}, TypeError, "top_p: expected a number"),
            ([1], {"stop": [1]}, TypeError, r"stop\[0\]: expected a str"),
            ([1], {"stop_token_ids": 5}, TypeError, "stop_token_ids: expected a list"),
            ([1], {"max_new_tokens": 2**32}, ValueError, "max_new_tokens: 4294967296 is outside"),
            ([2**31], {}, ValueError, r"prompt\[0\]: 2147483648 is outside"),
            ([True], {}, TypeError, r"prompt\[0\]: expected an int"),
            (b"bytes", {}, TypeError, "prompt: expected a list"),
            (7, {}, TypeError, "prompt: expected a list"),
        ]:
            with self.assertRaisesRegex(error, pattern):
                generate_request(prompt, params, "", False)


def tensor(shape, data, dtype="float32"):
    return placer_pb2.Tensor(shape=shape, dtype=dtype, data=data)


class LogitsFromTheWire(unittest.TestCase):
    def test_values_rows_argmax_and_numpy_follow_the_shape(self):
        floats = [0.5, -1.0, 2.0, 3.5, 0.25, -7.0]
        logits = Logits.from_tensor(tensor([2, 3], struct.pack("<6f", *floats)))
        self.assertEqual(logits.shape, (2, 3))
        self.assertEqual(logits.values(), floats)
        self.assertEqual(logits.rows(), [floats[:3], floats[3:]])
        self.assertEqual(logits.argmax(), [2, 0])
        numpy.testing.assert_array_equal(logits.numpy(), numpy.array(floats).reshape(2, 3))

    def test_bad_tensors_raise_value_error_naming_the_field(self):
        for bad, field in [(tensor([3], b"\0" * 12, dtype="bfloat16"), "logits.dtype"),
                           (tensor([], b""), "logits.shape"),
                           (tensor([2, -3], b""), "logits.shape"),
                           (tensor([1, 1, 3], b"\0" * 12), "logits.shape"),
                           (tensor([4], b"\0" * 15), "logits.data: 15 bytes")]:
            with self.assertRaisesRegex(ValueError, field):
                Logits.from_tensor(bad)

    def test_random_tensors_parse_or_raise_value_error_only(self):
        rng = random.Random(7)
        parsed = 0
        for _ in range(3000):
            shape = [rng.choice([-1, 0, 1, 2, 3, 5, 2**31 - 1, 2**40])
                     for _ in range(rng.randint(0, 4))]
            size = rng.choice([0, 4, 8, 12, 24, 30, 60])
            dtype = rng.choice(["float32", "float32", "", "float16"])
            try:
                logits = Logits.from_tensor(tensor(shape, rng.randbytes(size), dtype))
            except ValueError:
                continue
            parsed += 1
            self.assertEqual(len(logits.values()), size // 4)
            self.assertEqual(logits.numpy().shape, tuple(shape))
            self.assertEqual(len(logits.argmax()), len(logits.rows()))
        self.assertGreater(parsed, 20)  # the success path is exercised too


class GenerateResults(unittest.TestCase):
    def test_a_completion_joins_the_chunks_and_keeps_the_last_finish(self):
        responses = [placer_pb2.GenerateResponse(token_ids=[5], text="a", logprobs=[-0.5]),
                     placer_pb2.GenerateResponse(token_ids=[6], text="b", logprobs=[-1.5]),
                     placer_pb2.GenerateResponse(finish_reason="stop", usage=placer_pb2.Usage(
                         prompt_tokens=3, completion_tokens=2))]
        chunks = [GenerateChunk.from_proto(r) for r in responses]
        self.assertIsNone(chunks[0].usage)
        self.assertEqual(Completion.from_chunks(chunks),
                         Completion((5, 6), "ab", (-0.5, -1.5), "stop", Usage(3, 2)))


if __name__ == "__main__":
    unittest.main()
