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
import json
import os
import queue
import random
import re
import struct
import threading
import time
import uuid
from ctypes import byref

from ._capi import (ChatCallback, ChatResult, ChatTool, ChatTurn, LogitBias, Status, TernError, ToolCall, api, check,
                    raw_text)
from ._common import _sized_call, _struct_dict

# tern_chat_event_type, tern_finish_reason, tern_tool_choice, tern_response_format
CONTENT, TOOL_CALL, TOOL_ARGUMENTS, TOKEN = range(4)
FINISH_REASONS = ("stop", "length", "tool_calls")
TOOL_CHOICES = {"auto": 0, "none": 1, "required": 2}
TOOL_CHOICE_FUNCTION = 3
RESPONSE_TEXT, RESPONSE_JSON_OBJECT, RESPONSE_JSON_SCHEMA, RESPONSE_GRAMMAR = range(4)
ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_STOP_STRINGS = 8
MAX_STOP_BYTES = 64
MAX_TOP_LOGPROBS = 20
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")


class RequestError(TernError, ValueError):
    """A request argument that is wrong (status INVALID_ARGUMENT); also a ValueError. The
    message names the field as OpenAI's API does (messages[1].role, tool_choice, ...)."""

    def __init__(self, message):
        super().__init__(Status.INVALID_ARGUMENT, message)


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
        call = _Request()
        call.messages(messages)
        call.tools(tools, tool_choice)
        call.response_format(response_format, grammar)
        call.key = ("chat", _json((tools, tool_choice)), tuple(_json(m) for m in messages))
        call.sampling(self._seed(seed), temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                      repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
                      frequency_penalty=frequency_penalty)
        call.logit_bias(logit_bias, self._info["vocab_size"])
        call.max_tokens(max_tokens)
        call.stop(stop)
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
        call = _Request()
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
        """The text after `prompt` (raw text; a BOS in front when the model adds one) as
        OpenAI's text_completion dict, or with stream=True an iterator of chunks.
        max_tokens None or <= 0: the rest of the context. echo: the prompt in front of the
        text. logprobs=N: choices[0].logprobs with tokens, token_logprobs, top_logprobs (the
        N most likely, at most 20) and text_offset. Sampling, seed, stop, logit_bias,
        grammar and response_format as for create_chat_completion."""
        if suffix is not None:
            raise RequestError("suffix: not supported (no fill-in-the-middle format)")
        if not isinstance(prompt, str):
            raise RequestError("prompt: a string, not %s" % type(prompt).__name__)
        if echo and logprobs is not None:
            raise RequestError("echo with logprobs: the prompt's log-probabilities are not computed")
        if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int)):
            raise RequestError("logprobs: the number of alternatives per token (0 to 20), not %r" % (logprobs,))
        call = _Request()
        call.prompt(prompt)
        call.key = ("prompt", "", prompt)
        call.response_format(response_format, grammar)
        call.sampling(self._seed(seed), temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                      repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
                      frequency_penalty=frequency_penalty)
        call.logit_bias(logit_bias, self._info["vocab_size"])
        call.max_tokens(max_tokens)
        call.stop(stop)
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


