"""Unpacks a .deb's data archive into a folder, for machines without dpkg (scripts/gpu-check).

A .deb is an ar archive; its member data.tar.{xz,gz,zst} holds the files. Python's tarfile
reads xz and gz, which is what Debian 12 uses.
"""
import io
import sys
import tarfile


def members(data: bytes):
    if data[:8] != b"!<arch>\n":
        raise SystemExit("not an ar archive")
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        yield name, data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size % 2)


def main() -> None:
    deb, dest = sys.argv[1], sys.argv[2]
    with open(deb, "rb") as f:
        for name, body in members(f.read()):
            if name.startswith("data.tar"):
                with tarfile.open(fileobj=io.BytesIO(body)) as tar:
                    tar.extractall(dest, filter="tar") if hasattr(tarfile, "data_filter") else tar.extractall(dest)
                return
    raise SystemExit(f"{deb}: no data.tar member")


if __name__ == "__main__":
    main()
