# SPDX-License-Identifier: MIT
"""The C API of include/tern.h as ctypes declarations, one to one, and the library that
provides it. High-level code lives in tern/__init__.py; nothing here hides a C detail.

A function the C API gains is one line in FUNCTIONS (name: result type, then argument types);
a struct is a Structure whose _fields_ follow the header. tests/test_binding.py checks both
against cmake/libtern.abi, the ABI the build keeps: every exported function has its line and
every struct has the header's size and field offsets.
"""

import ctypes
import enum
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_size_t,
                    c_uint32, c_uint64, c_void_p)

# The ABI these declarations describe (libtern.so.<SOVERSION>).
SONAME = "libtern.so.0"


class ModelHandle(Structure):
    """tern_model (opaque)."""


class SessionHandle(Structure):
    """tern_session (opaque)."""


status_t = c_int  # tern_status; also the other C enums (kv type, stop reason, log level)


class ModelParams(Structure):
    _fields_ = [
        ("memory_budget_bytes", c_uint64),
        ("arena_buffer", c_void_p),
        ("arena_buffer_bytes", c_size_t),
        ("n_threads", c_uint32),
        ("n_ctx", c_uint32),
        ("n_batch", c_uint32),
        ("kv_type", c_int),
        ("kv_mode", c_char_p),
        ("kv_sink_tokens", c_int32),
        ("kv_recent_window", c_int32),
        ("kv_eviction", c_int32),
        ("n_sessions", c_uint32),
        ("n_draft", c_uint32),
        ("grammar_bytes", c_uint64),
        ("weights_pages", c_char_p),
    ]


class SamplerParams(Structure):
    _fields_ = [
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("repeat_last_n", c_int32),
        ("seed", c_uint64),
        ("presence_penalty", c_float),
        ("frequency_penalty", c_float),
    ]


class SessionParams(Structure):
    _fields_ = [
        ("sampler", SamplerParams),
        ("n_draft", c_uint32),
        ("draft_model", POINTER(ModelHandle)),
        ("grammar", c_char_p),
    ]


class ModelInfo(Structure):
    _fields_ = [
        ("vocab_size", c_uint32),
        ("context_tokens", c_uint32),
        ("max_context", c_uint32),
        ("layers", c_uint32),
        ("hidden", c_uint32),
        ("heads", c_uint32),
        ("kv_heads", c_uint32),
        ("head_dim", c_uint32),
        ("bos_id", c_int32),
        ("eos_id", c_int32),
        ("eot_id", c_int32),
        ("chat_template", c_char_p),
        ("n_threads", c_uint32),
        ("chat_format", c_char_p),
        ("chat_stop", c_char_p),
        ("n_sessions", c_uint32),
    ]


class MemoryReport(Structure):
    _fields_ = [
        ("budget_bytes", c_uint64),
        ("planned_total_bytes", c_uint64),
        ("minimum_budget_bytes", c_uint64),
        ("process_overhead_bytes", c_uint64),
        ("weights_bytes", c_uint64),
        ("arena_bytes", c_uint64),
        ("arena_used_bytes", c_uint64),
        ("arena_weights_bytes", c_uint64),
        ("arena_tokenizer_bytes", c_uint64),
        ("arena_scratch_bytes", c_uint64),
        ("arena_kv_cache_bytes", c_uint64),
        ("arena_sampler_bytes", c_uint64),
        ("arena_other_bytes", c_uint64),
        ("context_tokens", c_uint32),
        ("batch_tokens", c_uint32),
        ("kv_bytes_per_token", c_double),
        ("kv_compressed", c_int),
        ("kv_evicting", c_int),
        ("kv_mode", c_char * 32),
        ("sessions", c_uint32),
        ("sessions_in_use", c_uint32),
        ("session_bytes", c_uint64),
    ]


class GenerateParams(Structure):
    _fields_ = [
        ("max_new_tokens", c_uint32),
        ("add_bos", c_int),
        ("parse_special", c_int),
        ("stop_strings", POINTER(c_char_p)),
        ("n_stop_strings", c_size_t),
    ]


