# SPDX-License-Identifier: MIT
"""Session (a stateful conversation in one of the model's session slots) and Generation (the
iterator its generate() and chat() return)."""

import contextlib
import ctypes
import os
import queue
import threading
import weakref
from ctypes import byref, c_char_p, c_float, c_int32, c_size_t, c_uint32

from ._capi import (EmbeddingInfo, EmbedStats, GenerateStats, LogitBias, LogitHook, PieceCallback, Status, TernError,
                    api, check)
from ._common import EMBED_FORMATS, STOP_REASONS, _Closable, _fill, _sized_call, _struct_dict


def _embed(model, handle, texts, *, dimensions=0, format="float32", prompt=None, instruction=None, truncate=False):
    """tern_embed on `handle`: (vectors, stats). See Session.embed."""
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
        check(api.tern_model_get_embedding_info(model._h(), byref(info)))
    d = dimensions or info.dimensions
    row = api.tern_embed_row_bytes(p.format, d) if d else 0
    out = ctypes.create_string_buffer(max(1, n * row))
    scales = (c_float * max(1, n))()
    stats = EmbedStats()
    check(api.tern_embed(handle, (c_char_p * n)(*data), (c_size_t * n)(*[len(b) for b in data]), n, byref(p), out,
                         n * row, scales, byref(stats)))
    raw = out.raw[:n * row]
    try:
        import numpy
    except ImportError:
        numpy = None
    if numpy is not None:
        kind = {"float32": numpy.float32, "int8": numpy.int8, "binary": numpy.uint8}[format]
        rows = numpy.frombuffer(raw, dtype=kind).reshape(n, -1).copy()
        vectors = (rows, numpy.array(scales[:n], dtype=numpy.float32)) if format == "int8" else rows
    else:
        import array
        code = {"float32": "f", "int8": "b", "binary": "B"}[format]
        flat = array.array(code, raw).tolist()
        width = len(flat) // n if n else 0
        rows = [flat[i * width:(i + 1) * width] for i in range(n)]
        vectors = (rows, list(scales[:n])) if format == "int8" else rows
    return vectors, _struct_dict(stats)


