"""What the client presents to placerd: a bearer token, and TLS settings, from files or values.

Mirrors the `placer` CLI (client/client_credentials.cc): the token file's first line that is
neither blank nor a '#' comment is the token; a CA or client certificate implies TLS.
"""

from __future__ import annotations

from typing import Optional

import grpc


def _read(param: str, path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as error:
        raise ValueError(f"{param}: cannot read {path}: {error.strerror}") from None


def read_token_file(path: str) -> str:
    for line in _read("token_file", path).decode("utf-8", errors="replace").splitlines():
        token = line.strip()
        if token and not token.startswith("#"):
            return token
    raise ValueError(f"token_file: {path} holds no token")


def bearer_token(token: Optional[str], token_file: Optional[str]) -> Optional[str]:
    if token is not None and token_file is not None:
        raise ValueError("token and token_file: give one, not both")
    if token_file is not None:
        return read_token_file(token_file)
    if token is None:
        return None
    if not isinstance(token, str) or not token.strip() or any(c in token for c in "\r\n"):
        raise ValueError("token: expected a non-empty single-line str")
    return token.strip()


def channel_credentials(tls: bool, ca_file: Optional[str], cert_file: Optional[str],
                        key_file: Optional[str]) -> Optional[grpc.ChannelCredentials]:
    """None for plaintext; otherwise TLS trusting ca_file (or the system roots)."""
    if (cert_file is None) != (key_file is None):
        raise ValueError("cert_file and key_file go together (the client certificate for mTLS)")
    if not (tls or ca_file or cert_file):
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=_read("ca_file", ca_file) if ca_file else None,
        private_key=_read("key_file", key_file) if key_file else None,
        certificate_chain=_read("cert_file", cert_file) if cert_file else None)
