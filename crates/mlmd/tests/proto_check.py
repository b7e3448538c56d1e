#!/usr/bin/env python3
"""Check podline's hand-written MLMD proto subset against the real library.

Parses crates/mlmd/proto/mlmd_subset.proto (simple line-based parsing: it is
our own file and we keep it in that shape) and compares every field's number
and every enum value with the descriptors of the installed `ml-metadata`.
Prints each mismatch and exits 1 if there is any.
"""

import re
import sys

from ml_metadata.proto import metadata_store_pb2, metadata_store_service_pb2

FIELD = re.compile(r"^\s*(?:optional|repeated)?\s*(?:map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*(\d+);")
ENUM_VALUE = re.compile(r"^\s*([A-Z_]+)\s*=\s*(\d+);")
# Our names for MLMD's nested messages.
ALIASES = {
    "ArtifactAndEvent": "PutExecutionRequest.ArtifactAndEvent",
    "Options": "PutExecutionRequest.Options",
}


def lookup(path):
    for module in (metadata_store_pb2, metadata_store_service_pb2):
        d = module.DESCRIPTOR
        parts = path.split(".")
        found = d.message_types_by_name.get(parts[0]) or d.enum_types_by_name.get(parts[0])
        for p in parts[1:]:
            if found is None:
                break
            nested = getattr(found, "nested_types_by_name", {}).get(p)
            found = nested or getattr(found, "enum_types_by_name", {}).get(p)
        if found is not None:
            return found
    return None


def main(path):
    errors = []
    stack = []  # (kind, name)
    checked = 0
    for line in open(path):
        line = line.split("//")[0]
        if line.strip().startswith("rpc "):
            continue
        m = re.match(r"^\s*(message|enum|oneof|service)\s+(\w+)\s*\{", line)
        if m:
            stack.append((m.group(1), m.group(2)))
            inline_close = line.count("}")
            if inline_close:
                # one-line message: parse its fields
                body = line[line.index("{") + 1 : line.rindex("}")]
                for part in body.split(";"):
                    fm = FIELD.match(part + ";")
                    if fm:
                        checked += check_field(stack, fm, errors)
                stack.pop()
            continue
        if "}" in line:
            stack.pop()
            continue
        if not stack or stack[-1][0] == "service":
            continue
        if stack[-1][0] == "enum":
            em = ENUM_VALUE.match(line)
            if em:
                checked += 1
                enum = lookup(qualified(stack))
                if enum is None:
                    errors.append(f"enum {qualified(stack)} not in MLMD")
                    continue
                v = enum.values_by_name.get(em.group(1))
                if v is None or v.number != int(em.group(2)):
                    errors.append(f"{qualified(stack)}.{em.group(1)} = {em.group(2)} but MLMD has {v and v.number}")
            continue
        fm = FIELD.match(line)
        if fm:
            checked += check_field(stack, fm, errors)
    for e in errors:
        print("MISMATCH", e)
    print(f"checked {checked} fields and enum values, {len(errors)} mismatches")
    return 1 if errors or checked < 50 else 0


def qualified(stack):
    names = [n for kind, n in stack if kind in ("message", "enum")]
    q = ".".join(names)
    for ours, theirs in ALIASES.items():
        if names and names[-1] == ours and len(names) == 1:
            return theirs
    return q


def check_field(stack, fm, errors):
    msg = lookup(qualified(stack))
    if msg is None:
        errors.append(f"message {qualified(stack)} not in MLMD")
        return 1
    f = msg.fields_by_name.get(fm.group(1))
    if f is None or f.number != int(fm.group(2)):
        errors.append(f"{qualified(stack)}.{fm.group(1)} = {fm.group(2)} but MLMD has {f and f.number}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
