"""Reads and writes cujax exported artifacts (format version 1, docs/export.md).

    cujax-exported 1\n
    sha256 <hex of everything after this line>\n
    <header JSON, one line>\n
    <StableHLO text, header["module_bytes"] bytes>
"""
import hashlib
import json

MAGIC = b"cujax-exported "
VERSION = 1


def write(path, fun_name, text, in_leaves, out_leaves, platforms, in_tree="", out_tree=""):
    """in_leaves/out_leaves: lists of dicts with path, shape, dtype (numpy name) and, optionally,
    weak_type and sharding."""
    body_text = text.encode("utf-8")
    leaf = lambda l: {"path": l["path"], "shape": [int(d) for d in l["shape"]],
                      "dtype": l["dtype"], "weak_type": bool(l.get("weak_type", False)),
                      "sharding": l.get("sharding", "{replicated}")}
    header = {"fun_name": fun_name, "platforms": list(platforms), "nr_devices": 1,
              "in_tree": in_tree, "out_tree": out_tree,
              "in": [leaf(l) for l in in_leaves], "out": [leaf(l) for l in out_leaves],
              "module_bytes": len(body_text)}
    body = json.dumps(header).encode("utf-8") + b"\n" + body_text
    data = MAGIC + str(VERSION).encode() + b"\nsha256 " + \
        hashlib.sha256(body).hexdigest().encode() + b"\n" + body
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    """Returns (header dict, StableHLO text); raises ValueError like cujax's deserialize."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        raise ValueError(f"{path}: not a cujax exported artifact")
    first, sep, rest = data.partition(b"\n")
    if first[len(MAGIC):] != str(VERSION).encode():
        raise ValueError(f"{path}: format version {first[len(MAGIC):]!r} is not supported")
    sum_line, _, body = rest.partition(b"\n")
    if not sum_line.startswith(b"sha256 "):
        raise ValueError(f"{path}: no sha256 line")
    if hashlib.sha256(body).hexdigest().encode() != sum_line[7:]:
        raise ValueError(f"{path}: checksum mismatch")
    header_line, _, text = body.partition(b"\n")
    header = json.loads(header_line)
    if len(text) != header["module_bytes"]:
        raise ValueError(f"{path}: truncated or padded StableHLO text")
    return header, text.decode("utf-8")
