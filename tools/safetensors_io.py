"""Tiny pure-python safetensors reader/writer (Debian ships no python3-safetensors).

Format: 8-byte little-endian u64 header length N, then N bytes of JSON header, then the raw
little-endian tensor data. The header maps each tensor name to
{"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} (offsets relative to the start of
the data section) and may hold "__metadata__": {str: str}. Like the reference writer, the header
is padded with spaces to a multiple of 8 bytes and the data section is contiguous with no gaps.
"""
import json
import struct

import numpy as np

_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def _to_numpy(t):
    if hasattr(t, "detach"):  # torch tensor, without importing torch here
        t = t.detach().cpu().contiguous().numpy()
    return np.ascontiguousarray(t)


def save(path, tensors, metadata=None):
    """Write dict name -> array (numpy or torch) to `path`. Tensors are laid out in name order."""
    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"metadata must be str->str, got {k!r}: {v!r}")
        header["__metadata__"] = dict(metadata)
    blobs = []
    offset = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise ValueError("tensor name __metadata__ is reserved")
        arr = _to_numpy(tensors[name])
        le = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        dname = _NAMES.get(np.dtype(le.dtype.str))
        if dname is None:
            raise TypeError(f"{name}: unsupported dtype {arr.dtype}")
        raw = le.tobytes(order="C")
        header[name] = {"dtype": dname, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def load(path):
    """Return (tensors: dict name -> numpy array, metadata: dict str -> str)."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", buf[:8])
    if 8 + n > len(buf):
        raise ValueError(f"{path}: header length {n} exceeds file size {len(buf)}")
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    data = memoryview(buf)[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        dt = _DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape)) if shape else 1
        if e - b != count * dt.itemsize or e > len(data):
            raise ValueError(f"{path}: tensor {name} has bad data_offsets {b},{e}")
        out[name] = np.frombuffer(data[b:e], dtype=dt).reshape(shape).copy()
    return out, meta
