# SPDX-License-Identifier: MIT
"""What tern's modules share: struct fields from keyword arguments and back, calls that size
their own buffer, and objects closed by `with` or when collected."""

import ctypes
from ctypes import byref, c_char_p, c_float, c_int32, c_size_t, c_uint32, c_uint64

from ._capi import Status, TernError, api, check

EMBED_FORMATS = {"float32": 0, "int8": 1, "binary": 2}
POOLINGS = ("last", "mean", "first")
STOP_REASONS = ("max_tokens", "end_of_generation", "stop_string", "callback", "context_full")


def _fill(struct, values, what):
    """Sets struct fields from keyword arguments, refusing names the struct lacks (or the
    binding does not offer: caller-owned arenas, the deprecated kv_type) and integers its C
    type cannot hold (ctypes would wrap them silently)."""
    fields = dict(struct._fields_)
    for name, value in values.items():
        kind = fields.get(name)
        if kind is None or name in ("arena_buffer", "arena_buffer_bytes", "kv_type"):
            raise TypeError("unknown %s parameter %r" % (what, name))
        if kind is c_char_p:
            value = None if value is None else str(value).encode()
        elif kind in (c_float, ctypes.c_double):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError("%s parameter %s: a number, not %r" % (what, name, value))
        else:
            if not isinstance(value, int):
                raise TypeError("%s parameter %s: an integer, not %r" % (what, name, value))
            low, high = _INT_RANGES[kind]
            if not low <= value <= high:
                raise TernError(Status.INVALID_ARGUMENT, "%s = %d: out of range [%d, %d]" % (name, value, low, high))
        setattr(struct, name, value)
    return struct


_INT_RANGES = {c_uint32: (0, 2**32 - 1), c_uint64: (0, 2**64 - 1), c_int32: (-2**31, 2**31 - 1),
               ctypes.c_int: (-2**31, 2**31 - 1)}


def _struct_dict(struct):
    out = {}
    for name, _ in struct._fields_:
        value = getattr(struct, name)
        out[name] = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return out


def _sized_call(call, capacity):
    """Runs call(buffer, capacity, byref(size)) again with the size the library asks for
    (TERN_OUT_OF_RANGE), or twice the room when it cannot say. Returns (buffer, size)."""
    size = c_size_t()
    while True:
        buffer = ctypes.create_string_buffer(capacity)
        status = call(buffer, capacity, byref(size))
        if status != Status.OUT_OF_RANGE:
            check(status)
            return buffer, size.value
        if capacity > 1 << 30:
            check(status)
        capacity = max(size.value + 1, capacity * 2)


class _Closable:
    """A C object that close() frees: at the end of a `with` block too, or when collected."""
    _handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _live(self):
        return self._handle is not None

    def __del__(self):
        if api is not None and self._live():  # api is None at interpreter exit
            self.close()
