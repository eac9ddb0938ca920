# SPDX-License-Identifier: MIT
"""A tern_chat_request built from OpenAI's request fields, checked as it is built: a wrong
field is a RequestError whose message begins with the field's OpenAI name."""

import json
import os
import re
from ctypes import c_char_p, c_int32

from ._capi import ChatTool, ChatTurn, LogitBias, Status, TernError, ToolCall, api

# tern_tool_choice, tern_response_format
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


class Request:
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

    def prompt_tokens(self, tokens, vocab_size):
        """A completion's prompt as token ids, run as given (no BOS added)."""
        if not tokens or any(isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab_size for t in tokens):
            raise RequestError("prompt: token ids from 0 to %d" % (vocab_size - 1))
        ids = (c_int32 * len(tokens))(*tokens)
        self.keep.append(ids)
        self.c.prompt_tokens = ids
        self.c.n_prompt_tokens = len(tokens)

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


def canonical_json(value):
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