# ---- the request ----
class _Request:
    """A tern_chat_request being filled from OpenAI's fields, and the Python objects its
    pointers point into (kept alive with it)."""

    def __init__(self):
        self.c = api.tern_chat_default_request()
        self.keep = []
        self.key = None  # what the slot will hold: (kind, tools, messages or prompt)

    def affinity(self, held):
        """How much of this request a slot may hold from the request `held` it ran last: the
        leading messages both have (with the same tools), or the prompts' common prefix."""
        if self.key is None or held[:2] != self.key[:2]:
            return 0
        if self.key[0] == "prompt":
            return len(os.path.commonprefix([held[2], self.key[2]]))
        n = 0
        for a, b in zip(held[2], self.key[2]):
            if a != b:
                break
            n += 1
        return n

    def _text(self, value):
        data = value.encode("utf-8", "surrogatepass")
        self.keep.append(data)
        return data

    def messages(self, messages):
        if not isinstance(messages, (list, tuple)) or not messages:
            raise RequestError("messages: a non-empty list of {\"role\": ..., \"content\": ...}")
        turns = (ChatTurn * len(messages))()
        for i, m in enumerate(messages):
            where = "messages[%d]" % i
            if not isinstance(m, dict):
                raise RequestError("%s: a dict with role and content, not %s" % (where, type(m).__name__))
            role = m.get("role")
            if role not in ROLES:
                raise RequestError("%s.role: %r is not one of %s" % (where, role, ", ".join(ROLES)))
            turn = turns[i]
            turn.role = self._text(role)
            calls = m.get("tool_calls") if role == "assistant" else None
            content = _content(m.get("content"), where, optional=bool(calls))
            turn.content = None if content is None else self._text(content)
            if calls:
                if not isinstance(calls, (list, tuple)):
                    raise RequestError("%s.tool_calls: a list" % where)
                array = (ToolCall * len(calls))()
                for j, c in enumerate(calls):
                    self._tool_call(array[j], c, "%s.tool_calls[%d]" % (where, j))
                self.keep.append(array)
                turn.tool_calls = array
                turn.n_tool_calls = len(calls)
            elif m.get("tool_calls") is not None and role != "assistant":
                raise RequestError("%s.tool_calls: only in an assistant message" % where)
            if role == "tool" and m.get("tool_call_id") is not None:
                if not isinstance(m["tool_call_id"], str):
                    raise RequestError("%s.tool_call_id: a string" % where)
                turn.tool_call_id = self._text(m["tool_call_id"])
        self.keep.append(turns)
        self.c.messages = turns
        self.c.n_messages = len(messages)

    def _tool_call(self, out, call, where):
        if not isinstance(call, dict) or call.get("type", "function") != "function" or \
                not isinstance(call.get("function"), dict):
            raise RequestError("%s: {\"id\": ..., \"type\": \"function\", \"function\": {\"name\": ..., "
                               "\"arguments\": ...}}" % where)
        function = call["function"]
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError("%s.function.name: a non-empty string" % where)
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            try:
                arguments = json.dumps(arguments)
            except (TypeError, ValueError) as e:
                raise RequestError("%s.function.arguments: JSON text or a JSON value (%s)" % (where, e)) from None
        if call.get("id") is not None:
            out.id = self._text(str(call["id"]))
        out.name = self._text(name)
        out.arguments = self._text(arguments)

    def tools(self, tools, tool_choice):
        if tools is None or (isinstance(tools, (list, tuple)) and not tools):
            if tool_choice not in (None, "none", "auto"):
                raise RequestError("tool_choice: %r without tools" % (tool_choice,))
            return
        if not isinstance(tools, (list, tuple)):
            raise RequestError("tools: a list of {\"type\": \"function\", \"function\": {...}}")
        array = (ChatTool * len(tools))()
        names = []
        for i, tool in enumerate(tools):
            where = "tools[%d]" % i
            if not isinstance(tool, dict) or tool.get("type", "function") != "function" or \
                    not isinstance(tool.get("function"), dict):
                raise RequestError("%s: {\"type\": \"function\", \"function\": {\"name\": ..., \"description\": ..., "
                                   "\"parameters\": ...}}" % where)
            function = tool["function"]
            name = function.get("name")
            if not isinstance(name, str) or not TOOL_NAME.match(name):
                raise RequestError("%s.function.name: 1 to 64 of a-z, A-Z, 0-9, _ and -, not %r" % (where, name))
            if name in names:
                raise RequestError("%s.function.name: %r twice" % (where, name))
            names.append(name)
            array[i].name = self._text(name)
            description = function.get("description")
            if description is not None:
                if not isinstance(description, str):
                    raise RequestError("%s.function.description: a string" % where)
                array[i].description = self._text(description)
            parameters = function.get("parameters")
            if parameters is not None:
                array[i].parameters = self._text(_schema_text(parameters, where + ".function.parameters"))
        self.keep.append(array)
        self.c.tools = array
        self.c.n_tools = len(tools)
        choice = "auto" if tool_choice is None else tool_choice
        if isinstance(choice, str):
            if choice not in TOOL_CHOICES:
                raise RequestError("tool_choice: %r is not one of none, auto, required or {\"type\": \"function\", "
                                   "\"function\": {\"name\": ...}}" % (choice,))
            self.c.tool_choice = TOOL_CHOICES[choice]
            return
        name = choice.get("function", {}).get("name") if isinstance(choice, dict) and \
            isinstance(choice.get("function"), dict) and choice.get("type", "function") == "function" else None
        if not isinstance(name, str):
            raise RequestError("tool_choice: \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
                               "{\"name\": ...}}, not %r" % (choice,))
        if name not in names:
            raise RequestError("tool_choice.function.name: %r is not one of the tools (%s)" % (name, ", ".join(names)))
        self.c.tool_choice = TOOL_CHOICE_FUNCTION
        self.c.tool_name = self._text(name)

    def response_format(self, response_format, grammar):
        if grammar is not None:
            if not isinstance(grammar, str):
                raise RequestError("grammar: GBNF text, not %s" % type(grammar).__name__)
            if self.c.n_tools:
                raise RequestError("grammar: not with tools")
            if response_format not in (None, {"type": "text"}):
                raise RequestError("grammar: not with a response_format")
            self.c.response_format = RESPONSE_GRAMMAR
            self.c.grammar = self._text(grammar)
            return
        if response_format is None:
            return
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        schema = None
        if kind == "text":
            return
        if kind == "json_object":
            schema = response_format.get("schema")
        elif kind == "json_schema":
            spec = response_format.get("json_schema")
            if not isinstance(spec, dict):
                raise RequestError("response_format.json_schema: {\"name\": ..., \"schema\": {...}}")
            schema = spec.get("schema")
        else:
            raise RequestError("response_format.type: \"text\", \"json_object\" or \"json_schema\", not %r" %
                               (kind if isinstance(response_format, dict) else response_format,))
        if schema is None:
            self.c.response_format = RESPONSE_JSON_OBJECT
        else:
            self.c.response_format = RESPONSE_JSON_SCHEMA
            where = "response_format.schema" if kind == "json_object" else "response_format.json_schema.schema"
            self.c.response_schema = self._text(_schema_text(schema, where))

    def prompt(self, prompt):
        data = self._text(prompt)
        self.c.prompt = data
        self.c.prompt_size = len(data)

    def sampling(self, seed, **values):
        s = self.c.sampler
        for name, value in values.items():
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise RequestError("%s: a number, not %r" % (name, value))
            if name == "temperature" and value < 0:
                raise RequestError("temperature: >= 0 (0: greedy), not %r" % value)
            if name == "top_p" and not 0 < value <= 1:
                raise RequestError("top_p: in (0, 1], not %r" % value)
            if name == "min_p" and not 0 <= value <= 1:
                raise RequestError("min_p: in [0, 1], not %r" % value)
            if name == "repeat_penalty" and value <= 0:
                raise RequestError("repeat_penalty: > 0 (1: off), not %r" % value)
            if name == "top_k":
                if value != int(value):
                    raise RequestError("top_k: an integer, not %r" % value)
                value = min(max(int(value), 0), 2**31 - 1)  # <= 0: off, as llama.cpp's
            setattr(s, name, value)
        s.seed = seed

    def logit_bias(self, logit_bias, vocab_size):
        if not logit_bias:
            return
        if not isinstance(logit_bias, dict):
            raise RequestError("logit_bias: {token id: bias}")
        array = (LogitBias * len(logit_bias))()
        for i, (token, bias) in enumerate(logit_bias.items()):
            try:
                token_id = int(token)
            except (TypeError, ValueError):
                raise RequestError("logit_bias: key %r is not a token id" % (token,)) from None
            if not 0 <= token_id < vocab_size:
                raise RequestError("logit_bias: token %d is outside the vocabulary (0 to %d)" % (token_id,
                                                                                                 vocab_size - 1))
            if isinstance(bias, bool) or not isinstance(bias, (int, float)) or bias != bias:
                raise RequestError("logit_bias[%r]: a number, not %r" % (token, bias))
            array[i] = LogitBias(token_id, float(bias))
        self.keep.append(array)
        self.c.logit_bias = array
        self.c.n_logit_bias = len(array)

    def max_tokens(self, max_tokens):
        if max_tokens is None:
            return
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise RequestError("max_tokens: an integer, not %r" % (max_tokens,))
        self.c.max_tokens = min(max(max_tokens, 0), 2**32 - 1)

    def stop(self, stop):
        if stop is None:
            return
        stops = [stop] if isinstance(stop, str) else stop
        if not isinstance(stops, (list, tuple)) or not all(isinstance(s, str) for s in stops):
            raise RequestError("stop: a string or a list of strings")
        stops = [s for s in stops if s]
        if len(stops) > MAX_STOP_STRINGS:
            raise RequestError("stop: at most %d strings, not %d" % (MAX_STOP_STRINGS, len(stops)))
        data = [self._text(s) for s in stops]
        for s, d in zip(stops, data):
            if len(d) > MAX_STOP_BYTES:
                raise RequestError("stop: %r is longer than %d bytes" % (s, MAX_STOP_BYTES))
        if data:
            from ctypes import c_char_p  # noqa: PLC0415
            array = (c_char_p * len(data))(*data)
            self.keep.append(array)
            self.c.stop_strings = array
            self.c.n_stop_strings = len(data)

    def logprobs(self, on, top, field):
        if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS:
            raise RequestError("%s: 0 to %d alternatives, not %r" % (field, MAX_TOP_LOGPROBS, top))
        self.c.logprobs = int(on)
        self.c.top_logprobs = top


def _content(content, where, optional):
    if content is None:
        if optional:
            return None
        raise RequestError("%s.content: missing" % where)
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        texts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise RequestError("%s.content[%d]: only {\"type\": \"text\", \"text\": ...} parts, not %r" %
                                   (where, j, kind))
            texts.append(part["text"])
        return "\n".join(texts)
    raise RequestError("%s.content: a string or a list of text parts, not %s" % (where, type(content).__name__))


def _json(value):
    return json.dumps(value, sort_keys=True, default=repr)


def _schema_text(schema, where):
    if isinstance(schema, str):
        return schema
    if not isinstance(schema, dict):
        raise RequestError("%s: a JSON Schema (a dict or JSON text), not %s" % (where, type(schema).__name__))
    try:
        return json.dumps(schema)
    except (TypeError, ValueError) as e:
        raise RequestError("%s: not JSON (%s)" % (where, e)) from None
