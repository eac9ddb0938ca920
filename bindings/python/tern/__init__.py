# SPDX-License-Identifier: MIT
"""Tern for Python: BitNet b1.58 (ternary) language models on the CPU, through libtern's C API
with ctypes (no compiled extension; tern/_capi.py declares the C functions).

    import tern
    with tern.Model("model.tern", memory_budget="512M") as model:
        session = model.session(temperature=0.7, seed=42)
        for piece in session.generate("It is a truth", max_tokens=48):
            print(piece, end="", flush=True)

Every failure is a TernError carrying the runtime's status (tern.Status) and message. Calls
into the library release the GIL: sessions of one model generate on several threads at once,
and Session.abort() works from any thread.
"""

import os
import threading
import weakref
from ctypes import byref, c_char_p, c_int, c_int32, c_size_t, c_uint64

from ._capi import (ChatMessage, EmbeddingInfo, LogCallback, MemoryReport, Model_p, ModelInfo, PlanRow, Status,
                    TernError, WeightsPages, api, check, library_file)
from ._common import EMBED_FORMATS, POOLINGS, STOP_REASONS, _Closable, _fill, _sized_call, _struct_dict  # noqa: F401
from ._pool import Pool
from ._session import Generation, Session, _embed
from .llama import Llama, RequestError

__version__ = "0.1.0"
__all__ = ["Llama", "Model", "Session", "Generation", "TernError", "RequestError", "Status", "plan", "json_schema_to_grammar", "version",
           "library_path", "parse_byte_size", "parse_memory_budget", "available_memory", "set_log_level", "set_log_callback"]

LOG_LEVELS = {"debug": 0, "info": 1, "warning": 2, "error": 3, "off": 4}


def version():
    """libtern's version (tern_version())."""
    return api.tern_version().decode()


def library_path():
    """The libtern file this process loaded."""
    return library_file


def parse_byte_size(text):
    """"512M", "1.5G", "4096K", "123456" as bytes (K/M/G are powers of 1024)."""
    out = c_uint64()
    check(api.tern_parse_byte_size(text.encode(), byref(out)))
    return out.value


def parse_memory_budget(text):
    """A byte size, or "available" / "available-25%" (what the system can still give)."""
    out = c_uint64()
    check(api.tern_parse_memory_budget(text.encode(), byref(out)))
    return out.value


def available_memory():
    """Bytes this process could still get (MemAvailable, capped by the cgroup's limit)."""
    out = c_uint64()
    check(api.tern_available_memory(byref(out)))
    return out.value


def set_log_level(level):
    """"debug", "info", "warning", "error" or "off" (or the C value)."""
    api.tern_set_log_level(LOG_LEVELS[level] if isinstance(level, str) else int(level))


_log_callback = None  # the C callback must outlive the registration


def set_log_callback(function):
    """function(level: int, message: str) receives the library's log lines; None: stderr again.
    Call it before other threads use the library (tern.h)."""
    global _log_callback
    if function is None:
        api.tern_set_log_callback(LogCallback(), None)  # LogCallback(): NULL, back to stderr
        _log_callback = None
        return
    _log_callback = LogCallback(lambda level, message, _: function(level, message.decode("utf-8", "replace")))
    api.tern_set_log_callback(_log_callback, None)


def _model_params(params):
    params = dict(params)
    budget = params.pop("memory_budget", None)
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, (str, int)):  # 0.5 is not half a byte of budget
            raise TypeError("memory_budget: bytes (an int) or text like \"512M\", not %r" % (budget,))
        params["memory_budget_bytes"] = parse_memory_budget(budget) if isinstance(budget, str) else budget
    return _fill(api.tern_model_default_params(), params, "model")


def plan(path, kv_modes=None, **params):
    """What loading `path` would take, per KV mode, without loading it (tern_plan): a list of
    dicts with tern-plan --json's keys and numbers. Parameters as for Model: memory_budget
    (the largest context within it) or n_ctx (the budget that context needs), n_sessions, ..."""
    p = _model_params(params)
    modes = None
    n_modes = 0
    if kv_modes is not None:
        n_modes = len(kv_modes)
        modes = (c_char_p * n_modes)(*[m.encode() for m in kv_modes])
    count = c_size_t()
    status = api.tern_plan(os.fsencode(path), byref(p), modes, n_modes, None, 0, byref(count))
    if status != Status.OUT_OF_RANGE:
        check(status)
    rows = (PlanRow * count.value)()
    check(api.tern_plan(os.fsencode(path), byref(p), modes, n_modes, rows, count.value, byref(count)))
    out = []
    for row in rows:
        d = _struct_dict(row)
        d["status"] = Status(row.status).name
        out.append(d)
    return out


