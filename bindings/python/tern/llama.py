# SPDX-License-Identifier: MIT
"""Llama: the API of llama-cpp-python's Llama class over tern's chat engine.

    from tern import Llama
    llm = Llama(model_path="model.tern")
    reply = llm.create_chat_completion(messages=[{"role": "user", "content": "Hello"}])
    print(reply["choices"][0]["message"]["content"])

create_chat_completion, create_completion (and calling the object), create_embedding and
embed return what the OpenAI API returns, as dicts (or, with stream=True, an iterator of
chunk dicts). Every call runs tern_chat_complete() (include/tern.h, "Chat completions") on a
free session slot of the model: it starts from the messages or prompt it is given, its
sampling settings apply to that call only, and the tokens a slot holds from an earlier call
that begin the new prompt are not run again (prefix reuse, reported as
usage.prompt_tokens_details.cached_tokens). A stateful conversation is Llama.session().
"""

import base64
import contextlib
import queue
import random
import struct
import threading
import time
import uuid
from ctypes import byref

from ._capi import ChatCallback, ChatResult, TernError, api, check, raw_text
from ._common import _sized_call, _struct_dict
from ._request import Request, RequestError, canonical_json

# tern_chat_event_type, tern_finish_reason
CONTENT, TOOL_CALL, TOOL_ARGUMENTS, TOKEN = range(4)
FINISH_REASONS = ("stop", "length", "tool_calls")


