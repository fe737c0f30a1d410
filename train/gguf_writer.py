"""A small GGUF v3 writer (metadata + F32/F16 tensors), written from the
format description: header, key/value pairs, tensor infos, aligned data."""
import struct

import numpy as np

ALIGN = 32
T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_F16 = 0, 1


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(v):
    """(type, bytes) of a metadata value. Ints need a tag: ("u32", 5)."""
    if isinstance(v, tuple):
        tag, x = v
        if tag == "u32":
            return T_U32, struct.pack("<I", x)
        if tag == "f32":
            return T_F32, struct.pack("<f", x)
        if tag == "i32":  # array of int32
            return T_ARR, struct.pack("<IQ", T_I32, len(x)) + \
                np.asarray(x, dtype="<i4").tobytes()
        raise ValueError(tag)
    if isinstance(v, bool):
        return T_BOOL, struct.pack("<B", int(v))
    if isinstance(v, str):
        return T_STR, _str(v)
    if isinstance(v, list):
        assert all(isinstance(s, str) for s in v)
        return T_ARR, struct.pack("<IQ", T_STR, len(v)) + \
            b"".join(_str(s) for s in v)
    raise TypeError(type(v))


def write(path, kv, tensors):
    """kv: {key: value}; tensors: [(name, np.ndarray, ggml_type)] with the
    array in PyTorch layout (rows = output features): GGUF's ne is the
    reversed shape."""
    kv = dict(kv)
    kv["general.alignment"] = ("u32", ALIGN)
    head = struct.pack("<4sIQQ", b"GGUF", 3, len(tensors), len(kv))
    for k, v in kv.items():
        t, b = _value(v)
        head += _str(k) + struct.pack("<I", t) + b
    blobs, off = [], 0
    for name, a, gt in tensors:
        a = np.ascontiguousarray(a, dtype=np.float16 if gt == GGML_F16
                                 else np.float32)
        head += _str(name) + struct.pack("<I", a.ndim)
        head += b"".join(struct.pack("<Q", d) for d in reversed(a.shape))
        head += struct.pack("<IQ", gt, off)
        data = a.astype("<f2" if gt == GGML_F16 else "<f4").tobytes()
        pad = (-len(data)) % ALIGN
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad
    head += b"\0" * ((-len(head)) % ALIGN)
    with open(path, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)


def read(path):
    """The tensors of a GGUF file as write() lays it out (v3, F32/F16):
    {name: np.ndarray in PyTorch layout, as float32}. For continuing
    training from a shipped model; it reads nothing but what write()
    writes and fails on anything else."""
    with open(path, "rb") as f:
        buf = f.read()
    magic, ver, nt, nkv = struct.unpack_from("<4sIQQ", buf, 0)
    if magic != b"GGUF" or ver != 3:
        raise ValueError("%s: not a GGUF v3 file" % path)
    off = 24

    def rstr(o):
        n, = struct.unpack_from("<Q", buf, o)
        return buf[o + 8:o + 8 + n].decode("utf-8"), o + 8 + n

    size = {T_U32: 4, T_I32: 4, T_F32: 4, T_BOOL: 1}
    align = ALIGN
    for _ in range(nkv):
        k, off = rstr(off)
        t, = struct.unpack_from("<I", buf, off)
        off += 4
        if t == T_STR:
            _, off = rstr(off)
        elif t == T_ARR:
            et, n = struct.unpack_from("<IQ", buf, off)
            off += 12
            for _ in range(n):
                if et == T_STR:
                    _, off = rstr(off)
                else:
                    off += size[et]
        elif t in size:
            if k == "general.alignment":
                align, = struct.unpack_from("<I", buf, off)
            off += size[t]
        else:
            raise ValueError("%s: metadata type %d of %s" % (path, t, k))
    infos = []
    for _ in range(nt):
        name, off = rstr(off)
        nd, = struct.unpack_from("<I", buf, off)
        ne = struct.unpack_from("<%dQ" % nd, buf, off + 4)
        gt, to = struct.unpack_from("<IQ", buf, off + 4 + 8 * nd)
        off += 4 + 8 * nd + 12
        if gt not in (GGML_F32, GGML_F16):
            raise ValueError("%s: %s has type %d, not F32/F16" %
                             (path, name, gt))
        infos.append((name, tuple(reversed(ne)), gt, to))
    base = off + (-off) % align
    out = {}
    for name, shape, gt, to in infos:
        dt = np.dtype("<f2" if gt == GGML_F16 else "<f4")
        n = int(np.prod(shape))
        a = np.frombuffer(buf, dt, n, base + to).reshape(shape)
        out[name] = a.astype(np.float32)
    return out
