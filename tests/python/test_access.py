"""PlacerClient's access options against real placerd processes (no model needed): bearer
tokens, TLS with a CA file, mTLS, bad credential files, and an unreachable target."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import unittest

from placer_client import PlacerClient, PlacerError
from placerd_process import Placerd, TestPki, free_loopback_port


def setUpModule():
    global WORK, PKI
    WORK = tempfile.mkdtemp(prefix="placer-pyclient-access-")
    unittest.addModuleCleanup(shutil.rmtree, WORK, True)
    PKI = TestPki(WORK)


def write(name: str, text: str) -> str:
    path = os.path.join(WORK, name)
    with open(path, "w") as file:
        file.write(text)
    return path


class BearerTokens(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tokens = write("tokens", "# operators\n\n  first-secret-0123  \nsecond-secret-4567\n")
        cls.placerd = Placerd("--auth-token-file", tokens)
        cls.addClassCleanup(cls.placerd.stop)
        cls.placerd.wait_health("NOT_SERVING")  # no model

    def client(self, **options):
        client = PlacerClient(self.placerd.target, timeout=5, **options)
        self.addCleanup(client.close)
        return client

    def test_calls_without_the_right_token_are_unauthenticated(self):
        for options in [{}, {"token": "guess-987654"}]:
            with self.assertRaises(PlacerError) as caught:
                self.client(**options).info()
            self.assertEqual(caught.exception.code, "UNAUTHENTICATED", options)
            self.assertTrue(str(caught.exception).startswith(
                f"UNAUTHENTICATED from placerd at {self.placerd.target}: "), str(caught.exception))
            self.assertNotIn("guess-987654", str(caught.exception))
        self.assertIn("refused GetModelInfo", self.placerd.log())

    def test_a_token_or_a_token_file_is_accepted(self):
        self.assertEqual(self.client(token="second-secret-4567").info().state, "none")
        token_file = write("client-token", "# mine\n\nfirst-secret-0123\nignored\n")
        self.assertEqual(self.client(token_file=token_file).info().state, "none")
        with self.assertRaises(PlacerError) as caught:
            self.client(token="first-secret-0123").forward([1])
        self.assertEqual(caught.exception.code, "FAILED_PRECONDITION")  # past auth: no model

    def test_health_needs_no_token(self):
        self.assertEqual(self.client().health(), "NOT_SERVING")

    def test_bad_token_options_name_the_option_and_file(self):
        missing = os.path.join(WORK, "no-such-token-file")
        with self.assertRaisesRegex(ValueError, f"token_file: cannot read {missing}"):
            PlacerClient(self.placerd.target, token_file=missing)
        empty = write("empty-tokens", "\n# nothing\n")
        with self.assertRaisesRegex(ValueError, f"token_file: {empty} holds no token"):
            PlacerClient(self.placerd.target, token_file=empty)
        with self.assertRaisesRegex(ValueError, "token and token_file"):
            PlacerClient(self.placerd.target, token="a", token_file=empty)
        with self.assertRaisesRegex(ValueError, "token: expected a non-empty single-line"):
            PlacerClient(self.placerd.target, token="a\nb")


class Tls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.placerd = Placerd("--tls-cert", PKI.path("server.pem"),
                              "--tls-key", PKI.path("server.key"))
        cls.addClassCleanup(cls.placerd.stop)
        cls.placerd.wait_health("NOT_SERVING", ca_file=PKI.path("ca.pem"))

    def test_a_client_trusting_the_ca_file_gets_answers(self):
        with PlacerClient(self.placerd.target, timeout=5, ca_file=PKI.path("ca.pem")) as client:
            self.assertEqual(client.info().state, "none")
            self.assertEqual(client.health(), "NOT_SERVING")

    def test_plaintext_and_untrusting_clients_fail_unavailable(self):
        for options in [{}, {"tls": True}]:
            with PlacerClient(self.placerd.target, timeout=5, **options) as client:
                with self.assertRaises(PlacerError) as caught:
                    client.health()
                self.assertEqual(caught.exception.code, "UNAVAILABLE", options)

    def test_bad_tls_options_name_the_option_and_file(self):
        with self.assertRaisesRegex(ValueError, "ca_file: cannot read /nonexistent/ca.pem"):
            PlacerClient(self.placerd.target, ca_file="/nonexistent/ca.pem")
        with self.assertRaisesRegex(ValueError, "cert_file and key_file go together"):
            PlacerClient(self.placerd.target, cert_file=PKI.path("client.pem"))


class MutualTls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tokens = write("mtls-tokens", "mtls-token-3333\n")
        cls.placerd = Placerd("--tls-cert", PKI.path("server.pem"),
                              "--tls-key", PKI.path("server.key"),
                              "--tls-client-ca", PKI.path("ca.pem"), "--auth-token-file", tokens)
        cls.addClassCleanup(cls.placerd.stop)
        cls.placerd.wait_health("NOT_SERVING", **cls.certificate())

    @staticmethod
    def certificate():
        return {"ca_file": PKI.path("ca.pem"), "cert_file": PKI.path("client.pem"),
                "key_file": PKI.path("client.key")}

    def test_a_client_certificate_and_a_token_get_answers(self):
        with PlacerClient(self.placerd.target, timeout=5, token="mtls-token-3333",
                          **self.certificate()) as client:
            self.assertEqual(client.info().state, "none")

    def test_no_certificate_is_unavailable_and_no_token_unauthenticated(self):
        with PlacerClient(self.placerd.target, timeout=5, token="mtls-token-3333",
                          ca_file=PKI.path("ca.pem")) as client:
            with self.assertRaises(PlacerError) as caught:
                client.info()
            self.assertEqual(caught.exception.code, "UNAVAILABLE")
        with PlacerClient(self.placerd.target, timeout=5, **self.certificate()) as client:
            with self.assertRaises(PlacerError) as caught:
                client.info()
            self.assertEqual(caught.exception.code, "UNAUTHENTICATED")
        # placerd names the refused client by its certificate: the certificate was presented.
        self.assertIn("CN=placer-test-client", self.placerd.log())


class Unreachable(unittest.TestCase):
    def test_a_target_nobody_listens_on_fails_fast_naming_it(self):
        target = f"127.0.0.1:{free_loopback_port()}"
        started = time.monotonic()
        with PlacerClient(target, timeout=3) as client:
            with self.assertRaises(PlacerError) as caught:
                client.info()
        self.assertEqual(caught.exception.code, "UNAVAILABLE")
        self.assertEqual(caught.exception.target, target)
        self.assertIn(target, str(caught.exception))
        self.assertLess(time.monotonic() - started, 3)


if __name__ == "__main__":
    unittest.main()