class Llama:
    """A bundle loaded for OpenAI-shaped calls, as llama-cpp-python's Llama.

    Llama(model_path, n_ctx=0, n_batch=0, n_threads=0, seed=None, n_sessions=1,
          memory_budget=None, kv_mode=None, slot_timeout=None, **model_params)

    n_ctx 0: the library's default context; n_threads 0: one per core. seed: where the
    per-call seeds of calls without one come from (None: fresh randomness; an int: the same
    sequence of replies every run). n_sessions: calls that run at once (each holds a session
    slot while it runs). slot_timeout: seconds a call waits for a free slot when all are
    running, then TernError (INVALID_STATE); None waits as long as it takes. Other keywords
    are tern.Model's (memory_budget, kv_mode, grammar_bytes, ...). verbose and embedding are
    accepted as llama-cpp-python takes them (the library's log level is tern.set_log_level;
    an embedding bundle embeds without the flag, and embedding=True on another is refused).
    """

    def __init__(self, model_path, *, n_ctx=0, n_batch=0, n_threads=0, seed=None, n_sessions=None,
                 slot_timeout=None, verbose=True, embedding=None, **model_params):
        from . import Model  # noqa: PLC0415 (tern/__init__.py imports this module)
        for name, value in (("n_ctx", n_ctx), ("n_batch", n_batch), ("n_threads", n_threads)):
            if value:
                model_params[name] = value
        if n_sessions is not None:
            model_params["n_sessions"] = n_sessions
        if slot_timeout is not None and (isinstance(slot_timeout, bool) or not isinstance(slot_timeout, (int, float))
                                         or slot_timeout < 0):
            raise RequestError("slot_timeout: seconds (a number >= 0) or None, not %r" % (slot_timeout,))
        self._seeds = random.Random(seed) if seed is not None else random.SystemRandom()
        self.verbose = verbose
        self.model_path = str(model_path)
        self.model = Model(model_path, slot_timeout=slot_timeout, **model_params)
        info = self.model.info
        if embedding and not self.model.embedding_info["dimensions"]:
            self.model.close()
            raise RequestError("embedding=True: %s is not an embedding bundle" % self.model_path)
        self._info = info

    # ---- the model ----
    def close(self):
        """Frees the model now (and the sessions open on it)."""
        self.model.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def plan(self):
        """The memory plan the model was loaded with (tern_memory_report_get) as a dict: budget,
        weights, arena, KV cache bytes, context_tokens, kv_mode, sessions, ..."""
        plan = getattr(type(self.model), "plan", None)
        return self.model.plan if plan is not None else self.model.memory_report()

    @property
    def slot_timeout(self):
        return self.model.slot_timeout

    @slot_timeout.setter
    def slot_timeout(self, seconds):
        self.model.slot_timeout = seconds

    def n_ctx(self):
        return self._info["context_tokens"]

    def n_vocab(self):
        return self._info["vocab_size"]

    def n_embd(self):
        return self.model.embedding_info["dimensions"] or self._info["hidden"]

    def token_bos(self):
        return self._info["bos_id"]

    def token_eos(self):
        return self._info["eos_id"]

    def tokenize(self, text, add_bos=True, special=False):
        """Token ids of `text` (bytes or str), after a BOS when add_bos and the model has one;
        special: special-token text becomes control tokens."""
        if not isinstance(text, (bytes, str)):
            raise RequestError("tokenize: text is bytes or str, not %s" % type(text).__name__)
        return self.model.tokenize(text, add_bos=add_bos, parse_special=special)

    def detokenize(self, tokens, prev_tokens=None, special=False):
        """The bytes of token ids (control tokens skipped; special=True is not supported)."""
        if special:
            raise RequestError("detokenize(special=True): the library writes no control tokens")
        return self.model.detokenize_bytes(list(tokens))

    def session(self, **options):
        """A stateful conversation (tern.Session: generate, chat, save_state, ...) in one of the
        model's slots, for those who want the model to keep a context between calls."""
        return self.model.session(**options)

    # ---- chat ----
    def create_chat_completion(self, messages, functions=None, function_call=None, tools=None, tool_choice=None,
                               temperature=0.2, top_p=0.95, top_k=40, min_p=0.05, stream=False, stop=None, seed=None,
                               response_format=None, max_tokens=None, presence_penalty=0.0, frequency_penalty=0.0,
                               repeat_penalty=1.0, model=None, logit_bias=None, logprobs=None, top_logprobs=None,
                               grammar=None, max_completion_tokens=None, stream_options=None):
        """The assistant's reply to `messages` as OpenAI's chat.completion dict, or with
        stream=True an iterator of chat.completion.chunk dicts.

        messages: dicts with role ("system", "developer", "user", "assistant", "tool") and
        content (text, or a list of {"type": "text", "text": ...} parts); an assistant's
        earlier tool_calls; a tool result's tool_call_id. tools: [{"type": "function",
        "function": {"name", "description", "parameters": JSON Schema}}]; tool_choice:
        "auto" (default with tools), "none", "required" or {"type": "function", "function":
        {"name": ...}}. A call comes back in message.tool_calls (arguments valid against the
        tool's parameters), finish_reason "tool_calls". response_format: {"type": "text"},
        {"type": "json_object"} (optionally with "schema"), or {"type": "json_schema",
        "json_schema": {"schema": ...}}. grammar: GBNF text the reply follows. Sampling
        (temperature, top_p, top_k, min_p, repeat_penalty, presence_penalty,
        frequency_penalty, logit_bias {token id: bias}) and seed apply to this call only; the
        same seed gives the same reply. stop: up to 8 strings. max_tokens: None, the rest of
        the context. logprobs=True: choices[0].logprobs.content, one entry per generated
        token, with top_logprobs (at most 20) alternatives each."""
        if functions is not None or function_call is not None:
            raise RequestError("functions and function_call are OpenAI's deprecated names: use tools and tool_choice")
        if max_completion_tokens is not None:
            if max_tokens is not None:
                raise RequestError("max_tokens and max_completion_tokens: give one")
            max_tokens = max_completion_tokens
        call = Request()
        call.messages(messages)
        call.tools(tools, tool_choice)
        call.response_format(response_format, grammar)
        call.key = ("chat", canonical_json((tools, tool_choice)), tuple(canonical_json(m) for m in messages))
        self._sample(call, seed, dict(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                                      repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
                                      frequency_penalty=frequency_penalty), logit_bias, max_tokens, stop)
        if top_logprobs is not None and not logprobs:
            raise RequestError("top_logprobs needs logprobs: true")
        call.logprobs(bool(logprobs), top_logprobs or 0, "top_logprobs")
        include_usage = _include_usage(stream_options, stream)
        head = {"id": "chatcmpl-" + uuid.uuid4().hex, "created": int(time.time()), "model": model or self.model_path}
        if stream:
            return _chat_chunks(self._stream(call), head, bool(logprobs), include_usage)
        events, result = self._run(call)
        return _chat_completion(events, result, head, bool(logprobs))

    def render_chat_completion(self, messages, tools=None, tool_choice=None, response_format=None, grammar=None):
        """What create_chat_completion would run: {"prompt": the text it tokenizes (the tools
        shown, the assistant's header at the end), "grammar": the GBNF it follows ("": none)}
        (tern_chat_prompt, tern_chat_grammar)."""
        call = Request()
        call.messages(messages)
        call.tools(tools, tool_choice)
        call.response_format(response_format, grammar)
        out = {}
        for key, function in (("prompt", api.tern_chat_prompt), ("grammar", api.tern_chat_grammar)):
            buffer, size = _sized_call(lambda buf, cap, size, f=function: f(self.model._h(), byref(call.c), buf, cap,
                                                                            size), 4096)
            out[key] = buffer.raw[:size].decode("utf-8", "replace")
        return out

    # ---- completions ----
    def create_completion(self, prompt, suffix=None, max_tokens=16, temperature=0.8, top_p=0.95, min_p=0.05,
                          echo=False, stop=None, frequency_penalty=0.0, presence_penalty=0.0, repeat_penalty=1.0,
                          top_k=40, stream=False, seed=None, model=None, logprobs=None, logit_bias=None, grammar=None,
                          response_format=None, stream_options=None):
        """The text after `prompt` (raw text, a BOS in front when the model adds one; or a
        list of token ids, run as given) as OpenAI's text_completion dict, or with stream=True an iterator of chunks.
        max_tokens None or <= 0: the rest of the context. echo: the prompt in front of the
        text. logprobs=N: choices[0].logprobs with tokens, token_logprobs, top_logprobs (the
        N most likely, at most 20) and text_offset. Sampling, seed, stop, logit_bias,
        grammar and response_format as for create_chat_completion."""
        if suffix is not None:
            raise RequestError("suffix: not supported (no fill-in-the-middle format)")
        tokens = None
        if isinstance(prompt, (list, tuple)):
            tokens, prompt = list(prompt), None
        elif not isinstance(prompt, str):
            raise RequestError("prompt: a string or a list of token ids, not %s" % type(prompt).__name__)
        if echo and logprobs is not None:
            raise RequestError("echo with logprobs: the prompt's log-probabilities are not computed")
        if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int)):
            raise RequestError("logprobs: the number of alternatives per token (0 to 20), not %r" % (logprobs,))
        call = Request()
        if tokens is not None:
            call.prompt_tokens(tokens, self._info["vocab_size"])
            prompt = self.detokenize(tokens).decode("utf-8", "replace")  # for echo and the slot's key
        else:
            call.prompt(prompt)
        call.key = ("prompt", "", prompt)
        call.response_format(response_format, grammar)
        self._sample(call, seed, dict(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                                      repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
                                      frequency_penalty=frequency_penalty), logit_bias, max_tokens, stop)
        call.logprobs(logprobs is not None, logprobs or 0, "logprobs")
        include_usage = _include_usage(stream_options, stream)
        head = {"id": "cmpl-" + uuid.uuid4().hex, "created": int(time.time()), "model": model or self.model_path}
        if stream:
            return _completion_chunks(self._stream(call), head, prompt, echo, logprobs is not None, include_usage)
        events, result = self._run(call)
        return _completion(events, result, head, prompt, echo, logprobs is not None)

    __call__ = create_completion

    def generate(self, prompt, max_tokens=None, *, stream=False, **options):
        """The text after `prompt` (create_completion's keywords, max_tokens None: the rest of
        the context), or with stream=True an iterator of its pieces as they come."""
        if stream:
            return (c["choices"][0]["text"] for c in self.create_completion(prompt, max_tokens=max_tokens, stream=True,
                                                                             **options) if c["choices"])
        return self.create_completion(prompt, max_tokens=max_tokens, **options)["choices"][0]["text"]

    # ---- embeddings ----
    def create_embedding(self, input, model=None, *, dimensions=None, encoding_format="float", prompt_name=None,
                         instruction=None, truncate=True, user=None):
        """OpenAI's embeddings list for `input` (a string or a list of strings): one
        {"object": "embedding", "embedding": [...], "index": i} per text and usage.
        dimensions: the first D of each vector, re-normalized. encoding_format "base64": each
        vector as base64 of its little-endian float32 bytes. prompt_name: a prompt stored in
        the bundle ("query", "document"; None: the bundle's default, "": none); instruction:
        text put in front of every text instead. truncate: texts longer than the context keep
        their first tokens (False: an error)."""
        if encoding_format not in ("float", "base64"):
            raise RequestError("encoding_format: \"float\" or \"base64\", not %r" % (encoding_format,))
        vectors, stats = self._embed(input, dimensions, prompt_name, instruction, truncate)
        data = []
        for i, v in enumerate(vectors):
            if encoding_format == "base64":
                v = base64.b64encode(struct.pack("<%df" % len(v), *v)).decode()
            data.append({"object": "embedding", "embedding": v, "index": i})
        return {"object": "list", "data": data, "model": model or self.model_path,
                "usage": {"prompt_tokens": stats["n_tokens"], "total_tokens": stats["n_tokens"]}}

    def embed(self, input, truncate=True, return_count=False, *, dimensions=None, prompt_name=None, instruction=None):
        """The vector of a string (a list of floats), or the vectors of a list of strings;
        with return_count, (vectors, tokens run). Options as for create_embedding."""
        vectors, stats = self._embed(input, dimensions, prompt_name, instruction, truncate)
        out = vectors[0] if isinstance(input, str) else vectors
        return (out, stats["n_tokens"]) if return_count else out

    def _embed(self, texts, dimensions, prompt_name, instruction, truncate):
        from ._session import _embed  # noqa: PLC0415
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
            raise RequestError("input: a string or a list of strings")
        if not texts:
            raise RequestError("input: an empty list")
        for i, t in enumerate(texts):
            if not t:
                raise RequestError("input[%d]: an empty string" % i)
        if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(dimensions, int)
                                       or dimensions <= 0):
            raise RequestError("dimensions: a positive integer, not %r" % (dimensions,))
        with self.model._pool.lease() as handle:
            rows, stats = _embed(self.model, handle, list(texts), dimensions=dimensions or 0, format="float32",
                                 prompt=prompt_name, instruction=instruction, truncate=truncate)
        return [[float(x) for x in row] for row in rows], stats

    # ---- running a request ----
    def _seed(self, seed):
        if seed is None or seed == -1:
            return self._seeds.getrandbits(64)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise RequestError("seed: an integer in [0, 2**64), not %r" % (seed,))
        return seed

    def _sample(self, call, seed, settings, logit_bias, max_tokens, stop):
        """A call's sampler (this call only), logit bias, length and stop strings."""
        call.sampling(self._seed(seed), **settings)
        call.logit_bias(logit_bias, self._info["vocab_size"])
        call.max_tokens(max_tokens)
        call.stop(stop)

    def _run(self, call):
        """Runs the request on a free slot in this thread: (events, tern_chat_result dict)."""
        events = []
        sink = _Sink(events.append)
        pool = self.model._pool
        slot = pool.acquire(affinity=call.affinity)
        try:
            result = ChatResult()
            status = api.tern_chat_complete(slot.handle, byref(call.c), sink.callback, None, byref(result))
        finally:
            slot.tainted = {"grammar", "bias"}
            slot.key = call.key
            pool.release(slot)
        if sink.error is not None:
            raise sink.error
        check(status)
        return events, _result(result)

    def _stream(self, call):
        """The request's events as they come, then ("end", result): tern_chat_complete runs on a
        worker thread that gives the slot back when it returns. Closing the iterator early
        stops the call."""
        pool = self.model._pool
        slot = pool.acquire(affinity=call.affinity)
        items = queue.SimpleQueue()
        run = _StreamRun(call, slot, pool, items)
        thread = threading.Thread(target=run, name="tern-chat", daemon=True)
        thread.start()
        finished = False
        try:
            while True:
                item = items.get()
                if item[0] == "end":
                    finished = True
                    _, status, message, result, error = item
                    if error is not None:
                        raise error
                    if status != 0:
                        raise TernError(status, message)
                    yield ("end", _result(result))
                    return
                yield item
        finally:
            if not finished:
                run.abort()
                while items.get()[0] != "end":
                    pass
            thread.join()