class Session(_Closable):
    """One conversation (tern_session) in a slot of the model's pool. Use it from one thread at
    a time, except abort(). While it runs nothing, another caller may swap it out of its slot
    (its state saved as bytes) and its next call swaps it back in: it continues exactly, its
    sampler's random state, grammar, logit bias, hook and drafting included (a grammar
    restarts, as after load_state). While swapped out it holds no slot of its draft model."""

    def __init__(self, model, sampler, n_draft, draft_model, grammar):
        self.model = model
        self._pool = model._pool
        self._embeds = model._embeds
        self._closed = False
        self._slot = None  # the pool's Slot while resident (changed under the pool's lock)
        self._saved = None  # the state while swapped out
        self._saved_position = 0
        self._fresh = True  # never resident yet
        self._sampler = sampler
        self._n_draft = n_draft
        self._draft_model = draft_model
        self._grammar = grammar
        self._bias = None  # the LogitBias array set
        self._abort_requested = False
        self._generation = lambda: None  # a weak reference to the last Generation
        self._hook = None
        self._hook_error = None
        self._chat_fed = ""  # the rendered conversation the session holds (chat())

    def _live(self):
        return not self._closed

    # ---- the slot ----
    def _swap_in(self, slot):
        """Called by the pool with the slot busy: puts this session's state and settings on it."""
        h = slot.handle
        if self._embeds:  # an embedding session holds no state between calls
            self._fresh = False
            return
        draft = self._draft_model
        if draft is not None:
            draft._pool.reserve()  # a slot of the draft model, taken in C by set_draft_model below
        try:
            if self._fresh:
                check(api.tern_session_reset(h))
                check(api.tern_session_set_sampler(h, byref(self._sampler)))
            else:
                check(api.tern_session_state_load(h, self._saved, len(self._saved)))
            # What another user of the slot set, or this session sets (nothing else: an
            # embedding model's session takes no grammar, bias or hook).
            if self._grammar is not None or "grammar" in slot.tainted:
                check(api.tern_session_set_grammar(h, self._grammar,
                                                   0 if self._grammar is None else len(self._grammar)))
            if self._bias is not None or "bias" in slot.tainted:
                check(api.tern_session_set_logit_bias(h, self._bias, 0 if self._bias is None else len(self._bias)))
            if self._hook is not None:
                check(api.tern_session_set_logit_hook(h, self._hook, None))
            if self._n_draft:
                check(api.tern_session_set_draft(h, self._n_draft))
            if draft is not None:
                check(api.tern_session_set_draft_model(h, draft._h()))
        except BaseException:
            if draft is not None:
                draft._pool.unreserve()
            raise
        slot.tainted = set()  # until this session leaves (_strip)
        self._fresh = False
        self._saved = None
        if self._abort_requested:
            check(api.tern_session_request_abort(h))

    def _swap_out(self, slot):
        """Called by the pool, under its lock, with the slot idle: keeps the state as bytes and
        takes this session's settings off the slot."""
        h = slot.handle
        if not self._embeds:
            position, size = c_uint32(), c_size_t()
            check(api.tern_session_position(h, byref(position)))
            check(api.tern_session_state_size(h, byref(size)))
            buffer, used = _sized_call(lambda buf, cap, out: api.tern_session_state_save(h, buf, cap, out),
                                       max(size.value, 1))
            self._saved, self._saved_position = buffer.raw[:used], position.value
            self._strip(slot)
        slot.owner = None
        self._slot = None

    def _strip(self, slot):
        """Takes the hook and drafting (and the draft model's slot) off the slot; says what the
        next user must replace."""
        h = slot.handle
        slot.tainted = {name for name, value in (("grammar", self._grammar), ("bias", self._bias)) if value is not None}
        if self._hook is not None:
            api.tern_session_set_logit_hook(h, LogitHook(), None)
        if self._n_draft:
            api.tern_session_set_draft(h, 0)
        if self._draft_model is not None:
            api.tern_session_set_draft_model(h, None)
            self._draft_model._pool.unreserve()

    def _check(self, busy_ok=False):
        if self._closed:
            raise TernError(Status.INVALID_STATE, "the session is closed")
        running = self._generation()
        if not busy_ok and running is not None and running._thread is not None and not running._finished:
            raise TernError(Status.INVALID_STATE, "a generation is running on this session: finish or close it first")

    def _acquire(self):
        self._check()
        return self._pool.acquire(owner=self)

    @contextlib.contextmanager
    def _using(self):
        """`with self._using() as handle:` the session resident in a slot for one call."""
        slot = self._acquire()
        try:
            yield slot.handle
        finally:
            self._pool.release(slot)

    def close(self):
        if self._closed:
            return
        running = self._generation()
        if running is not None:
            running.close()
        self._closed = True
        if not self._pool._closed:
            with self._pool._cond:
                slot = self._slot
                if slot is not None:
                    slot.busy = True  # nothing runs on it now (the generation was closed)
            if slot is not None:
                if not self._embeds:
                    self._strip(slot)
                self._pool.disown(self)
                self._pool.release(slot)
        self._saved = None
        for m in (self.model, self._draft_model):
            if m is not None:
                m._forget(self)

    # ---- settings ----
    def set_grammar(self, grammar):
        """Constrains sampling to a GBNF grammar from now on (tern_session_set_grammar); None
        removes it."""
        data = None if grammar is None else grammar.encode()
        with self._using() as h:
            status = api.tern_session_set_grammar(h, data, 0 if data is None else len(data))
            self._grammar = data if status == 0 else None  # a failed call leaves no grammar
            check(status)

    def set_sampler(self, **sampler):
        """Changes the sampler from the next token on (temperature, top_k, seed, ...)."""
        p = type(self._sampler).from_buffer_copy(self._sampler)
        _fill(p, sampler, "sampler")
        with self._using() as h:
            check(api.tern_session_set_sampler(h, byref(p)))
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
        self._check()
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
        self._check(busy_ok=True)
        with self._pool._cond:
            self._abort_requested = True
            if self._slot is not None:
                check(api.tern_session_request_abort(self._slot.handle))

    def clear_abort(self):
        self._check(busy_ok=True)
        with self._pool._cond:
            self._abort_requested = False
            if self._slot is not None:
                check(api.tern_session_clear_abort(self._slot.handle))

    def reset(self):
        """Forgets the conversation (and an abort request)."""
        with self._using() as h:
            check(api.tern_session_reset(h))
            self._abort_requested = False
        self._chat_fed = ""

    @property
    def position(self):
        self._check(busy_ok=True)
        with self._pool._cond:
            if self._slot is None:
                return self._saved_position
            out = c_uint32()
            check(api.tern_session_position(self._slot.handle, byref(out)))
            return out.value

    def history(self):
        """The token ids the session holds, oldest first."""
        with self._using() as h:
            count = c_size_t()
            status = api.tern_session_history(h, None, 0, byref(count))
            if status != Status.OUT_OF_RANGE:
                check(status)
            tokens = (c_int32 * count.value)()
            check(api.tern_session_history(h, tokens, count.value, byref(count)))
            return tokens[:count.value]

    def truncate(self, n_tokens):
        """Keeps the first n_tokens positions (tern_session_truncate)."""
        with self._using() as h:
            check(api.tern_session_truncate(h, n_tokens))
        self._chat_fed = ""

    def prefill(self, tokens):
        ids = (c_int32 * len(tokens))(*tokens)
        with self._using() as h:
            check(api.tern_prefill(h, ids, len(ids)))

    def decode(self, token):
        with self._using() as h:
            check(api.tern_decode(h, token))

    def sample(self):
        out = c_int32()
        with self._using() as h:
            check(api.tern_sample(h, byref(out)))
        return out.value

    def logits(self):
        """The last token's logits: a numpy float32 array when numpy is installed, else a list."""
        pointer = ctypes.POINTER(c_float)()
        n = c_size_t()
        with self._using() as h:
            check(api.tern_get_logits(h, byref(pointer), byref(n)))
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
        with self._using() as h:
            vectors, self.embed_stats = _embed(self.model, h, texts, dimensions=dimensions, format=format,
                                               prompt=prompt, instruction=instruction, truncate=truncate)
        return vectors

    def save_state(self):
        """The session's state as bytes: KV cache, position, history, sampler."""
        with self._using() as h:
            size = c_size_t()
            check(api.tern_session_state_size(h, byref(size)))
            buffer, used = _sized_call(lambda buf, cap, out: api.tern_session_state_save(h, buf, cap, out),
                                       max(size.value, 1))
            return buffer.raw[:used]

    def load_state(self, data):
        """Restores save_state()'s bytes (same bundle and KV layout); continues exactly."""
        data = bytes(data)
        with self._using() as h:
            check(api.tern_session_state_load(h, data, len(data)))
        self._chat_fed = ""

    def save_state_file(self, path):
        """Writes the state atomically (a temporary, then rename)."""
        with self._using() as h:
            check(api.tern_session_state_save_file(h, os.fsencode(path)))

    def load_state_file(self, path):
        with self._using() as h:
            check(api.tern_session_state_load_file(h, os.fsencode(path)))
        self._chat_fed = ""

    def set_logit_bias(self, biases):
        """{token id: bias} added to the logits before sampling (-inf bans); {} removes it."""
        entries = (LogitBias * len(biases))(*[LogitBias(int(t), float(b)) for t, b in dict(biases).items()])
        with self._using() as h:
            check(api.tern_session_set_logit_bias(h, entries, len(entries)))
        self._bias = entries if len(entries) else None

    def set_logit_hook(self, function):
        """function(logits, history) may change the logits (a numpy array when numpy is
        installed, else a ctypes array) before each token is picked; None removes it. An
        exception aborts the generation and is raised from it."""
        if function is None:
            with self._using() as h:
                check(api.tern_session_set_logit_hook(h, LogitHook(), None))  # LogitHook(): NULL
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
                api.tern_session_request_abort(self._slot.handle)  # resident: it is running
        c_hook = LogitHook(hook)
        with self._using() as h:
            check(api.tern_session_set_logit_hook(h, c_hook, None))
        self._hook = c_hook