class GenerateStats(Structure):
    _fields_ = [
        ("prompt_tokens", c_uint32),
        ("generated_tokens", c_uint32),
        ("decoded_tokens", c_uint32),
        ("prefill_seconds", c_double),
        ("decode_seconds", c_double),
        ("stop_reason", c_int),
        ("drafted_tokens", c_uint32),
        ("accepted_tokens", c_uint32),
        ("verify_steps", c_uint32),
    ]


class WeightsPages(Structure):
    _fields_ = [
        ("mode", c_char * 8),
        ("load", c_char * 32),
        ("mapped", c_int),
        ("anonymous", c_int),
        ("known", c_int),
        ("bytes", c_uint64),
        ("resident_bytes", c_uint64),
        ("large_bytes", c_uint64),
        ("large_page_bytes", c_uint64),
    ]


class PlanRow(Structure):
    _fields_ = [
        ("kv_mode", c_char * 32),
        ("status", status_t),
        ("context_tokens", c_uint32),
        ("kv_bytes_per_token", c_double),
        ("weights_bytes", c_uint64),
        ("process_overhead_bytes", c_uint64),
        ("arena_bytes", c_uint64),
        ("scratch_bytes", c_uint64),
        ("kv_bytes", c_uint64),
        ("total_bytes", c_uint64),
        ("minimum_budget_bytes", c_uint64),
        ("session_bytes", c_uint64),
        ("sessions_that_fit", c_uint32),
    ]


