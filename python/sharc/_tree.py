"""The structure of a framed batch: nested dict/list/tuple of tensors, numbers, str, bytes
and None, as bytes that travel in the frame next to the tensors (sharc.torch).

Tensors, numbers, strings, bytes and the containers are sharc's own tags, so that the
tensors travel as frame tensors (no copy into the structure). Named tuples and dataclasses
travel as their class's name and their fields, each field encoded as any value, and arrive
as themselves. Any other value (a Lhotse CutSet, an arbitrary object) is pickled into a
bytes leaf, as NeMo's broadcaster pickles the whole batch: the receiving ranks trust the
source rank as they do under NeMo, unpickling those leaves and importing the modules that
name the classes of the named tuples and dataclasses. A value that cannot be pickled either
raises on the source, with pickle's own error.

Each value is a one-byte tag and its body, integers little-endian:

  N  None               T / F  True / False
  I  int, i64           J  int beyond i64: u32 length + decimal ASCII
  D  float, f64         S  str: u32 length + UTF-8      B  bytes: u32 length + bytes
  L  list: u32 count + values    U  tuple: u32 count + values
  M  dict: u32 count + (key, value) pairs
  X  tensor: u32 index in the frame's tensors, u8 dtype-name length + the name (torch's,
     "float32"), u8 ndim, ndim x i64 extents
  Q  named tuple: class + u32 count + values
  C  dataclass: class + u32 count + (u16 length + UTF-8 field name, value) pairs
  P  any other value: u32 length + its pickle
A class is u16 length + UTF-8 "module:qualname".
"""
from __future__ import annotations

import dataclasses
import importlib
import pickle
import struct
from typing import Any, Callable, List, Optional, Sequence

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")

MAX_DEPTH = 64


def _class_name(cls: type) -> Optional[str]:
    """"module:qualname" of a class that a receiver can find by that name, else None (a
    class made in a function, or one not reachable as its name says)."""
    module, qualname = getattr(cls, "__module__", None), getattr(cls, "__qualname__", "")
    if not isinstance(module, str) or "<locals>" in qualname:
        return None
    try:
        found = _find_class(module, qualname)
    except (ImportError, AttributeError, ValueError):
        return None
    return f"{module}:{qualname}" if found is cls else None


def _find_class(module: str, qualname: str) -> Any:
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple) and \
        callable(getattr(cls, "_make", None))


def encode(obj: Any, is_tensor: Callable[[Any], bool], add_tensor: Callable[[Any], int],
           dtype_name: Callable[[Any], str]) -> bytes:
    """The structure of `obj` as bytes; each tensor is handed to `add_tensor`, which returns
    its index. Raises TypeError naming the path of a value that cannot be framed."""
    enc = _Encoder(is_tensor, add_tensor, dtype_name)
    enc.put(obj, "", 0)
    return b"".join(enc.out)


class _Encoder:
    # A class rather than a recursive closure: a closure that refers to itself is a
    # reference cycle, which would keep the batch's tensors (and so the reader's batch
    # memory) alive until the cyclic garbage collector runs.
    __slots__ = ("out", "is_tensor", "add_tensor", "dtype_name")

    def __init__(self, is_tensor, add_tensor, dtype_name):
        self.out: List[bytes] = []
        self.is_tensor = is_tensor
        self.add_tensor = add_tensor
        self.dtype_name = dtype_name

    def put(self, o: Any, path: str, depth: int) -> None:
        out, put = self.out, self.put
        if depth > MAX_DEPTH:
            raise ValueError(f"batch nested deeper than {MAX_DEPTH} levels at batch{path}")
        if o is None:
            out.append(b"N")
        elif o is True:
            out.append(b"T")
        elif o is False:
            out.append(b"F")
        elif self.is_tensor(o):
            index = self.add_tensor(o)
            name = self.dtype_name(o).encode()
            shape = tuple(o.shape)
            out.append(b"X" + _U32.pack(index) + bytes((len(name),)) + name + bytes((len(shape),)))
            out.extend(_I64.pack(int(e)) for e in shape)
        elif isinstance(o, int):
            if -(1 << 63) <= o < (1 << 63):
                out.append(b"I" + _I64.pack(int(o)))
            else:
                text = str(int(o)).encode()
                out.append(b"J" + _U32.pack(len(text)) + text)
        elif isinstance(o, float):
            out.append(b"D" + _F64.pack(float(o)))
        elif isinstance(o, str):
            data = o.encode("utf-8", "surrogatepass")
            out.append(b"S" + _U32.pack(len(data)) + data)
        elif isinstance(o, (bytes, bytearray)):
            out.append(b"B" + _U32.pack(len(o)) + bytes(o))
        elif isinstance(o, dict):
            out.append(b"M" + _U32.pack(len(o)))
            for k, v in o.items():
                put(k, f"{path}[{k!r}] (key)", depth + 1)
                put(v, f"{path}[{k!r}]", depth + 1)
        elif isinstance(o, tuple) and _is_namedtuple(type(o)) and self.put_class(b"Q", type(o)):
            out.append(_U32.pack(len(o)))
            for name, v in zip(type(o)._fields, o):
                put(v, f"{path}.{name}", depth + 1)
        elif isinstance(o, (list, tuple)) and not _is_namedtuple(type(o)):
            out.append((b"U" if isinstance(o, tuple) else b"L") + _U32.pack(len(o)))
            for i, v in enumerate(o):
                put(v, f"{path}[{i}]", depth + 1)
        elif dataclasses.is_dataclass(o) and not isinstance(o, type) and self.put_class(b"C", type(o)):
            fields = dataclasses.fields(o)
            out.append(_U32.pack(len(fields)))
            for f in fields:
                name = f.name.encode("utf-8")
                out.append(_U16.pack(len(name)) + name)
                put(getattr(o, f.name), f"{path}.{f.name}", depth + 1)
        else:
            # What the tags cannot type travels pickled; pickle's own error, if it cannot.
            data = pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL)
            out.append(b"P" + _U32.pack(len(data)) + data)

    def put_class(self, tag: bytes, cls: type) -> bool:
        """Write `tag` and the class's name; False (nothing written) when a receiver could
        not find the class by its name, and the value is pickled instead."""
        name = _class_name(cls)
        if name is None:
            return False
        data = name.encode("utf-8")
        self.out.append(tag + _U16.pack(len(data)) + data)
        return True


