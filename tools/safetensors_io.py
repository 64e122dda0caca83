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



# How far a fixture regenerated on another machine may lie from the committed one (compare()).
# PyTorch's CPU kernels differ between processors (vectorised reductions, BLAS kernels), so the
# same script gives other low bits there. Seen on a 2-core Xeon with AMX against the committed
# files: logits up to 32 % of the bound below, gradients under 2e-6 of their tensor's largest
# value, and the AdamW trajectory, which each step amplifies, 5.2e-5 relative on the sixth step's
# gradient norm (grassmann_post_B). Single evaluations may drift by FIXTURE_FRACTION of the
# tolerance the golden tests hold gflow to (tests/nn/golden.h), the AdamW trajectory by that
# tolerance itself (it exists to absorb such drift). Per tensor, by name:
#   out.logits      |d| <= f (3e-5 + 1e-5 |ref|)          (golden: 3e-5 + 1e-5 |ref|)
#   out.loss        |d| <= f 1e-5 |ref|                   (golden: relative 1e-5)
#   grad.*          max |d| <= f 1e-4 max |ref| + 1e-7    (golden: the same with f = 1)
#   adamw.losses, adamw.gnorm   |d| <= 1e-4 |ref|          (golden: relative 1e-4 per step)
#   adamw.final.*   max |d| <= 1e-4 max |ref| + 1e-7
# Anything else (inputs, initial weights, metadata) must be equal.
# A bf16 fixture (metadata precision = bf16, tests/nn/test_golden.c) holds the same names, held
# to that file's own golden bounds (BF16_BOUNDS: a low bit of difference can flip a bf16 rounding),
# and autocast.out.* / autocast.grad.* to the autocast bounds: the same fraction f of the former,
# the whole bound (AUTOCAST_FRACTION) of the latter. torch.autocast on the CPU is PyTorch's own bf16
# arithmetic, which depends on the processor's instructions: on an AMD EPYC (family 25 model 1,
# AVX2 without AVX-512 or AVX512-BF16) against the committed files (made on a Xeon with AMX-BF16)
# autocast.out.logits moved by 78 % (grassmann_post_A) and 57 % (transformer_post) of the golden
# bound, and autocast.grad.* by up to 42 %, while every other tensor held its quarter.
FIXTURE_FRACTION = 0.25
AUTOCAST_FRACTION = 1.0
# (logit abs, logit rel, loss rel, grad rel to max, adamw rel) of test_golden.c's bf16_exact and
# bf16_autocast
BF16_BOUNDS = {"": (1e-3, 1e-3, 1e-4, 1e-2, 1e-2), "autocast.": (5e-2, 3e-2, 5e-3, 8e-2, 0.0)}


def _fixture_bound(name, ref, bf16=False):
    """Per-element bound on |new - committed| for tensor `name` (float64 `ref`), or None: equal."""
    f = FIXTURE_FRACTION
    if bf16:
        prefix = "autocast." if name.startswith("autocast.") else ""
        f = AUTOCAST_FRACTION if prefix else f
        la, lr, lo, gr, aw = BF16_BOUNDS[prefix]
        base = name[len(prefix):]
        if base == "out.logits":
            return f * (la + lr * np.abs(ref))
        if base == "out.loss":
            return f * lo * np.abs(ref)
        if base in ("adamw.losses", "adamw.gnorm") and aw > 0:
            return aw * np.abs(ref)
        if base.startswith("grad."):
            return np.full(ref.shape, f * gr * float(np.max(np.abs(ref), initial=0.0)) + 1e-7)
        return None
    if name == "out.logits":
        return f * (3e-5 + 1e-5 * np.abs(ref))
    if name == "out.loss":
        return f * 1e-5 * np.abs(ref)
    if name in ("adamw.losses", "adamw.gnorm"):
        return 1e-4 * np.abs(ref)
    if name.startswith(("grad.", "adamw.final.")):
        g = f if name.startswith("grad.") else 1.0
        return np.full(ref.shape, g * 1e-4 * float(np.max(np.abs(ref), initial=0.0)) + 1e-7)
    return None


def compare(path, tensors, metadata):
    """Compare freshly made `tensors` (name -> numpy or torch) and `metadata` with the file at
    `path`. Returns (verdict, detail): 'same' (equal values and metadata), 'close' (within the
    bounds above; detail names the tensor nearest its bound) or 'DIFFERS' (detail says what)."""
    try:
        old, old_meta = load(path)
    except (OSError, ValueError) as e:
        return "DIFFERS", f"cannot read the committed file: {e}"
    new = {k: _to_numpy(v) for k, v in tensors.items()}
    metadata = metadata or {}
    if old_meta != metadata:
        keys = sorted(k for k in set(old_meta) | set(metadata) if old_meta.get(k) != metadata.get(k))
        return "DIFFERS", f"metadata differs: {', '.join(keys)}"
    if set(old) != set(new):
        return "DIFFERS", (f"tensor names differ: only committed {sorted(set(old) - set(new))}, "
                           f"only new {sorted(set(new) - set(old))}")
    worst, worst_name = -1.0, ""
    for k in sorted(new):
        a, b = old[k], new[k]
        if a.dtype != b.dtype or a.shape != b.shape:
            return "DIFFERS", f"{k}: {a.dtype}{list(a.shape)} committed, {b.dtype}{list(b.shape)} new"
        if np.array_equal(a, b):
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        bound = _fixture_bound(k, a64, metadata.get("precision") == "bf16") if a.dtype.kind == "f" else None
        if bound is None:
            return "DIFFERS", f"{k}: values differ (this tensor must be equal)"
        d = np.abs(a64 - b64)
        if not np.all(np.isfinite(b64)) or np.any(d > bound):
            i = int(np.argmax(np.where(np.isfinite(d), d - bound, np.inf)))
            return "DIFFERS", (f"{k}[{i}]: |diff| {d.flat[i]:.3e} > bound {bound.flat[i]:.3e} "
                               f"(committed {a64.flat[i]:.9g}, new {b64.flat[i]:.9g})")
        share = float(np.max(d / np.maximum(bound, 1e-300)))
        if share > worst:
            worst, worst_name = share, k
    if worst < 0:
        return "same", ""
    return "close", f"nearest its bound: {worst_name} at {worst:.0%} of it"


def emit_fixture(path, tensors, metadata, check):
    """Write (or with check, compare) one generated fixture. The file is saved to path.tmp and read
    back; without check it replaces `path` unless the committed file still holds ('same' or
    'close', compare above: another processor's PyTorch differs in low bits only), which is kept
    rather than churned. Returns (verdict, detail, blob): verdict 'same', 'close', 'DIFFERS'
    (check), 'kept' or 'written'; blob is the bytes now at `path` (with check, the new bytes)."""
    import os
    tmp = path + ".tmp"
    save(tmp, tensors, metadata)
    back, meta_back = load(tmp)
    assert meta_back == metadata and set(back) == set(tensors), path
    for k, v in tensors.items():
        assert np.array_equal(back[k], v.numpy() if hasattr(v, "numpy") else v), k
    with open(tmp, "rb") as f:
        blob = f.read()
    old = None
    if os.path.exists(path):
        with open(path, "rb") as f:
            old = f.read()
    if old == blob:
        os.remove(tmp)
        return "same", "", blob
    verdict, detail = compare(path, tensors, metadata) if old is not None else ("DIFFERS", "no such file")
    if check:
        os.remove(tmp)
        return verdict, detail, blob
    if verdict in ("same", "close"):
        os.remove(tmp)
        return "kept", detail, old
    os.replace(tmp, path)
    return "written", "", blob