class _Sink:
    """The C callback: copies each event out of the library's memory while the call runs."""

    def __init__(self, put):
        self.put = put
        self.stop = False
        self.error = None
        self.callback = ChatCallback(self._event)

    def _event(self, pointer, _):
        try:
            e = pointer.contents
            if e.type == CONTENT:
                self.put(("content", raw_text(e).decode("utf-8", "replace")))
            elif e.type == TOOL_CALL:
                self.put(("tool_call", e.tool_call_index, raw_text(e).decode("utf-8", "replace")))
            elif e.type == TOOL_ARGUMENTS:
                self.put(("arguments", e.tool_call_index, raw_text(e).decode("utf-8", "replace")))
            elif e.type == TOKEN:
                self.put(("token", _token(e.token.contents), [_token(e.top[i]) for i in range(e.n_top)]))
            return 1 if self.stop else 0
        except BaseException as error:  # noqa: B036 - raised in the caller's thread
            self.error = error
            return 1


class _StreamRun:
    def __init__(self, call, slot, pool, items):
        self.call, self.slot, self.pool, self.items = call, slot, pool, items
        self.sink = _Sink(items.put)
        self.lock = threading.Lock()
        self.done = False

    def __call__(self):
        result = ChatResult()
        status = api.tern_chat_complete(self.slot.handle, byref(self.call.c), self.sink.callback, None, byref(result))
        message = api.tern_last_error_message().decode("utf-8", "replace") if status != 0 else ""
        with self.lock:
            self.done = True
        if self.sink.stop:
            api.tern_session_clear_abort(self.slot.handle)
        self.slot.tainted = {"grammar", "bias"}
        self.slot.key = self.call.key
        self.pool.release(self.slot)
        self.items.put(("end", status, message, result, self.sink.error))

    def abort(self):
        with self.lock:
            self.sink.stop = True
            if not self.done:
                api.tern_session_request_abort(self.slot.handle)