class ChatMessage(Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class LogitBias(Structure):
    _fields_ = [("token", c_int32), ("bias", c_float)]


class BatchEntry(Structure):
    _fields_ = [("session", POINTER(SessionHandle)), ("tokens", POINTER(c_int32)), ("n_tokens", c_size_t),
                ("status", c_int)]


class EmbedParams(Structure):
    _fields_ = [
        ("dimensions", c_uint32),
        ("format", c_int),
        ("prompt_name", c_char_p),
        ("instruction", c_char_p),
        ("truncate", c_int),
    ]


class EmbedStats(Structure):
    _fields_ = [
        ("n_texts", c_uint32),
        ("n_tokens", c_uint64),
        ("n_batches", c_uint32),
        ("n_truncated", c_uint32),
        ("seconds", c_double),
    ]


class EmbeddingInfo(Structure):
    _fields_ = [
        ("dimensions", c_uint32),
        ("pooling", c_int),
        ("normalized", c_int),
        ("n_prompts", c_size_t),
        ("default_prompt", c_char_p),
    ]


class ToolCall(Structure):
    _fields_ = [("id", c_char_p), ("name", c_char_p), ("arguments", c_char_p)]


class ChatTurn(Structure):
    _fields_ = [
        ("role", c_char_p),
        ("content", c_char_p),
        ("tool_calls", POINTER(ToolCall)),
        ("n_tool_calls", c_size_t),
        ("tool_call_id", c_char_p),
    ]


class ChatTool(Structure):
    _fields_ = [("name", c_char_p), ("description", c_char_p), ("parameters", c_char_p)]


class ChatRequest(Structure):
    _fields_ = [
        ("messages", POINTER(ChatTurn)),
        ("n_messages", c_size_t),
        ("prompt", c_char_p),
        ("prompt_size", c_size_t),
        ("tools", POINTER(ChatTool)),
        ("n_tools", c_size_t),
        ("tool_choice", c_int),
        ("tool_name", c_char_p),
        ("response_format", c_int),
        ("response_schema", c_char_p),
        ("grammar", c_char_p),
        ("sampler", SamplerParams),
        ("logit_bias", POINTER(LogitBias)),
        ("n_logit_bias", c_size_t),
        ("max_tokens", c_uint32),
        ("stop_strings", POINTER(c_char_p)),
        ("n_stop_strings", c_size_t),
        ("logprobs", c_int),
        ("top_logprobs", c_uint32),
        ("prompt_tokens", POINTER(c_int32)),
        ("n_prompt_tokens", c_size_t),
    ]


# text (const char*, `size` bytes, not NUL-terminated): read it with raw_text(), not .text.
class TokenLogprob(Structure):
    _fields_ = [("token", c_int32), ("logprob", c_float), ("text", c_char_p), ("size", c_size_t)]


class ChatEvent(Structure):
    _fields_ = [
        ("type", c_int),
        ("text", c_char_p),
        ("size", c_size_t),
        ("tool_call_index", c_uint32),
        ("token", POINTER(TokenLogprob)),
        ("top", POINTER(TokenLogprob)),
        ("n_top", c_size_t),
    ]


class ChatResult(Structure):
    _fields_ = [
        ("finish_reason", c_int),
        ("stop_reason", c_int),
        ("n_tool_calls", c_uint32),
        ("prompt_tokens", c_uint32),
        ("cached_tokens", c_uint32),
        ("completion_tokens", c_uint32),
        ("prefill_seconds", c_double),
        ("decode_seconds", c_double),
    ]


def raw_text(struct):
    """The bytes of a struct's (text, size) pair: a pointer that need not end in a NUL, which
    ctypes' c_char_p would read up to the next NUL."""
    address = c_void_p.from_address(ctypes.addressof(struct) + type(struct).text.offset).value
    return ctypes.string_at(address, struct.size) if struct.size else b""


# The header's struct names, for the ABI check.
STRUCTS = {
    "tern_model_params": ModelParams,
    "tern_sampler_params": SamplerParams,
    "tern_session_params": SessionParams,
    "tern_model_info": ModelInfo,
    "tern_memory_report": MemoryReport,
    "tern_weights_pages": WeightsPages,
    "tern_generate_params": GenerateParams,
    "tern_generate_stats": GenerateStats,
    "tern_plan_row": PlanRow,
    "tern_chat_message": ChatMessage,
    "tern_logit_bias": LogitBias,
    "tern_batch_entry": BatchEntry,
    "tern_embed_params": EmbedParams,
    "tern_embed_stats": EmbedStats,
    "tern_embedding_info": EmbeddingInfo,
    "tern_tool_call": ToolCall,
    "tern_chat_turn": ChatTurn,
    "tern_chat_tool": ChatTool,
    "tern_chat_request": ChatRequest,
    "tern_token_logprob": TokenLogprob,
    "tern_chat_event": ChatEvent,
    "tern_chat_result": ChatResult,
}

PieceCallback = CFUNCTYPE(c_int, POINTER(c_char), c_size_t, c_void_p)
LogCallback = CFUNCTYPE(None, c_int, c_char_p, c_void_p)
ChatCallback = CFUNCTYPE(c_int, POINTER(ChatEvent), c_void_p)
LogitHook = CFUNCTYPE(None, POINTER(c_float), c_size_t, POINTER(c_int32), c_size_t, c_void_p)

Model_p = POINTER(ModelHandle)
Session_p = POINTER(SessionHandle)
u64_p = POINTER(c_uint64)
size_p = POINTER(c_size_t)
i32_p = POINTER(c_int32)

# name: (result, argument...). CDLL calls release the GIL while C runs.
FUNCTIONS = {
    "tern_model_default_params": (ModelParams,),
    "tern_session_default_params": (SessionParams,),
    "tern_sampler_default_params": (SamplerParams,),
    "tern_generate_default_params": (GenerateParams,),
    "tern_status_string": (c_char_p, status_t),
    "tern_last_error_message": (c_char_p,),
    "tern_version": (c_char_p,),
    "tern_parse_byte_size": (status_t, c_char_p, u64_p),
    "tern_set_log_callback": (None, LogCallback, c_void_p),
    "tern_set_log_level": (None, c_int),
    "tern_model_load": (status_t, c_char_p, POINTER(ModelParams), POINTER(Model_p)),
    "tern_model_free": (None, Model_p),
    "tern_model_get_info": (status_t, Model_p, POINTER(ModelInfo)),
    "tern_memory_report_get": (status_t, Model_p, POINTER(MemoryReport)),
    "tern_model_budget_above_physical": (status_t, Model_p, POINTER(c_int), u64_p),
    "tern_model_weights_pages": (status_t, Model_p, POINTER(WeightsPages)),
    "tern_tokenize": (status_t, Model_p, c_char_p, c_size_t, c_int, c_int, i32_p, c_size_t, size_p),
    "tern_detokenize": (status_t, Model_p, i32_p, c_size_t, c_void_p, c_size_t, size_p),
    "tern_session_create": (status_t, Model_p, POINTER(SessionParams), POINTER(Session_p)),
    "tern_session_free": (None, Session_p),
    "tern_session_reset": (status_t, Session_p),
    "tern_session_set_sampler": (status_t, Session_p, POINTER(SamplerParams)),
    "tern_session_set_draft": (status_t, Session_p, c_uint32),
    "tern_session_set_draft_model": (status_t, Session_p, Model_p),
    "tern_session_position": (status_t, Session_p, POINTER(c_uint32)),
    "tern_prefill": (status_t, Session_p, i32_p, c_size_t),
    "tern_decode": (status_t, Session_p, c_int32),
    "tern_decode_batch": (status_t, POINTER(BatchEntry), c_size_t),
    "tern_get_logits": (status_t, Session_p, POINTER(POINTER(c_float)), size_p),
    "tern_sample": (status_t, Session_p, i32_p),
    "tern_sample_logprobs": (status_t, Session_p, c_uint32, i32_p, c_void_p, c_void_p, size_p),
    "tern_generate": (status_t, Session_p, c_char_p, c_size_t, POINTER(GenerateParams), PieceCallback, c_void_p,
                      POINTER(GenerateStats)),
    "tern_plan": (status_t, c_char_p, POINTER(ModelParams), POINTER(c_char_p), c_size_t, POINTER(PlanRow), c_size_t,
                  size_p),
    "tern_bundle_verify": (status_t, c_char_p, c_int, POINTER(c_int)),
    "tern_chat_apply": (status_t, Model_p, POINTER(ChatMessage), c_size_t, c_int, c_void_p, c_size_t, size_p),
    "tern_session_state_size": (status_t, Session_p, size_p),
    "tern_session_state_save": (status_t, Session_p, c_void_p, c_size_t, size_p),
    "tern_session_state_load": (status_t, Session_p, c_void_p, c_size_t),
    "tern_session_state_save_file": (status_t, Session_p, c_char_p),
    "tern_session_state_load_file": (status_t, Session_p, c_char_p),
    "tern_session_history": (status_t, Session_p, i32_p, c_size_t, size_p),
    "tern_session_truncate": (status_t, Session_p, c_uint32),
    "tern_session_set_logit_bias": (status_t, Session_p, POINTER(LogitBias), c_size_t),
    "tern_session_set_logit_hook": (status_t, Session_p, LogitHook, c_void_p),
    "tern_available_memory": (status_t, u64_p),
    "tern_parse_memory_budget": (status_t, c_char_p, u64_p),
    "tern_session_request_abort": (status_t, Session_p),
    "tern_session_clear_abort": (status_t, Session_p),
    "tern_session_set_grammar": (status_t, Session_p, c_char_p, c_size_t),
    "tern_json_schema_to_grammar": (status_t, c_char_p, c_size_t, c_void_p, c_size_t, size_p),
    "tern_embed_default_params": (EmbedParams,),
    "tern_embed_row_bytes": (c_size_t, c_int, c_uint32),
    "tern_model_get_embedding_info": (status_t, Model_p, POINTER(EmbeddingInfo)),
    "tern_model_embedding_prompt": (status_t, Model_p, c_size_t, POINTER(c_char_p), POINTER(c_char_p)),
    "tern_embed": (status_t, Session_p, POINTER(c_char_p), size_p, c_size_t, POINTER(EmbedParams), c_void_p, c_size_t,
                   POINTER(c_float), POINTER(EmbedStats)),
    "tern_embed_tokens": (status_t, Session_p, POINTER(i32_p), size_p, c_size_t, POINTER(EmbedParams), c_void_p,
                          c_size_t, POINTER(c_float), POINTER(EmbedStats)),
    "tern_chat_default_request": (ChatRequest,),
    "tern_chat_complete": (status_t, Session_p, POINTER(ChatRequest), ChatCallback, c_void_p, POINTER(ChatResult)),
    "tern_chat_prompt": (status_t, Model_p, POINTER(ChatRequest), c_void_p, c_size_t, size_p),
    "tern_chat_grammar": (status_t, Model_p, POINTER(ChatRequest), c_void_p, c_size_t, size_p),
}


# Written by build_wheel.py into a wheel that carries libtern: the libraries libtern.so.0
# needs that the wheel carries too, one file name a line, each before those that need it.
BUNDLED_LIST = "bundled-libraries.txt"


def _load_bundled(here):
    """Loads the libraries a wheel carries next to libtern (libpthreadpool, libcpuinfo), by
    path and RTLD_GLOBAL, so that loading libtern.so.0 finds them by SONAME already loaded
    instead of searching the system for them."""
    listing = os.path.join(here, BUNDLED_LIST)
    if not os.path.exists(listing):
        return
    with open(listing, encoding="utf-8") as f:
        for name in f.read().split():
            ctypes.CDLL(os.path.join(here, name), mode=ctypes.RTLD_GLOBAL)


def _load():
    """libtern from $TERN_LIBRARY (only there, when set), else next to this package (where
    the wheel build_wheel.py makes puts it), else the loader's search path (the system's
    libtern.so.0: the libtern0 package's, or `cmake --install`'s after ldconfig)."""
    here = os.path.dirname(os.path.abspath(__file__))
    explicit = os.environ.get("TERN_LIBRARY")
    if explicit:
        candidates = [(explicit, "$TERN_LIBRARY")]
    else:
        candidates = [(os.path.join(here, SONAME), "next to the package"), (SONAME, "the loader's search path")]
    tried = []
    for path, where in candidates:
        if where != "the loader's search path" and not os.path.exists(path):
            tried.append("%s (%s): no such file" % (path, where))
            continue
        try:
            if where == "next to the package":
                _load_bundled(here)
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s): %s" % (path, where, e))
    raise ImportError("tern: cannot load %s; tried:\n  %s\nInstall libtern (the libtern0 package, or cmake --install) "
                      "or a tern wheel that carries it (build_wheel.py), or set TERN_LIBRARY to the library's path."
                      % (SONAME, "\n  ".join(tried)))