class _Cursor:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes):
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError(f"batch structure cut short at byte {self.pos} of {len(self.buf)}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b


def decode(buf: bytes, make_tensor: Callable[[int, str, Sequence[int]], Any]) -> Any:
    """The object `encode` described; `make_tensor(index, dtype_name, shape)` gives each
    tensor. Raises ValueError for malformed bytes."""
    dec = _Decoder(buf, make_tensor)
    obj = dec.get(0)
    if dec.c.pos != len(buf):
        raise ValueError(f"{len(buf) - dec.c.pos} stray bytes after the batch structure")
    return obj


class _Decoder:
    # A class for the same reason as _Encoder: no cycle holding the received tensors.
    __slots__ = ("c", "make_tensor")

    def __init__(self, buf: bytes, make_tensor):
        self.c = _Cursor(buf)
        self.make_tensor = make_tensor

    def get_class(self, is_kind: Callable[[Any], bool], kind: str) -> Any:
        c = self.c
        name = c.take(_U16.unpack(c.take(2))[0]).decode("utf-8")
        module, _, qualname = name.partition(":")
        try:
            cls = _find_class(module, qualname)
        except Exception as error:
            raise ValueError(f"cannot find class {name} here: {type(error).__name__}: {error}") from None
        if not (isinstance(cls, type) and is_kind(cls)):
            raise ValueError(f"{name} is not {kind} here")
        return cls

    def get(self, depth: int) -> Any:
        c, get = self.c, self.get
        if depth > MAX_DEPTH:
            raise ValueError(f"batch structure nested deeper than {MAX_DEPTH} levels")
        tag = c.take(1)
        if tag == b"N":
            return None
        if tag == b"T":
            return True
        if tag == b"F":
            return False
        if tag == b"I":
            return _I64.unpack(c.take(8))[0]
        if tag == b"J":
            return int(c.take(_U32.unpack(c.take(4))[0]).decode("ascii"))
        if tag == b"D":
            return _F64.unpack(c.take(8))[0]
        if tag == b"S":
            return c.take(_U32.unpack(c.take(4))[0]).decode("utf-8", "surrogatepass")
        if tag == b"B":
            return bytes(c.take(_U32.unpack(c.take(4))[0]))
        if tag in (b"L", b"U"):
            n = _U32.unpack(c.take(4))[0]
            items = [get(depth + 1) for _ in range(n)]
            return tuple(items) if tag == b"U" else items
        if tag == b"M":
            n = _U32.unpack(c.take(4))[0]
            d = {}
            for _ in range(n):
                k = get(depth + 1)
                d[k] = get(depth + 1)
            return d
        if tag == b"Q":
            cls = self.get_class(_is_namedtuple, "a named tuple")
            n = _U32.unpack(c.take(4))[0]
            return cls._make([get(depth + 1) for _ in range(n)])
        if tag == b"C":
            cls = self.get_class(dataclasses.is_dataclass, "a dataclass")
            n = _U32.unpack(c.take(4))[0]
            obj = cls.__new__(cls)
            for _ in range(n):
                name = c.take(_U16.unpack(c.take(2))[0]).decode("utf-8")
                # As pickle restores an object: its fields set, __init__ not run (frozen too).
                object.__setattr__(obj, name, get(depth + 1))
            return obj
        if tag == b"P":
            data = c.take(_U32.unpack(c.take(4))[0])
            try:
                return pickle.loads(data)
            except Exception as error:
                raise ValueError(f"cannot unpickle a value of the batch: {type(error).__name__}: {error}") from None
        if tag == b"X":
            index = _U32.unpack(c.take(4))[0]
            name = c.take(c.take(1)[0]).decode("ascii")
            ndim = c.take(1)[0]
            shape = [_I64.unpack(c.take(8))[0] for _ in range(ndim)]
            return self.make_tensor(index, name, shape)
        raise ValueError(f"unknown tag {tag!r} at byte {c.pos - 1} of the batch structure")
