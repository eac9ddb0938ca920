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

import ctypes
import os
import queue
import threading
import weakref
from ctypes import byref, c_char_p, c_float, c_int, c_int32, c_size_t, c_uint32, c_uint64

from ._capi import (ChatMessage, EmbeddingInfo, EmbedParams, EmbedStats, GenerateStats, LogCallback, LogitBias, LogitHook, MemoryReport, Model_p, ModelInfo,
                    PieceCallback, PlanRow, Session_p, Status, TernError, api, check, library_file)

__version__ = "0.1.0"
__all__ = ["Model", "Session", "Generation", "TernError", "Status", "plan", "json_schema_to_grammar", "version",
           "library_path", "parse_byte_size", "parse_memory_budget", "available_memory", "set_log_level", "set_log_callback"]

LOG_LEVELS = {"debug": 0, "info": 1, "warning": 2, "error": 3, "off": 4}
EMBED_FORMATS = {"float32": 0, "int8": 1, "binary": 2}
POOLINGS = ("last", "mean", "first")
STOP_REASONS = ("max_tokens", "end_of_generation", "stop_string", "callback", "context_full")


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


def _model_params(params):
    params = dict(params)
    budget = params.pop("memory_budget", None)
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, (str, int)):  # 0.5 is not half a byte of budget
            raise TypeError("memory_budget: bytes (an int) or text like \"512M\", not %r" % (budget,))
        params["memory_budget_bytes"] = parse_memory_budget(budget) if isinstance(budget, str) else budget
    return _fill(api.tern_model_default_params(), params, "model")


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


class _Closable:
    """A C object that close() frees: at the end of a `with` block too, or when collected."""
    _handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if self._handle is not None and api is not None:  # api is None at interpreter exit
            self.close()


class Model(_Closable):
    """A loaded bundle (tern_model_load): Model(path, memory_budget="512M", kv_mode="q4", ...).
    The keywords are tern_model_params' fields (n_threads, n_ctx, n_batch, kv_mode,
    kv_sink_tokens, kv_recent_window, kv_eviction, n_sessions, n_draft, memory_budget_bytes),
    and memory_budget: bytes, or text as the CLIs take it ("1.5G", "available-25%").
    Close it (or use `with`) to unmap the bundle now; its sessions close with it."""

    def __init__(self, path, **params):
        p = _model_params(params)
        handle = Model_p()
        self._handle = None
        self._sessions = weakref.WeakSet()  # open sessions (a dropped one closes itself)
        self._lock = threading.Lock()  # session slots and close, across threads
        check(api.tern_model_load(os.fsencode(path), byref(p), byref(handle)))
        self._handle = handle
        self.path = path

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
            api.tern_model_free(handle)

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

    def budget_above_physical(self):
        """(above, physical_bytes): whether the budget this model was loaded with is above the
        machine's physical memory (the load logs a warning then), and that memory (0: unknown)."""
        above, physical = c_int(), c_uint64()
        check(api.tern_model_budget_above_physical(self._h(), byref(above), byref(physical)))
        return bool(above.value), physical.value

    def tokenize(self, text, add_bos=True, parse_special=False):
        data = text.encode("utf-8", "surrogatepass")
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

    def detokenize(self, tokens):
        ids = (c_int32 * len(tokens))(*tokens)
        buffer, size = _sized_call(lambda buf, cap, size: api.tern_detokenize(self._h(), ids, len(ids), buf, cap, size),
                                   8 * len(ids) + 16)
        return buffer.raw[:size].decode("utf-8", "replace")

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
        """Session.embed on a session of its own for this call (see there)."""
        with self.session() as session:
            return session.embed(texts, **options)

    def session(self, n_draft=0, draft_model=None, grammar=None, **sampler):
        """A new conversation in one of the model's session slots (tern_session_create). The
        keywords are the sampler's (temperature, top_k, top_p, min_p, repeat_penalty,
        repeat_last_n, seed, presence_penalty, frequency_penalty); n_draft and draft_model
        turn on speculative decoding; grammar (GBNF text, e.g. json_schema_to_grammar's)
        constrains sampling (the model needs grammar_bytes)."""
        p = api.tern_session_default_params()
        _fill(p.sampler, sampler, "sampler")
        p.n_draft = n_draft
        keep_grammar = None if grammar is None else grammar.encode()
        p.grammar = keep_grammar
        if draft_model is not None:
            p.draft_model = draft_model._h()
        with self._lock:
            handle = Session_p()
            check(api.tern_session_create(self._h(), byref(p), byref(handle)))
            s = Session(self, handle, p.sampler, draft_model)
            self._sessions.add(s)
        if draft_model is not None and draft_model is not self:
            with draft_model._lock:
                draft_model._sessions.add(s)  # freed before its draft model, as tern.h asks
        return s

    def _forget(self, session):
        with self._lock:
            self._sessions.discard(session)


