"""Real placerd processes on loopback for the Python client tests, and the files they need:
a checkpoint made by placer-make-checkpoint and TLS certificates made by the openssl CLI.

ctest passes the binaries in PLACERD_PATH and PLACER_MAKE_CHECKPOINT_PATH.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import tempfile
import time

from placer_client import PlacerClient, PlacerError

PLACERD = os.environ.get("PLACERD_PATH", "")
MAKE_CHECKPOINT = os.environ.get("PLACER_MAKE_CHECKPOINT_PATH", "")

# A test killed by ctest's timeout must not leave placerd running, so placerd gets SIGKILL when
# the test process dies. setpriv (util-linux) sets that up and execs placerd: a preexec_fn
# would make Python fork() instead of vfork(), and gRPC's fork handlers can then wait forever
# for its threads to go idle.
_DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL"]


def free_loopback_port() -> int:
    """A port nobody listens on right now, below the kernel's ephemeral range: a port from the
    range can be handed to any outgoing connection before placerd binds it (as
    tests/e2e/daemon_process.h explains)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
        low = int(ports.read().split()[0])
    while True:
        port = random.randint(10000, max(10001, low - 1))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def make_checkpoint(directory: str, seed: int = 1) -> str:
    subprocess.run([MAKE_CHECKPOINT, "--arch", "llama", "--preset", "tiny", "--seed", str(seed),
                    "--out", directory], check=True, capture_output=True, timeout=120)
    return directory


class Placerd:
    """placerd on free loopback ports, its output in a log file; stop() always ends it."""

    def __init__(self, *flags: str):
        if not os.access(PLACERD, os.X_OK):
            raise RuntimeError(f"PLACERD_PATH={PLACERD!r} is not an executable placerd")
        self.port = free_loopback_port()
        self.target = f"127.0.0.1:{self.port}"
        self.metrics_port = free_loopback_port()
        self._log = tempfile.NamedTemporaryFile(prefix="placerd-pytest-", suffix=".log")
        self._final_log = None
        self.process = subprocess.Popen(
            [*_DIE_WITH_PARENT, PLACERD, "--listen", self.target,
             "--metrics-listen", f"127.0.0.1:{self.metrics_port}", *flags],
            stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        if self._final_log is not None:
            return self._final_log
        with open(self._log.name, encoding="utf-8", errors="replace") as log:
            return log.read()

    def wait_health(self, wanted: str, timeout: float = 30.0, **client_options) -> None:
        """Polls health until it is `wanted`, with a fresh channel each time (gRPC's reconnect
        backoff after an early refusal would otherwise slow the test down)."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"placerd exited with {self.process.returncode}:\n{self.log()}")
            with PlacerClient(self.target, timeout=2.0, **client_options) as client:
                try:
                    last = client.health()
                except PlacerError as error:
                    last = str(error)
            if last == wanted:
                return
            time.sleep(0.05)
        raise AssertionError(f"placerd health is not {wanted} after {timeout}s ({last}):\n"
                             f"{self.log()}")

    def stop(self) -> None:
        """Kills placerd (draining is tested elsewhere; exiting takes seconds) and keeps its log."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if self._final_log is None:
            self._final_log = self.log()
            self._log.close()


class TestPki:
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate."""

    def __init__(self, directory: str):
        self.directory = directory
        with open(self.path("server.ext"), "w") as ext:
            ext.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        with open(self.path("client.ext"), "w") as ext:
            ext.write("extendedKeyUsage=clientAuth\n")
        for command in [
            "req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
            "-subj /CN=placer-test-ca",
            "req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost",
            "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem "
            "-days 2 -extfile server.ext",
            "req -newkey rsa:2048 -nodes -keyout client.key -out client.csr "
            "-subj /CN=placer-test-client",
            "x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem "
            "-days 2 -extfile client.ext",
        ]:
            subprocess.run(["openssl", *command.split()], cwd=directory, check=True,
                           capture_output=True, timeout=60)

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)