def json_schema_to_grammar(schema):
    """The GBNF grammar of JSON text valid against `schema` (a dict, or JSON text), for
    Model.session(grammar=...) or Session.set_grammar(). A keyword the runtime cannot honour
    is a TernError (UNSUPPORTED_SCHEMA) naming it."""
    if not isinstance(schema, (str, bytes)):
        import json
        schema = json.dumps(schema)
    data = schema.encode() if isinstance(schema, str) else schema
    buffer, size = _sized_call(lambda buf, cap, size: api.tern_json_schema_to_grammar(data, len(data), buf, cap, size),
                               4096)
    return buffer.raw[:size].decode()


class Model(_Closable):
    """A loaded bundle (tern_model_load): Model(path, memory_budget="512M", kv_mode="q4", ...).
    The keywords are tern_model_params' fields (n_threads, n_ctx, n_batch, kv_mode,
    kv_sink_tokens, kv_recent_window, kv_eviction, n_sessions, n_draft, grammar_bytes,
    weights_pages, memory_budget_bytes), and memory_budget: bytes, or text as the CLIs take it ("1.5G",
    "available-25%"). Close it (or use `with`) to unmap the bundle now; its sessions close
    with it.

    The model's n_sessions slots are shared by everything that runs on it (tern/_pool.py): an
    open Session that is not running anything is swapped out (its state kept as bytes) when
    another caller needs its slot, and swapped back in on its next call. A caller finding
    every slot running waits for one, at most slot_timeout seconds (None: as long as it
    takes), then gets a TernError (INVALID_STATE)."""

    def __init__(self, path, slot_timeout=None, **params):
        p = _model_params(params)
        handle = Model_p()
        self._handle = None
        self._sessions = weakref.WeakSet()  # open sessions (a dropped one closes itself)
        self._lock = threading.Lock()  # the session set and close, across threads
        check(api.tern_model_load(os.fsencode(path), byref(p), byref(handle)))
        self._handle = handle
        self.path = path
        info = ModelInfo()
        check(api.tern_model_get_info(handle, byref(info)))
        self._pool = Pool(handle, info.n_sessions, slot_timeout, os.fspath(path))
        embedding = EmbeddingInfo()
        check(api.tern_model_get_embedding_info(handle, byref(embedding)))
        self._embeds = embedding.dimensions > 0

    def _h(self):
        if self._handle is None:
            raise TernError(Status.INVALID_STATE, "the model is closed")
        return self._handle

    def close(self):
        with self._lock:
            sessions, self._sessions = list(self._sessions), weakref.WeakSet()
        for s in sessions:
            s.close()
        if self._handle is not None:
            handle, self._handle = self._handle, None
            self._pool.close()
            api.tern_model_free(handle)

    @property
    def slot_timeout(self):
        """Seconds a call waits for a free session slot (None: no limit)."""
        return self._pool.timeout

    @slot_timeout.setter
    def slot_timeout(self, seconds):
        self._pool.timeout = seconds

    @property
    def info(self):
        """tern_model_info as a dict (vocab_size, context_tokens, chat_format, ...)."""
        info = ModelInfo()
        check(api.tern_model_get_info(self._h(), byref(info)))
        return _struct_dict(info)

    def memory_report(self):
        """Where the memory goes (tern_memory_report), bytes by purpose."""
        report = MemoryReport()
        check(api.tern_memory_report_get(self._h(), byref(report)))
        return _struct_dict(report)

    def weights_pages(self):
        """The weights' pages (tern_model_weights_pages): mode, what the load did, and the bytes
        the kernel maps with large pages now (large_bytes of bytes)."""
        pages = WeightsPages()
        check(api.tern_model_weights_pages(self._h(), byref(pages)))
        return _struct_dict(pages)

    @property
    def plan(self):
        """The memory plan the load made, as a dict (tern_memory_report): context_tokens, kv_mode,
        planned_total_bytes against budget_bytes (0: none), session_bytes, kv_bytes_per_token, ...
        Without memory_budget and n_ctx the context is the model's, at most 4096 tokens (8192
        for an embedding model), in an fp16 cache; the load logs this plan at debug level."""
        return self.memory_report()

    def budget_above_physical(self):
        """(above, physical_bytes): whether the budget this model was loaded with is above the
        machine's physical memory (the load logs a warning then), and that memory (0: unknown)."""
        above, physical = c_int(), c_uint64()
        check(api.tern_model_budget_above_physical(self._h(), byref(above), byref(physical)))
        return bool(above.value), physical.value

    def tokenize(self, text, add_bos=True, parse_special=False):
        data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        capacity = len(data) + 2
        count = c_size_t()
        while True:
            tokens = (c_int32 * capacity)()
            status = api.tern_tokenize(self._h(), data, len(data), int(add_bos), int(parse_special), tokens, capacity,
                                       byref(count))
            if status != Status.OUT_OF_RANGE:
                check(status)
                return tokens[:count.value]
            capacity = count.value

    def detokenize_bytes(self, tokens):
        """The bytes of token ids (control tokens skipped)."""
        ids = (c_int32 * len(tokens))(*tokens)
        buffer, size = _sized_call(lambda buf, cap, size: api.tern_detokenize(self._h(), ids, len(ids), buf, cap, size),
                                   8 * len(ids) + 16)
        return buffer.raw[:size]

    def detokenize(self, tokens):
        return self.detokenize_bytes(tokens).decode("utf-8", "replace")

    def apply_chat(self, messages, add_assistant_prefix=True):
        """The conversation in the bundle's chat format (tern_chat_apply): messages are dicts
        with "role" ("system", "user", "assistant") and "content", or (role, content) pairs.
        Generate from it with add_bos=False, parse_special=True (Session.chat does)."""
        pairs = [(m["role"], m["content"]) if isinstance(m, dict) else tuple(m) for m in messages]
        encoded = [(r.encode("utf-8", "surrogatepass"), c.encode("utf-8", "surrogatepass")) for r, c in pairs]
        array = (ChatMessage * len(encoded))(*[ChatMessage(r, c) for r, c in encoded])
        buffer, size = _sized_call(
            lambda buf, cap, size: api.tern_chat_apply(self._h(), array, len(encoded), int(add_assistant_prefix), buf,
                                                       cap, size),
            4096)
        return buffer.raw[:size].decode("utf-8", "replace")

    @property
    def embedding_info(self):
        """An embedding bundle's vectors: dimensions (0 for a generative model), pooling,
        normalized, prompts (name: text, stored in the bundle) and default_prompt."""
        info = EmbeddingInfo()
        check(api.tern_model_get_embedding_info(self._h(), byref(info)))
        prompts = {}
        for i in range(info.n_prompts):
            name, text = c_char_p(), c_char_p()
            check(api.tern_model_embedding_prompt(self._h(), i, byref(name), byref(text)))
            prompts[name.value.decode()] = text.value.decode()
        return {"dimensions": info.dimensions, "pooling": POOLINGS[info.pooling], "normalized": bool(info.normalized),
                "prompts": prompts,
                "default_prompt": None if info.default_prompt is None else info.default_prompt.decode()}

    def embed(self, texts, **options):
        """Session.embed (see there) on a free session slot, for this call only."""
        with self._pool.lease() as handle:
            vectors, self.embed_stats = _embed(self, handle, texts, **options)
        return vectors

    def session(self, n_draft=0, draft_model=None, grammar=None, **sampler):
        """A new conversation (a Session holding one of the model's session slots; see Model).
        The keywords are the sampler's (temperature, top_k, top_p, min_p, repeat_penalty,
        repeat_last_n, seed, presence_penalty, frequency_penalty); n_draft and draft_model
        turn on speculative decoding (the session also takes a slot of draft_model while it is
        swapped in); grammar (GBNF text, e.g. json_schema_to_grammar's) constrains sampling."""
        p = api.tern_sampler_default_params()
        _fill(p, sampler, "sampler")
        s = Session(self, p, n_draft, draft_model, None if grammar is None else grammar.encode())
        try:
            self._pool.release(self._pool.acquire(owner=s))  # takes a slot: a bad setting fails here
        except BaseException:
            s._closed = True
            raise
        with self._lock:
            self._sessions.add(s)
        if draft_model is not None and draft_model is not self:
            with draft_model._lock:
                draft_model._sessions.add(s)  # freed before its draft model, as tern.h asks
        return s

    def _forget(self, session):
        with self._lock:
            self._sessions.discard(session)