class Session(_Closable):
    """One conversation (tern_session). Use it from one thread at a time, except abort()."""

    def __init__(self, model, handle, sampler, draft_model):
        self.model = model
        self._handle = handle
        self._sampler = sampler
        self._draft_model = draft_model
        self._generation = lambda: None  # a weak reference to the last Generation
        self._hook = None
        self._hook_error = None
        self._chat_fed = ""  # the rendered conversation the session holds (chat())

    def _h(self, busy_ok=False):
        if self._handle is None:
            raise TernError(Status.INVALID_STATE, "the session is closed")
        running = self._generation()
        if not busy_ok and running is not None and running._thread is not None and not running._finished:
            raise TernError(Status.INVALID_STATE, "a generation is running on this session: finish or close it first")
        return self._handle

    def close(self):
        running = self._generation()
        if running is not None:
            running.close()
        if self._handle is not None:
            handle, self._handle = self._handle, None
            api.tern_session_free(handle)
            for m in (self.model, self._draft_model):
                if m is not None:
                    m._forget(self)

    def set_grammar(self, grammar):
        """Constrains sampling to a GBNF grammar from now on (tern_session_set_grammar); None
        removes it."""
        data = None if grammar is None else grammar.encode()
        check(api.tern_session_set_grammar(self._h(), data, 0 if data is None else len(data)))

    def set_sampler(self, **sampler):
        """Changes the sampler from the next token on (temperature, top_k, seed, ...)."""
        p = type(self._sampler).from_buffer_copy(self._sampler)
        _fill(p, sampler, "sampler")
        check(api.tern_session_set_sampler(self._h(), byref(p)))
        self._sampler = p

    def generate(self, prompt, max_tokens=None, *, stop=None, add_bos=None, parse_special=False, **sampler):
        """Generates after `prompt` (tern_generate): an iterator of the new text, in pieces of
        whole UTF-8 characters, as they come. Sampler keywords (temperature=..., seed=...)
        change the session's sampler first. stop: up to 8 strings that end generation.
        The Generation's .stats says why it stopped; breaking out of the loop stops it."""
        if sampler:
            wanted = _fill(type(self._sampler).from_buffer_copy(self._sampler), sampler, "sampler")
            if bytes(wanted) != bytes(self._sampler):  # the same again would restart its random stream
                self.set_sampler(**sampler)
        params = api.tern_generate_default_params()
        if max_tokens is not None:
            params.max_new_tokens = max_tokens
        if add_bos is not None:
            params.add_bos = int(add_bos)
        params.parse_special = int(parse_special)
        stops = None
        if stop:
            stop = [stop] if isinstance(stop, str) else list(stop)
            stops = (c_char_p * len(stop))(*[s.encode() for s in stop])
            params.stop_strings = stops
            params.n_stop_strings = len(stop)
        data = prompt.encode("utf-8", "surrogatepass")
        self._h()
        generation = Generation(self, data, params, stops)
        self._generation = weakref.ref(generation)
        return generation

    def chat(self, messages, max_tokens=None, *, stop=None, **sampler):
        """The assistant's reply to a conversation (the whole list of messages so far, as for
        Model.apply_chat), streamed like generate(). The session keeps what it has run: when
        the conversation continues the previous one, only the new turns are fed."""
        info = self.model.info
        rendered = self.model.apply_chat(messages, add_assistant_prefix=True)
        if rendered.startswith(self._chat_fed) and self._chat_fed:
            turn = rendered[len(self._chat_fed):]
        else:
            turn = rendered
            if self._chat_fed or self.position > 0:
                self.reset()
        stops = [] if stop is None else ([stop] if isinstance(stop, str) else list(stop))
        if info["chat_stop"]:
            stops.append(info["chat_stop"])
        self._chat_fed = ""  # unknown until the reply is complete
        g = self.generate(turn, max_tokens, stop=stops or None, add_bos=False, parse_special=True, **sampler)

        def finished(reply, stats):
            fed = rendered + reply
            if stats["stop_reason"] == "end_of_generation":
                fed = self.model.apply_chat(list(messages) + [{"role": "assistant", "content": reply}],
                                            add_assistant_prefix=False)
            self._chat_fed = fed
        g._on_finish = finished
        return g

    def abort(self):
        """Stops a running prefill/decode/generate with TernError(ABORTED); any thread may call
        it. The request stays until clear_abort() or reset()."""
        check(api.tern_session_request_abort(self._h(busy_ok=True)))

    def clear_abort(self):
        check(api.tern_session_clear_abort(self._h(busy_ok=True)))

    def reset(self):
        """Forgets the conversation (and an abort request)."""
        check(api.tern_session_reset(self._h()))
        self._chat_fed = ""

    @property
    def position(self):
        out = c_uint32()
        check(api.tern_session_position(self._h(busy_ok=True), byref(out)))
        return out.value

    def history(self):
        """The token ids the session holds, oldest first."""
        count = c_size_t()
        status = api.tern_session_history(self._h(), None, 0, byref(count))
        if status != Status.OUT_OF_RANGE:
            check(status)
        tokens = (c_int32 * count.value)()
        check(api.tern_session_history(self._h(), tokens, count.value, byref(count)))
        return tokens[:count.value]

    def truncate(self, n_tokens):
        """Keeps the first n_tokens positions (tern_session_truncate)."""
        check(api.tern_session_truncate(self._h(), n_tokens))
        self._chat_fed = ""

    def prefill(self, tokens):
        ids = (c_int32 * len(tokens))(*tokens)
        check(api.tern_prefill(self._h(), ids, len(ids)))

    def decode(self, token):
        check(api.tern_decode(self._h(), token))

    def sample(self):
        out = c_int32()
        check(api.tern_sample(self._h(), byref(out)))
        return out.value

    def logits(self):
        """The last token's logits: a numpy float32 array when numpy is installed, else a list."""
        pointer = ctypes.POINTER(c_float)()
        n = c_size_t()
        check(api.tern_get_logits(self._h(), byref(pointer), byref(n)))
        try:
            import numpy
        except ImportError:
            return pointer[:n.value]
        return numpy.ctypeslib.as_array(pointer, shape=(n.value,)).copy()

    def embed(self, texts, *, dimensions=0, format="float32", prompt=None, instruction=None, truncate=False):
        """Vectors of an embedding model's texts (tern_embed), one row per text, batched through
        the model in one call. texts: a string or a list of strings. dimensions: the first D
        (re-normalized), 0 for all. format: "float32" (floats), "int8" (returns the int8 rows and
        each row's scale: row * scale is the vector) or "binary" (sign bits, ceil(D/8) bytes a
        row). prompt: a stored prompt's name (None: the bundle's default, "": none);
        instruction: text put in front of every text instead. truncate: cut texts longer than
        the context instead of failing. numpy arrays when numpy is installed, else lists."""
        if isinstance(texts, str):
            texts = [texts]
        if format not in EMBED_FORMATS:
            raise TernError(Status.INVALID_ARGUMENT, "format %r: one of %s" % (format, ", ".join(EMBED_FORMATS)))
        p = api.tern_embed_default_params()
        _fill(p, {"dimensions": dimensions, "prompt_name": prompt, "instruction": instruction,
                  "truncate": int(bool(truncate))}, "embed")
        p.format = EMBED_FORMATS[format]
        data = [t.encode("utf-8", "surrogatepass") for t in texts]
        n = len(data)
        if not dimensions:  # the model's (0 for a generative model, which tern_embed refuses)
            info = EmbeddingInfo()
            check(api.tern_model_get_embedding_info(self.model._h(), byref(info)))
        d = dimensions or info.dimensions
        row = api.tern_embed_row_bytes(p.format, d) if d else 0
        out = ctypes.create_string_buffer(max(1, n * row))
        scales = (c_float * max(1, n))()
        stats = EmbedStats()
        check(api.tern_embed(self._h(), (c_char_p * n)(*data), (c_size_t * n)(*[len(b) for b in data]), n, byref(p),
                             out, n * row, scales, byref(stats)))
        self.embed_stats = _struct_dict(stats)
        raw = out.raw[:n * row]
        try:
            import numpy
        except ImportError:
            numpy = None
        if numpy is not None:
            kind = {"float32": numpy.float32, "int8": numpy.int8, "binary": numpy.uint8}[format]
            rows = numpy.frombuffer(raw, dtype=kind).reshape(n, -1).copy()
            return (rows, numpy.array(scales[:n], dtype=numpy.float32)) if format == "int8" else rows
        import array
        code = {"float32": "f", "int8": "b", "binary": "B"}[format]
        flat = array.array(code, raw).tolist()
        width = len(flat) // n if n else 0
        rows = [flat[i * width:(i + 1) * width] for i in range(n)]
        return (rows, list(scales[:n])) if format == "int8" else rows

    def save_state(self):
        """The session's state as bytes: KV cache, position, history, sampler."""
        size = c_size_t()
        check(api.tern_session_state_size(self._h(), byref(size)))
        buffer, used = _sized_call(lambda buf, cap, out: api.tern_session_state_save(self._h(), buf, cap, out),
                                   max(size.value, 1))
        return buffer.raw[:used]

    def load_state(self, data):
        """Restores save_state()'s bytes (same bundle and KV layout); continues exactly."""
        data = bytes(data)
        check(api.tern_session_state_load(self._h(), data, len(data)))
        self._chat_fed = ""

    def save_state_file(self, path):
        """Writes the state atomically (a temporary, then rename)."""
        check(api.tern_session_state_save_file(self._h(), os.fsencode(path)))

    def load_state_file(self, path):
        check(api.tern_session_state_load_file(self._h(), os.fsencode(path)))
        self._chat_fed = ""

    def set_logit_bias(self, biases):
        """{token id: bias} added to the logits before sampling (-inf bans); {} removes it."""
        entries = (LogitBias * len(biases))(*[LogitBias(int(t), float(b)) for t, b in dict(biases).items()])
        check(api.tern_session_set_logit_bias(self._h(), entries, len(entries)))

    def set_logit_hook(self, function):
        """function(logits, history) may change the logits (a numpy array when numpy is
        installed, else a ctypes array) before each token is picked; None removes it. An
        exception aborts the generation and is raised from it."""
        if function is None:
            check(api.tern_session_set_logit_hook(self._h(), LogitHook(), None))  # LogitHook(): NULL
            self._hook = None
            return
        try:
            import numpy
        except ImportError:
            numpy = None

        def hook(logits, n_vocab, history, n_history, _):
            try:
                if numpy is not None:
                    function(numpy.ctypeslib.as_array(logits, shape=(n_vocab,)),
                             numpy.ctypeslib.as_array(history, shape=(n_history,)) if n_history else numpy.empty(0, "i4"))
                else:
                    function((c_float * n_vocab).from_address(ctypes.addressof(logits.contents)), history[:n_history])
            except BaseException as e:  # noqa: B036 - carried to the caller's thread
                self._hook_error = e
                api.tern_session_request_abort(self._handle)
        c_hook = LogitHook(hook)
        check(api.tern_session_set_logit_hook(self._h(), c_hook, None))
        self._hook = c_hook