def _token(t):
    return (t.token, float(t.logprob), raw_text(t))


def _result(r):
    out = _struct_dict(r)
    out["finish_reason"] = FINISH_REASONS[r.finish_reason] if 0 <= r.finish_reason < 3 else r.finish_reason
    return out


def _usage(result):
    return {"prompt_tokens": result["prompt_tokens"], "completion_tokens": result["completion_tokens"],
            "total_tokens": result["prompt_tokens"] + result["completion_tokens"],
            "prompt_tokens_details": {"cached_tokens": result["cached_tokens"]}}


def _token_text(data):
    """A token's text as OpenAI writes it: the text, or "bytes:\\xNN..." for bytes that are not
    whole UTF-8 characters."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join("\\x%02x" % b for b in data)


def _logprob_entry(token, top):
    _, logprob, data = token
    return {"token": _token_text(data), "logprob": logprob, "bytes": list(data),
            "top_logprobs": [{"token": _token_text(d), "logprob": lp, "bytes": list(d)} for _, lp, d in top]}


# ---- chat results ----
def _chat_completion(events, result, head, logprobs):
    content, calls, entries = [], [], []
    for e in events:
        if e[0] == "content":
            content.append(e[1])
        elif e[0] == "tool_call":
            calls.append({"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                          "function": {"name": e[2], "arguments": ""}})
        elif e[0] == "arguments":
            calls[e[1]]["function"]["arguments"] += e[2]
        elif e[0] == "token":
            entries.append(_logprob_entry(e[1], e[2]))
    message = {"role": "assistant", "content": "".join(content) if content or not calls else None}
    if calls:
        message["tool_calls"] = calls
    return dict(head, object="chat.completion",
                choices=[{"index": 0, "message": message, "logprobs": {"content": entries} if logprobs else None,
                          "finish_reason": result["finish_reason"]}],
                usage=_usage(result))


def _chat_chunks(events, head, logprobs, include_usage):
    def chunk(delta, finish_reason=None, entries=None):
        return dict(head, object="chat.completion.chunk",
                    choices=[{"index": 0, "delta": delta,
                              "logprobs": {"content": entries} if logprobs and entries is not None else None,
                              "finish_reason": finish_reason}])

    with contextlib.closing(events):
        yield from _chat_deltas(events, chunk, head, include_usage)


def _chat_deltas(events, chunk, head, include_usage):
    yield chunk({"role": "assistant", "content": ""})
    pending = []
    for e in events:
        if e[0] == "token":
            pending.append(_logprob_entry(e[1], e[2]))
            continue
        if e[0] == "end":
            result = e[1]
            yield chunk({}, result["finish_reason"], pending if pending else None)
            if include_usage:
                yield dict(head, object="chat.completion.chunk", choices=[], usage=_usage(result))
            return
        if e[0] == "content":
            delta = {"content": e[1]}
        elif e[0] == "tool_call":
            delta = {"tool_calls": [{"index": e[1], "id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                                     "function": {"name": e[2], "arguments": ""}}]}
        else:
            delta = {"tool_calls": [{"index": e[1], "function": {"arguments": e[2]}}]}
        yield chunk(delta, None, pending)
        pending = []


# ---- completion results ----
def _completion_logprobs(events, offset):
    tokens, token_logprobs, top_logprobs, text_offset = [], [], [], []
    text = b""
    for e in events:
        if e[0] != "token":
            continue
        _, logprob, data = e[1]
        tokens.append(_token_text(data))
        token_logprobs.append(logprob)
        top_logprobs.append({_token_text(d): lp for _, lp, d in e[2]})
        text_offset.append(offset + len(text.decode("utf-8", "ignore")))
        text += data
    return {"tokens": tokens, "text_offset": text_offset, "token_logprobs": token_logprobs,
            "top_logprobs": top_logprobs}


def _completion(events, result, head, prompt, echo, logprobs):
    text = "".join(e[1] for e in events if e[0] == "content")
    return dict(head, object="text_completion",
                choices=[{"text": prompt + text if echo else text, "index": 0,
                          "logprobs": _completion_logprobs(events, len(prompt)) if logprobs else None,
                          "finish_reason": result["finish_reason"]}],
                usage=_usage(result))


def _completion_chunks(events, head, prompt, echo, logprobs, include_usage):
    def chunk(text, finish_reason=None, tokens=None):
        return dict(head, object="text_completion",
                    choices=[{"text": text, "index": 0,
                              "logprobs": _completion_logprobs(tokens, offset) if logprobs and tokens else None,
                              "finish_reason": finish_reason}])

    with contextlib.closing(events):
        offset = len(prompt)
        if echo:
            yield chunk(prompt)
        pending = []
        for e in events:
            if e[0] == "token":
                pending.append(e)
            elif e[0] == "content":
                yield chunk(e[1], None, pending)
                offset += len(e[1])
                pending = []
            elif e[0] == "end":
                result = e[1]
                yield chunk("", result["finish_reason"], pending)
                if include_usage:
                    yield dict(head, object="text_completion", choices=[], usage=_usage(result))
                return


def _include_usage(stream_options, stream):
    if stream_options is None:
        return False
    if not stream:
        raise RequestError("stream_options: only with stream: true")
    if not isinstance(stream_options, dict) or set(stream_options) - {"include_usage"}:
        raise RequestError("stream_options: {\"include_usage\": true|false}, not %r" % (stream_options,))
    return bool(stream_options.get("include_usage"))