class _Dlinfo(Structure):
    _fields_ = [("dli_fname", c_char_p), ("dli_fbase", c_void_p), ("dli_sname", c_char_p), ("dli_saddr", c_void_p)]


def _path_of(function):
    """The file the loader took `function` from (dladdr)."""
    libc = ctypes.CDLL(None)
    info = _Dlinfo()
    if libc.dladdr(ctypes.cast(function, c_void_p), ctypes.byref(info)) == 0 or not info.dli_fname:
        return None
    return os.path.realpath(os.fsdecode(info.dli_fname))


lib = _load()
library_file = _path_of(lib.tern_version)


def _missing(name):
    def call(*args):
        raise TernError(Status.NOT_SUPPORTED, "%s has no %s (a libtern older than this binding)" % (library_file, name))
    return call


class _Api:
    """The C functions by their C names, with the argument and result types above."""


api = _Api()
for _name, (_result, *_arguments) in FUNCTIONS.items():
    try:
        _function = getattr(lib, _name)
    except AttributeError:
        setattr(api, _name, _missing(_name))
        continue
    _function.restype = _result
    _function.argtypes = _arguments
    setattr(api, _name, _function)

# tern_status's values by name, from the library itself (tern_status_string), so the list in
# include/tern_error_codes.h is not copied here.
Status = enum.IntEnum("Status", {name: code for code in range(0x100)
                                 for name in [api.tern_status_string(code).decode()] if name != "UNKNOWN"})


class TernError(Exception):
    """A call that failed: .status (a Status) and .message (what the runtime said)."""

    def __init__(self, status, message):
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.message = message
        super().__init__("%s (%s)" % (message, getattr(status, "name", status)))


def check(status):
    """Raises TernError with this thread's tern_last_error_message() unless status is TERN_OK."""
    if status != 0:
        raise TernError(status, api.tern_last_error_message().decode("utf-8", "replace"))