class _Run:
    """What a generation's worker thread holds: not the Generation itself, so a Generation the
    caller drops (a `break` out of the loop) is collected, which stops the run."""

    def __init__(self, handle, prompt, params, keep):
        self.handle = handle
        self.prompt = prompt
        self.params = params
        self.keep = keep  # the stop strings' C array
        self.queue = queue.SimpleQueue()
        self.stop = False

    def __call__(self):
        callback = PieceCallback(self.piece)
        stats = GenerateStats()
        status = api.tern_generate(self.handle, self.prompt, len(self.prompt), byref(self.params), callback, None,
                                   byref(stats))
        error = None
        if status != 0:
            error = TernError(status, api.tern_last_error_message().decode("utf-8", "replace"))
        self.queue.put((stats, error))

    def piece(self, text, size, _):
        if self.stop:
            return 1
        self.queue.put(ctypes.string_at(text, size).decode("utf-8", "replace"))
        return 0


class Generation:
    """The text of one Session.generate() call, piece by piece. tern_generate runs on a worker
    thread (the GIL released) while the caller iterates; .stats (tern_generate_stats as a
    dict, stop_reason by name) is set once it ended. Breaking out of the loop, close(), or
    dropping the object stops it."""

    def __init__(self, session, prompt, params, keep):
        self._session = session
        self._run = _Run(session._handle, prompt, params, keep)
        self._thread = None
        self._finished = False
        self._pieces = []
        self._on_finish = None
        self.stats = None

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tern-generate", daemon=True)
            self._thread.start()
        item = self._run.queue.get()
        if isinstance(item, str):
            self._pieces.append(item)
            return item
        stats, error = item
        self._thread.join()
        self._finished = True
        self.stats = _struct_dict(stats)
        reason = stats.stop_reason
        self.stats["stop_reason"] = STOP_REASONS[reason] if 0 <= reason < len(STOP_REASONS) else reason
        hook_error, self._session._hook_error = self._session._hook_error, None
        if hook_error is not None:
            api.tern_session_clear_abort(self._run.handle)
            raise hook_error
        if error is not None:
            raise error
        if self._on_finish is not None:
            self._on_finish("".join(self._pieces), self.stats)
        raise StopIteration

    def text(self):
        """The rest of the text, whole."""
        return "".join(self)

    def close(self):
        """Stops the generation if it runs, and waits for it."""
        if self._finished:
            return
        self._finished = True
        if self._thread is None:
            return
        self._run.stop = True
        api.tern_session_request_abort(self._run.handle)
        while not isinstance(self._run.queue.get(), tuple):
            pass
        self._thread.join()
        api.tern_session_clear_abort(self._run.handle)

    def __del__(self):
        if getattr(self, "_finished", True) is False and api is not None:
            self.close()