class _Run:
    """What a generation's worker thread holds: not the Generation itself, so a Generation the
    caller drops (a `break` out of the loop) is collected, which stops the run. It gives the
    session's slot back as soon as tern_generate returns."""

    def __init__(self, session, slot, prompt, params, keep):
        self.session = session
        self.slot = slot
        self.handle = slot.handle
        self.prompt = prompt
        self.params = params
        self.keep = keep  # the stop strings' C array
        self.queue = queue.SimpleQueue()
        self.stop = False
        self.done = False
        self.lock = threading.Lock()  # stop/done against an abort request

    def __call__(self):
        callback = PieceCallback(self.piece)
        stats = GenerateStats()
        status = api.tern_generate(self.handle, self.prompt, len(self.prompt), byref(self.params), callback, None,
                                   byref(stats))
        error = None
        if status != 0:
            error = TernError(status, api.tern_last_error_message().decode("utf-8", "replace"))
        with self.lock:
            self.done = True
            stopped = self.stop
        if stopped or self.session._hook_error is not None:  # our own abort request, not the caller's
            api.tern_session_clear_abort(self.handle)
            if self.session._abort_requested:
                api.tern_session_request_abort(self.handle)
        self.session._pool.release(self.slot)
        self.queue.put((stats, error))

    def abort(self):
        with self.lock:
            self.stop = True
            if not self.done:
                api.tern_session_request_abort(self.handle)

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
        self._args = (prompt, params, keep)
        self._run = None
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
            slot = self._session._acquire()
            self._run = _Run(self._session, slot, *self._args)
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
        self._run.abort()
        while not isinstance(self._run.queue.get(), tuple):
            pass
        self._thread.join()

    def __del__(self):
        if getattr(self, "_finished", True) is False and api is not None:
            self.close()
