"""placer's proto/inference/grpc_service.proto against Triton's own (tests/e2e/upstream_triton):
the same package and service, every RPC placer declares is Triton's with the same request,
response and streaming, and every message placer declares is Triton's field for field (name,
number, type, label, message type), nested messages and maps included. Wire compatibility with
Triton and KServe clients is exactly this.

  python3 oip_proto_matches_upstream.py PROTOC OURS_DIR UPSTREAM_DIR
"""

import os
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2


def descriptor(protoc, include, name):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        subprocess.run([protoc, f"-I{include}", f"--descriptor_set_out={out}", name], check=True)
        files = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            files.ParseFromString(f.read())
        return files.file[0]


def messages(types, prefix=""):
    found = {}
    for message in types:
        found[prefix + message.name] = sorted(
            (f.name, f.number, f.type, f.label, f.type_name) for f in message.field)
        found.update(messages(message.nested_type, prefix + message.name + "."))
    return found


def main():
    protoc, ours_dir, upstream_dir = sys.argv[1:4]
    ours = descriptor(protoc, ours_dir, "inference/grpc_service.proto")
    theirs = descriptor(protoc, upstream_dir, "grpc_service.proto")
    problems = []
    if ours.package != theirs.package:
        problems.append(f"package {ours.package} is not Triton's {theirs.package}")
    their_services = {s.name: s for s in theirs.service}
    for service in ours.service:
        upstream = their_services.get(service.name)
        if upstream is None:
            problems.append(f"service {service.name} is not Triton's")
            continue
        their_methods = {m.name: m for m in upstream.method}
        for method in service.method:
            theirs_m = their_methods.get(method.name)
            shape = lambda m: (m.input_type, m.output_type, m.client_streaming, m.server_streaming)
            if theirs_m is None or shape(theirs_m) != shape(method):
                problems.append(f"rpc {method.name}: {shape(method)} is not Triton's "
                                f"{shape(theirs_m) if theirs_m else 'nothing'}")
    their_messages = messages(theirs.message_type)
    for name, fields in messages(ours.message_type).items():
        if their_messages.get(name) != fields:
            problems.append(f"message {name}: {fields} is not Triton's {their_messages.get(name)}")
    if problems:
        print("\n".join(problems))
        return 1
    print(f"{len(messages(ours.message_type))} messages and "
          f"{sum(len(s.method) for s in ours.service)} RPCs match Triton's grpc_service.proto")
    return 0


if __name__ == "__main__":
    sys.exit(main())
