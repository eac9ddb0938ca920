// The JNI layer of bindings/java: dev.tern.* natives over the C API. Every failure becomes
// a dev.tern.TernException carrying the tern_status and the runtime's message. Strings cross
// as UTF-16 <-> UTF-8 converted here (JNI's "modified UTF-8" would mangle characters outside
// the BMP and hide unpaired surrogates, which the runtime must see as invalid UTF-8).
#include <jni.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "include/tern.h"

namespace {

// A pending Java exception, or a TernException for `s` with the runtime's message.
void throw_tern(JNIEnv* env, tern_status s, const char* message = nullptr) {
  if (env->ExceptionCheck()) return;
  jclass cls = env->FindClass("dev/tern/TernException");
  if (cls == nullptr) return;
  jmethodID ctor = env->GetMethodID(cls, "<init>", "(ILjava/lang/String;Ljava/lang/String;)V");
  jstring name = env->NewStringUTF(tern_status_string(s));
  jstring text = env->NewStringUTF(message != nullptr ? message : tern_last_error_message());
  jobject e = env->NewObject(cls, ctor, static_cast<jint>(s), name, text);
  if (e != nullptr) env->Throw(static_cast<jthrowable>(e));
}

bool ok(JNIEnv* env, tern_status s) {
  if (s == TERN_OK) return true;
  throw_tern(env, s);
  return false;
}

// Java string -> UTF-8; false (with INVALID_UTF8 thrown) for an unpaired surrogate.
bool to_utf8(JNIEnv* env, jstring js, std::string* out, const char* what) {
  out->clear();
  if (js == nullptr) {
    throw_tern(env, TERN_INVALID_ARGUMENT, what);
    return false;
  }
  const jsize n = env->GetStringLength(js);
  const jchar* u = env->GetStringChars(js, nullptr);
  if (u == nullptr) return false;
  bool valid = true;
  for (jsize i = 0; i < n && valid; ++i) {
    uint32_t cp = u[i];
    if (cp >= 0xD800 && cp <= 0xDBFF && i + 1 < n && u[i + 1] >= 0xDC00 && u[i + 1] <= 0xDFFF) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (u[i + 1] - 0xDC00);
      ++i;
    } else if (cp >= 0xD800 && cp <= 0xDFFF) {
      valid = false;
      break;
    }
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  env->ReleaseStringChars(js, u);
  if (!valid) throw_tern(env, TERN_INVALID_UTF8, "the Java string holds an unpaired surrogate (not valid UTF-8)");
  return valid;
}

// UTF-8 (valid: the runtime emits whole characters) -> Java string.
jstring to_java(JNIEnv* env, const char* s, size_t n) {
  std::vector<jchar> u;
  u.reserve(n);
  for (size_t i = 0; i < n;) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp = c;
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (i + len > n) len = 1, cp = 0xFFFD;
    if (len == 2) cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F);
    if (len == 3) cp = ((c & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
    if (len == 4) cp = ((c & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      u.push_back(static_cast<jchar>(0xD800 + (cp >> 10)));
      u.push_back(static_cast<jchar>(0xDC00 + (cp & 0x3FF)));
    } else {
      u.push_back(static_cast<jchar>(cp));
    }
    i += len;
  }
  return env->NewString(u.data(), static_cast<jsize>(u.size()));
}

jstring to_java(JNIEnv* env, const std::string& s) { return to_java(env, s.data(), s.size()); }

tern_model* model_of(jlong h) { return reinterpret_cast<tern_model*>(static_cast<intptr_t>(h)); }
tern_session* session_of(jlong h) { return reinterpret_cast<tern_session*>(static_cast<intptr_t>(h)); }

jfieldID field(JNIEnv* env, jclass cls, const char* name, const char* sig) { return env->GetFieldID(cls, name, sig); }

// dev.tern.ModelParams -> tern_model_params; the kv mode string goes to `mode`.
bool model_params(JNIEnv* env, jobject p, tern_model_params* out, std::string* mode) {
  *out = tern_model_default_params();
  jclass cls = env->GetObjectClass(p);
  out->memory_budget_bytes = static_cast<uint64_t>(env->GetLongField(p, field(env, cls, "memoryBudgetBytes", "J")));
  const jint threads = env->GetIntField(p, field(env, cls, "threads", "I"));
  const jint ctx = env->GetIntField(p, field(env, cls, "contextTokens", "I"));
  const jint batch = env->GetIntField(p, field(env, cls, "batchTokens", "I"));
  const jint sessions = env->GetIntField(p, field(env, cls, "sessions", "I"));
  if (threads < 0 || ctx < 0 || batch < 0 || sessions < 0) {
    throw_tern(env, TERN_INVALID_ARGUMENT, "threads, contextTokens, batchTokens and sessions must be >= 0");
    return false;
  }
  out->n_threads = static_cast<uint32_t>(threads);
  out->n_ctx = static_cast<uint32_t>(ctx);
  out->n_batch = static_cast<uint32_t>(batch);
  out->n_sessions = static_cast<uint32_t>(sessions);
  out->kv_sink_tokens = env->GetIntField(p, field(env, cls, "kvSinkTokens", "I"));
  out->kv_recent_window = env->GetIntField(p, field(env, cls, "kvRecentWindow", "I"));
  out->kv_eviction = env->GetIntField(p, field(env, cls, "kvEviction", "I"));
  const jlong grammar_bytes = env->GetLongField(p, field(env, cls, "grammarBytes", "J"));
  if (grammar_bytes < -1) {
    throw_tern(env, TERN_INVALID_ARGUMENT, "grammarMemory must be >= 0, or GRAMMAR_MEMORY_AUTO");
    return false;
  }
  out->grammar_bytes = grammar_bytes == -1 ? TERN_GRAMMAR_BYTES_AUTO : static_cast<uint64_t>(grammar_bytes);
  auto js = static_cast<jstring>(env->GetObjectField(p, field(env, cls, "kvMode", "Ljava/lang/String;")));
  if (js != nullptr) {
    if (!to_utf8(env, js, mode, "kvMode")) return false;
    out->kv_mode = mode->c_str();
  }
  return true;
}

tern_sampler_params sampler_params(JNIEnv* env, jobject p) {
  tern_sampler_params s = tern_sampler_default_params();
  jclass cls = env->GetObjectClass(p);
  s.temperature = env->GetFloatField(p, field(env, cls, "temperature", "F"));
  s.top_k = env->GetIntField(p, field(env, cls, "topK", "I"));
  s.top_p = env->GetFloatField(p, field(env, cls, "topP", "F"));
  s.min_p = env->GetFloatField(p, field(env, cls, "minP", "F"));
  s.repeat_penalty = env->GetFloatField(p, field(env, cls, "repeatPenalty", "F"));
  s.repeat_last_n = env->GetIntField(p, field(env, cls, "repeatLastN", "I"));
  s.seed = static_cast<uint64_t>(env->GetLongField(p, field(env, cls, "seed", "J")));
  s.presence_penalty = env->GetFloatField(p, field(env, cls, "presencePenalty", "F"));
  s.frequency_penalty = env->GetFloatField(p, field(env, cls, "frequencyPenalty", "F"));
  return s;
}

// A JSON Schema's grammar (tern_json_schema_to_grammar); false with the exception thrown.
bool schema_grammar(JNIEnv* env, const std::string& schema, std::string* out) {
  size_t size = 0;
  tern_status s = tern_json_schema_to_grammar(schema.data(), schema.size(), nullptr, 0, &size);
  std::vector<char> buf(size + 1);
  if (s == TERN_OUT_OF_RANGE)
    s = tern_json_schema_to_grammar(schema.data(), schema.size(), buf.data(), buf.size(), &size);
  if (!ok(env, s)) return false;
  out->assign(buf.data(), size);
  return true;
}

// The grammar a dev.tern.SamplerParams asks for (its grammar, or its jsonSchema converted):
// *has is false when it asks for none. False with the exception thrown.
bool sampler_grammar(JNIEnv* env, jobject p, std::string* out, bool* has) {
  jclass cls = env->GetObjectClass(p);
  auto gbnf = static_cast<jstring>(env->GetObjectField(p, field(env, cls, "grammar", "Ljava/lang/String;")));
  auto schema = static_cast<jstring>(env->GetObjectField(p, field(env, cls, "jsonSchema", "Ljava/lang/String;")));
  *has = gbnf != nullptr || schema != nullptr;
  if (gbnf != nullptr) return to_utf8(env, gbnf, out, "grammar");
  if (schema == nullptr) return true;
  std::string text;
  return to_utf8(env, schema, &text, "jsonSchema") && schema_grammar(env, text, out);
}

struct Listener {
  JNIEnv* env;
  jobject listener;
  jmethodID on_text;
  std::string text;
  static int call(const char* piece, size_t size, void* self) {
    auto* l = static_cast<Listener*>(self);
    l->text.append(piece, size);
    if (l->listener == nullptr) return 0;
    jstring s = to_java(l->env, piece, size);
    const jboolean go_on = l->env->CallBooleanMethod(l->listener, l->on_text, s);
    l->env->DeleteLocalRef(s);
    // An exception in the listener stops generation; it propagates when the call returns.
    return l->env->ExceptionCheck() || !go_on ? 1 : 0;
  }
};

// ---- Session.complete: a dev.tern.ChatRequest's flattened fields -> tern_chat_request ----

// A String[] field as UTF-8; a null element is nullptr, or (with `what`) INVALID_ARGUMENT.
struct Strings {
  std::vector<std::string> text;
  std::vector<const char*> ptrs;
};

bool read_strings(JNIEnv* env, jobject obj, const char* name, const char* what, Strings* out) {
  auto a = static_cast<jobjectArray>(
      env->GetObjectField(obj, field(env, env->GetObjectClass(obj), name, "[Ljava/lang/String;")));
  const jsize n = a != nullptr ? env->GetArrayLength(a) : 0;
  out->text.assign(static_cast<size_t>(n), std::string());
  out->ptrs.assign(static_cast<size_t>(n), nullptr);
  for (jsize i = 0; i < n; ++i) {
    auto s = static_cast<jstring>(env->GetObjectArrayElement(a, i));
    if (s == nullptr && what == nullptr) continue;
    const bool converted = to_utf8(env, s, &out->text[static_cast<size_t>(i)], what);
    env->DeleteLocalRef(s);
    if (!converted) return false;
    out->ptrs[static_cast<size_t>(i)] = out->text[static_cast<size_t>(i)].c_str();
  }
  env->DeleteLocalRef(a);
  return true;
}

// A String field as UTF-8 (*set false for null).
bool read_string(JNIEnv* env, jobject obj, const char* name, std::string* out, bool* set) {
  auto s =
      static_cast<jstring>(env->GetObjectField(obj, field(env, env->GetObjectClass(obj), name, "Ljava/lang/String;")));
  *set = s != nullptr;
  const bool converted = s == nullptr || to_utf8(env, s, out, name);
  env->DeleteLocalRef(s);
  return converted;
}

jint int_field(JNIEnv* env, jobject obj, const char* name) {
  return env->GetIntField(obj, field(env, env->GetObjectClass(obj), name, "I"));
}

template <typename T, typename A>
std::vector<T> read_array(JNIEnv* env, jobject obj, const char* name, const char* sig,
                          void (JNIEnv::*get)(A, jsize, jsize, T*)) {
  auto a = static_cast<A>(env->GetObjectField(obj, field(env, env->GetObjectClass(obj), name, sig)));
  std::vector<T> out(a != nullptr ? static_cast<size_t>(env->GetArrayLength(a)) : 0);
  if (!out.empty()) (env->*get)(a, 0, static_cast<jsize>(out.size()), out.data());
  env->DeleteLocalRef(a);
  return out;
}

// The request and the memory its pointers point into.
struct ChatRequestData {
  Strings roles, contents, turn_call_ids, call_ids, call_names, call_arguments;
  Strings tool_names, tool_descriptions, tool_parameters, stop;
  std::string prompt, tool_name, response_text;
  std::vector<tern_tool_call> calls;
  std::vector<tern_chat_turn> turns;
  std::vector<tern_chat_tool> tools;
  std::vector<tern_logit_bias> bias;
  tern_chat_request request = tern_chat_default_request();
};

bool read_messages(JNIEnv* env, jobject r, ChatRequestData* d) {
  if (!read_strings(env, r, "roles", "a message's role is null", &d->roles) ||
      !read_strings(env, r, "contents", nullptr, &d->contents) ||
      !read_strings(env, r, "toolCallIds", nullptr, &d->turn_call_ids) ||
      !read_strings(env, r, "callIds", nullptr, &d->call_ids) ||
      !read_strings(env, r, "callNames", "a tool call's name is null", &d->call_names) ||
      !read_strings(env, r, "callArguments", nullptr, &d->call_arguments)) {
    return false;
  }
  for (size_t i = 0; i < d->call_names.ptrs.size(); ++i) {
    d->calls.push_back(tern_tool_call{d->call_ids.ptrs[i], d->call_names.ptrs[i], d->call_arguments.ptrs[i]});
  }
  const std::vector<jint> counts = read_array(env, r, "callCounts", "[I", &JNIEnv::GetIntArrayRegion);
  size_t first_call = 0;
  for (size_t i = 0; i < d->roles.ptrs.size(); ++i) {
    const size_t n = static_cast<size_t>(counts[i]);
    d->turns.push_back(tern_chat_turn{d->roles.ptrs[i], d->contents.ptrs[i],
                                      n > 0 ? d->calls.data() + first_call : nullptr, n, d->turn_call_ids.ptrs[i]});
    first_call += n;
  }
  d->request.messages = d->turns.empty() ? nullptr : d->turns.data();
  d->request.n_messages = d->turns.size();
  return true;
}

bool read_tools(JNIEnv* env, jobject r, ChatRequestData* d) {
  bool set = false;
  if (!read_strings(env, r, "toolNames", "a tool's name is null", &d->tool_names) ||
      !read_strings(env, r, "toolDescriptions", nullptr, &d->tool_descriptions) ||
      !read_strings(env, r, "toolParameters", nullptr, &d->tool_parameters) ||
      !read_string(env, r, "toolChoiceName", &d->tool_name, &set)) {
    return false;
  }
  for (size_t i = 0; i < d->tool_names.ptrs.size(); ++i) {
    d->tools.push_back(tern_chat_tool{d->tool_names.ptrs[i], d->tool_descriptions.ptrs[i], d->tool_parameters.ptrs[i]});
  }
  d->request.tools = d->tools.empty() ? nullptr : d->tools.data();
  d->request.n_tools = d->tools.size();
  d->request.tool_choice = static_cast<tern_tool_choice>(int_field(env, r, "toolChoice"));
  d->request.tool_name = set ? d->tool_name.c_str() : nullptr;
  return true;
}

bool read_request(JNIEnv* env, jobject r, ChatRequestData* d) {
  bool prompt = false, response_text = false;
  if (!read_messages(env, r, d) || !read_tools(env, r, d) || !read_string(env, r, "prompt", &d->prompt, &prompt) ||
      !read_string(env, r, "responseText", &d->response_text, &response_text) ||
      !read_strings(env, r, "stop", "a stop string is null", &d->stop)) {
    return false;
  }
  tern_chat_request& q = d->request;
  q.prompt = prompt ? d->prompt.data() : nullptr;
  q.prompt_size = d->prompt.size();
  q.response_format = static_cast<tern_response_format>(int_field(env, r, "responseFormat"));
  const char* text = response_text ? d->response_text.c_str() : nullptr;
  q.response_schema = q.response_format == TERN_RESPONSE_JSON_SCHEMA ? text : nullptr;
  q.grammar = q.response_format == TERN_RESPONSE_GRAMMAR ? text : nullptr;
  jobject sampler = env->GetObjectField(r, field(env, env->GetObjectClass(r), "sampler", "Ldev/tern/SamplerParams;"));
  q.sampler = sampler_params(env, sampler);
  env->DeleteLocalRef(sampler);
  const auto tokens = read_array(env, r, "biasTokens", "[I", &JNIEnv::GetIntArrayRegion);
  const auto biases = read_array(env, r, "biasValues", "[F", &JNIEnv::GetFloatArrayRegion);
  for (size_t i = 0; i < tokens.size(); ++i) d->bias.push_back(tern_logit_bias{tokens[i], biases[i]});
  q.logit_bias = d->bias.empty() ? nullptr : d->bias.data();
  q.n_logit_bias = d->bias.size();
  q.stop_strings = d->stop.ptrs.empty() ? nullptr : d->stop.ptrs.data();
  q.n_stop_strings = d->stop.ptrs.size();
  const jint max_tokens = int_field(env, r, "maxTokens");
  const jint top = int_field(env, r, "topLogprobs");
  if (max_tokens < 0 || top < 0) {
    throw_tern(env, TERN_INVALID_ARGUMENT, "maxTokens and topLogprobs must be >= 0");
    return false;
  }
  q.max_tokens = static_cast<uint32_t>(max_tokens);
  q.top_logprobs = static_cast<uint32_t>(top);
  q.logprobs = env->GetBooleanField(r, field(env, env->GetObjectClass(r), "logprobs", "Z")) ? 1 : 0;
  return true;
}

// Bytes of `s` that end on a whole UTF-8 character (a cut character's start is held back).
size_t whole_utf8(const std::string& s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return len > back ? s.size() - back : s.size();
  }
  return s.size();
}

// Events -> dev.tern.ChatCollector; text goes out in whole characters.
struct ChatEvents {
  JNIEnv* env;
  jobject sink;
  jmethodID content, tool_call, arguments, token;
  std::string held[2];  // CONTENT, TOOL_ARGUMENTS: the start of a character cut by its piece

  bool text_event(const tern_chat_event& e, int which, jmethodID method) {
    std::string& h = held[which];
    h.append(e.text, e.size);
    const size_t n = whole_utf8(h);
    if (n == 0) return true;
    jstring s = to_java(env, h.data(), n);
    h.erase(0, n);
    const jboolean go_on = which == 0 ? env->CallBooleanMethod(sink, method, s)
                                      : env->CallBooleanMethod(sink, method, static_cast<jint>(e.tool_call_index), s);
    env->DeleteLocalRef(s);
    return go_on;
  }

  bool token_event(const tern_chat_event& e) {
    const size_t n = 1 + e.n_top;
    std::vector<jint> ids(n), ends(n);
    std::vector<jfloat> values(n);
    std::string bytes;
    for (size_t i = 0; i < n; ++i) {
      const tern_token_logprob& t = i == 0 ? *e.token : e.top[i - 1];
      ids[i] = t.token;
      values[i] = t.logprob;
      bytes.append(t.text, t.size);
      ends[i] = static_cast<jint>(bytes.size());
    }
    jintArray j_ids = env->NewIntArray(static_cast<jsize>(n));
    jfloatArray j_values = env->NewFloatArray(static_cast<jsize>(n));
    jbyteArray j_bytes = env->NewByteArray(static_cast<jsize>(bytes.size()));
    jintArray j_ends = env->NewIntArray(static_cast<jsize>(n));
    jboolean go_on = JNI_FALSE;
    if (j_ids != nullptr && j_values != nullptr && j_bytes != nullptr && j_ends != nullptr) {
      env->SetIntArrayRegion(j_ids, 0, static_cast<jsize>(n), ids.data());
      env->SetFloatArrayRegion(j_values, 0, static_cast<jsize>(n), values.data());
      env->SetByteArrayRegion(j_bytes, 0, static_cast<jsize>(bytes.size()),
                              reinterpret_cast<const jbyte*>(bytes.data()));
      env->SetIntArrayRegion(j_ends, 0, static_cast<jsize>(n), ends.data());
      go_on = env->CallBooleanMethod(sink, token, j_ids, j_values, j_bytes, j_ends);
    }
    env->DeleteLocalRef(j_ids);
    env->DeleteLocalRef(j_values);
    env->DeleteLocalRef(j_bytes);
    env->DeleteLocalRef(j_ends);
    return go_on;
  }

  static int forward(const tern_chat_event* e, void* self) {
    auto* c = static_cast<ChatEvents*>(self);
    if (c->env->ExceptionCheck()) return 1;  // thrown by the listener: stop, it propagates
    bool go_on = true;
    if (e->type == TERN_CHAT_CONTENT) go_on = c->text_event(*e, 0, c->content);
    if (e->type == TERN_CHAT_TOOL_ARGUMENTS) go_on = c->text_event(*e, 1, c->arguments);
    if (e->type == TERN_CHAT_TOKEN && e->token != nullptr) go_on = c->token_event(*e);
    if (e->type == TERN_CHAT_TOOL_CALL) {
      jstring name = to_java(c->env, e->text, e->size);
      go_on = c->env->CallBooleanMethod(c->sink, c->tool_call, static_cast<jint>(e->tool_call_index), name);
      c->env->DeleteLocalRef(name);
    }
    return c->env->ExceptionCheck() || !go_on ? 1 : 0;
  }
};

}  // namespace

extern "C" {

JNIEXPORT jstring JNICALL Java_dev_tern_Tern_version(JNIEnv* env, jclass) { return env->NewStringUTF(tern_version()); }

JNIEXPORT jlong JNICALL Java_dev_tern_Tern_availableMemory(JNIEnv* env, jclass) {
  uint64_t bytes = 0;
  return ok(env, tern_available_memory(&bytes)) ? static_cast<jlong>(bytes) : 0;
}

JNIEXPORT jlong JNICALL Java_dev_tern_Tern_parseMemoryBudget(JNIEnv* env, jclass, jstring text) {
  std::string t;
  if (!to_utf8(env, text, &t, "the budget text is null")) return 0;
  uint64_t bytes = 0;
  return ok(env, tern_parse_memory_budget(t.c_str(), &bytes)) ? static_cast<jlong>(bytes) : 0;
}

JNIEXPORT jstring JNICALL Java_dev_tern_Tern_jsonSchemaToGrammar(JNIEnv* env, jclass, jstring schema) {
  std::string text, grammar;
  if (!to_utf8(env, schema, &text, "the schema is null") || !schema_grammar(env, text, &grammar)) return nullptr;
  return to_java(env, grammar.data(), grammar.size());
}

JNIEXPORT jlong JNICALL Java_dev_tern_Model_nativeLoad(JNIEnv* env, jclass, jstring path, jobject params) {
  std::string p, mode;
  tern_model_params mp;
  if (!to_utf8(env, path, &p, "the bundle path is null") || !model_params(env, params, &mp, &mode)) return 0;
  tern_model* model = nullptr;
  if (!ok(env, tern_model_load(p.c_str(), &mp, &model))) return 0;
  return static_cast<jlong>(reinterpret_cast<intptr_t>(model));
}

JNIEXPORT jobjectArray JNICALL Java_dev_tern_Model_nativePlan(JNIEnv* env, jclass, jstring path, jobject params,
                                                              jobjectArray modes) {
  std::string p, mode;
  tern_model_params mp;
  if (!to_utf8(env, path, &p, "the bundle path is null") || !model_params(env, params, &mp, &mode)) return nullptr;
  const jsize n_modes = modes != nullptr ? env->GetArrayLength(modes) : 0;
  std::vector<std::string> names(static_cast<size_t>(n_modes));
  std::vector<const char*> name_ptrs;
  for (jsize i = 0; i < n_modes; ++i) {
    auto js = static_cast<jstring>(env->GetObjectArrayElement(modes, i));
    if (!to_utf8(env, js, &names[static_cast<size_t>(i)], "a KV mode is null")) return nullptr;
    name_ptrs.push_back(names[static_cast<size_t>(i)].c_str());
  }
  size_t count = 0;
  const char* const* list = n_modes > 0 ? name_ptrs.data() : nullptr;
  tern_status s = tern_plan(p.c_str(), &mp, list, name_ptrs.size(), nullptr, 0, &count);
  if (s != TERN_OK && s != TERN_OUT_OF_RANGE) {
    throw_tern(env, s);
    return nullptr;
  }
  std::vector<tern_plan_row> rows(count);
  if (!ok(env, tern_plan(p.c_str(), &mp, list, name_ptrs.size(), rows.data(), rows.size(), &count))) return nullptr;
  jclass cls = env->FindClass("dev/tern/Plan");
  jmethodID ctor = env->GetMethodID(cls, "<init>", "(Ljava/lang/String;ILjava/lang/String;IDJJJJJJI)V");
  jobjectArray out = env->NewObjectArray(static_cast<jsize>(rows.size()), cls, nullptr);
  for (size_t i = 0; i < rows.size(); ++i) {
    const tern_plan_row& r = rows[i];
    jobject o = env->NewObject(cls, ctor, env->NewStringUTF(r.kv_mode), static_cast<jint>(r.status),
                               env->NewStringUTF(tern_status_string(r.status)), static_cast<jint>(r.context_tokens),
                               r.kv_bytes_per_token, static_cast<jlong>(r.weights_bytes),
                               static_cast<jlong>(r.arena_bytes), static_cast<jlong>(r.kv_bytes),
                               static_cast<jlong>(r.total_bytes), static_cast<jlong>(r.minimum_budget_bytes),
                               static_cast<jlong>(r.session_bytes), static_cast<jint>(r.sessions_that_fit));
    env->SetObjectArrayElement(out, static_cast<jsize>(i), o);
  }
  return out;
}

JNIEXPORT void JNICALL Java_dev_tern_Model_nativeFree(JNIEnv*, jclass, jlong model) {
  tern_model_free(model_of(model));
}

JNIEXPORT jlong JNICALL Java_dev_tern_Model_nativeSessionCreate(JNIEnv* env, jclass, jlong model, jobject sampler) {
  tern_session_params sp = tern_session_default_params();
  sp.sampler = sampler_params(env, sampler);
  std::string grammar;
  bool has_grammar = false;
  if (!sampler_grammar(env, sampler, &grammar, &has_grammar)) return 0;
  if (has_grammar) sp.grammar = grammar.c_str();
  tern_session* s = nullptr;
  if (!ok(env, tern_session_create(model_of(model), &sp, &s))) return 0;
  return static_cast<jlong>(reinterpret_cast<intptr_t>(s));
}

JNIEXPORT jintArray JNICALL Java_dev_tern_Model_nativeTokenize(JNIEnv* env, jclass, jlong model, jstring text,
                                                               jboolean add_bos, jboolean parse_special) {
  std::string t;
  if (!to_utf8(env, text, &t, "the text is null")) return nullptr;
  size_t count = 0;
  std::vector<int32_t> ids(t.size() + 2);
  if (!ok(env,
          tern_tokenize(model_of(model), t.data(), t.size(), add_bos, parse_special, ids.data(), ids.size(), &count))) {
    return nullptr;
  }
  jintArray out = env->NewIntArray(static_cast<jsize>(count));
  env->SetIntArrayRegion(out, 0, static_cast<jsize>(count), reinterpret_cast<const jint*>(ids.data()));
  return out;
}

JNIEXPORT jstring JNICALL Java_dev_tern_Model_nativeDetokenize(JNIEnv* env, jclass, jlong model, jintArray tokens) {
  if (tokens == nullptr) {
    throw_tern(env, TERN_INVALID_ARGUMENT, "tokens is null");
    return nullptr;
  }
  const jsize n = env->GetArrayLength(tokens);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  env->GetIntArrayRegion(tokens, 0, n, reinterpret_cast<jint*>(ids.data()));
  std::vector<char> text(64 * static_cast<size_t>(n) + 16);
  size_t size = 0;
  if (!ok(env, tern_detokenize(model_of(model), ids.data(), ids.size(), text.data(), text.size(), &size)))
    return nullptr;
  return to_java(env, text.data(), size);
}

JNIEXPORT jstring JNICALL Java_dev_tern_Model_nativeChatApply(JNIEnv* env, jclass, jlong model, jobjectArray roles,
                                                              jobjectArray contents, jboolean add_prefix) {
  const jsize n = env->GetArrayLength(roles);
  std::vector<std::string> r(static_cast<size_t>(n)), c(static_cast<size_t>(n));
  std::vector<tern_chat_message> messages(static_cast<size_t>(n));
  for (jsize i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    if (!to_utf8(env, static_cast<jstring>(env->GetObjectArrayElement(roles, i)), &r[k], "a chat role is null") ||
        !to_utf8(env, static_cast<jstring>(env->GetObjectArrayElement(contents, i)), &c[k], "a chat content is null")) {
      return nullptr;
    }
  }
  for (size_t k = 0; k < messages.size(); ++k) messages[k] = tern_chat_message{r[k].c_str(), c[k].c_str()};
  size_t size = 0;
  tern_status s = tern_chat_apply(model_of(model), messages.data(), messages.size(), add_prefix, nullptr, 0, &size);
  if (s != TERN_OK && s != TERN_OUT_OF_RANGE) {
    throw_tern(env, s);
    return nullptr;
  }
  std::vector<char> text(size + 1);
  if (!ok(env, tern_chat_apply(model_of(model), messages.data(), messages.size(), add_prefix, text.data(), text.size(),
                               &size))) {
    return nullptr;
  }
  return to_java(env, text.data(), size);
}

JNIEXPORT jstring JNICALL Java_dev_tern_Model_nativeChatFormat(JNIEnv* env, jclass, jlong model) {
  tern_model_info info;
  if (!ok(env, tern_model_get_info(model_of(model), &info))) return nullptr;
  return env->NewStringUTF(info.chat_format);
}

JNIEXPORT jint JNICALL Java_dev_tern_Model_nativeContextTokens(JNIEnv* env, jclass, jlong model) {
  tern_model_info info;
  return ok(env, tern_model_get_info(model_of(model), &info)) ? static_cast<jint>(info.context_tokens) : 0;
}

JNIEXPORT jint JNICALL Java_dev_tern_Model_nativeVocabSize(JNIEnv* env, jclass, jlong model) {
  tern_model_info info;
  return ok(env, tern_model_get_info(model_of(model), &info)) ? static_cast<jint>(info.vocab_size) : 0;
}

JNIEXPORT jlong JNICALL Java_dev_tern_Model_nativeArenaUsedBytes(JNIEnv* env, jclass, jlong model) {
  tern_memory_report r;
  return ok(env, tern_memory_report_get(model_of(model), &r)) ? static_cast<jlong>(r.arena_used_bytes) : 0;
}

JNIEXPORT jint JNICALL Java_dev_tern_Model_nativeEmbeddingDimensions(JNIEnv* env, jclass, jlong model) {
  tern_embedding_info info;
  if (!ok(env, tern_model_get_embedding_info(model_of(model), &info))) return 0;
  return static_cast<jint>(info.dimensions);
}

// `row_floats`: the vector length the call gives (the caller knows the model's).
JNIEXPORT jfloatArray JNICALL Java_dev_tern_Session_nativeEmbed(JNIEnv* env, jclass, jlong session, jobjectArray texts,
                                                                jint dimensions, jint row_floats, jstring prompt_name,
                                                                jstring instruction, jboolean truncate) {
  if (dimensions < 0 || row_floats <= 0) {
    throw_tern(env, TERN_INVALID_ARGUMENT, "dimensions must be >= 0");
    return nullptr;
  }
  const jsize n = env->GetArrayLength(texts);
  std::vector<std::string> utf8(static_cast<size_t>(n));
  std::vector<const char*> ptrs(static_cast<size_t>(n));
  std::vector<size_t> sizes(static_cast<size_t>(n));
  for (jsize i = 0; i < n; ++i) {
    jstring t = static_cast<jstring>(env->GetObjectArrayElement(texts, i));
    const bool converted = to_utf8(env, t, &utf8[i], "a text is null");
    env->DeleteLocalRef(t);
    if (!converted) return nullptr;
    ptrs[i] = utf8[i].data();
    sizes[i] = utf8[i].size();
  }
  std::string prompt, inst;
  if (prompt_name != nullptr && !to_utf8(env, prompt_name, &prompt, "promptName")) return nullptr;
  if (instruction != nullptr && !to_utf8(env, instruction, &inst, "instruction")) return nullptr;
  tern_embed_params ep = tern_embed_default_params();
  ep.dimensions = static_cast<uint32_t>(dimensions);
  ep.prompt_name = prompt_name != nullptr ? prompt.c_str() : nullptr;
  ep.instruction = instruction != nullptr ? inst.c_str() : nullptr;
  ep.truncate = truncate ? 1 : 0;
  std::vector<float> out(static_cast<size_t>(n) * static_cast<size_t>(row_floats));
  if (!ok(env, tern_embed(session_of(session), ptrs.data(), sizes.data(), static_cast<size_t>(n), &ep, out.data(),
                          out.size() * sizeof(float), nullptr, nullptr))) {
    return nullptr;
  }
  jfloatArray result = env->NewFloatArray(static_cast<jsize>(out.size()));
  if (result != nullptr) env->SetFloatArrayRegion(result, 0, static_cast<jsize>(out.size()), out.data());
  return result;
}

JNIEXPORT jstring JNICALL Java_dev_tern_Session_nativeGenerate(JNIEnv* env, jclass, jlong session, jstring prompt,
                                                               jint max_tokens, jboolean add_bos, jobject listener) {
  std::string p;
  if (!to_utf8(env, prompt, &p, "the prompt is null")) return nullptr;
  if (max_tokens < 0) {
    throw_tern(env, TERN_INVALID_ARGUMENT, "maxTokens must be >= 0");
    return nullptr;
  }
  Listener l{env, listener, nullptr, {}};
  if (listener != nullptr) {
    l.on_text = env->GetMethodID(env->GetObjectClass(listener), "onText", "(Ljava/lang/String;)Z");
  }
  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = static_cast<uint32_t>(max_tokens);
  gp.add_bos = add_bos ? 1 : 0;
  const tern_status s = tern_generate(session_of(session), p.data(), p.size(), &gp, &Listener::call, &l, nullptr);
  if (env->ExceptionCheck()) return nullptr;  // thrown by the listener
  if (!ok(env, s)) return nullptr;
  return to_java(env, l.text);
}

// The result as {finish reason, tool calls, prompt / cached / completion tokens, prefill /
// decode seconds}; the reply went to `collector` (dev.tern.ChatCollector).
JNIEXPORT jdoubleArray JNICALL Java_dev_tern_Session_nativeComplete(JNIEnv* env, jclass, jlong session, jobject request,
                                                                    jobject collector) {
  ChatRequestData d;
  if (!read_request(env, request, &d)) return nullptr;
  jclass cls = env->GetObjectClass(collector);
  ChatEvents events{env,
                    collector,
                    env->GetMethodID(cls, "content", "(Ljava/lang/String;)Z"),
                    env->GetMethodID(cls, "toolCall", "(ILjava/lang/String;)Z"),
                    env->GetMethodID(cls, "toolArguments", "(ILjava/lang/String;)Z"),
                    env->GetMethodID(cls, "token", "([I[F[B[I)Z"),
                    {}};
  tern_chat_result r{};
  const tern_status s = tern_chat_complete(session_of(session), &d.request, &ChatEvents::forward, &events, &r);
  if (env->ExceptionCheck() || !ok(env, s)) return nullptr;
  const jdouble out[] = {static_cast<jdouble>(r.finish_reason),
                         static_cast<jdouble>(r.n_tool_calls),
                         static_cast<jdouble>(r.prompt_tokens),
                         static_cast<jdouble>(r.cached_tokens),
                         static_cast<jdouble>(r.completion_tokens),
                         r.prefill_seconds,
                         r.decode_seconds};
  jdoubleArray result = env->NewDoubleArray(7);
  if (result != nullptr) env->SetDoubleArrayRegion(result, 0, 7, out);
  return result;
}

JNIEXPORT void JNICALL Java_dev_tern_Session_nativeAbort(JNIEnv*, jclass, jlong session) {
  tern_session_request_abort(session_of(session));
}

JNIEXPORT void JNICALL Java_dev_tern_Session_nativeReset(JNIEnv* env, jclass, jlong session) {
  ok(env, tern_session_reset(session_of(session)));
}

JNIEXPORT void JNICALL Java_dev_tern_Session_nativeTruncate(JNIEnv* env, jclass, jlong session, jint n) {
  if (n < 0) {
    throw_tern(env, TERN_INVALID_ARGUMENT, "truncate to a negative count");
    return;
  }
  ok(env, tern_session_truncate(session_of(session), static_cast<uint32_t>(n)));
}

JNIEXPORT jint JNICALL Java_dev_tern_Session_nativePosition(JNIEnv* env, jclass, jlong session) {
  uint32_t pos = 0;
  return ok(env, tern_session_position(session_of(session), &pos)) ? static_cast<jint>(pos) : 0;
}

JNIEXPORT void JNICALL Java_dev_tern_Session_nativeSetSampler(JNIEnv* env, jclass, jlong session, jobject sampler) {
  if (sampler == nullptr) {
    throw_tern(env, TERN_INVALID_ARGUMENT, "sampler is null");
    return;
  }
  const tern_sampler_params p = sampler_params(env, sampler);
  std::string grammar;
  bool has_grammar = false;
  if (!sampler_grammar(env, sampler, &grammar, &has_grammar)) return;
  if (!ok(env, tern_session_set_sampler(session_of(session), &p))) return;
  ok(env, tern_session_set_grammar(session_of(session), has_grammar ? grammar.data() : nullptr, grammar.size()));
}

JNIEXPORT void JNICALL Java_dev_tern_Session_nativeSetLogitBias(JNIEnv* env, jclass, jlong session, jintArray tokens,
                                                                jfloatArray biases) {
  const jsize n = env->GetArrayLength(tokens);
  if (env->GetArrayLength(biases) != n) {
    throw_tern(env, TERN_INVALID_ARGUMENT, "tokens and biases differ in length");
    return;
  }
  std::vector<jint> t(static_cast<size_t>(n));
  std::vector<jfloat> b(static_cast<size_t>(n));
  env->GetIntArrayRegion(tokens, 0, n, t.data());
  env->GetFloatArrayRegion(biases, 0, n, b.data());
  std::vector<tern_logit_bias> entries(static_cast<size_t>(n));
  for (size_t i = 0; i < entries.size(); ++i) entries[i] = tern_logit_bias{t[i], b[i]};
  ok(env, tern_session_set_logit_bias(session_of(session), entries.data(), entries.size()));
}

JNIEXPORT jbyteArray JNICALL Java_dev_tern_Session_nativeSaveState(JNIEnv* env, jclass, jlong session) {
  size_t size = 0;
  if (!ok(env, tern_session_state_size(session_of(session), &size))) return nullptr;
  std::vector<uint8_t> buf(size);
  if (!ok(env, tern_session_state_save(session_of(session), buf.data(), buf.size(), &size))) return nullptr;
  jbyteArray out = env->NewByteArray(static_cast<jsize>(size));
  if (out != nullptr)
    env->SetByteArrayRegion(out, 0, static_cast<jsize>(size), reinterpret_cast<const jbyte*>(buf.data()));
  return out;
}

JNIEXPORT void JNICALL Java_dev_tern_Session_nativeLoadState(JNIEnv* env, jclass, jlong session, jbyteArray state) {
  if (state == nullptr) {
    throw_tern(env, TERN_INVALID_ARGUMENT, "state is null");
    return;
  }
  const jsize n = env->GetArrayLength(state);
  std::vector<uint8_t> buf(static_cast<size_t>(n));
  env->GetByteArrayRegion(state, 0, n, reinterpret_cast<jbyte*>(buf.data()));
  ok(env, tern_session_state_load(session_of(session), buf.data(), buf.size()));
}

JNIEXPORT void JNICALL Java_dev_tern_Session_nativeSaveStateFile(JNIEnv* env, jclass, jlong session, jstring path) {
  std::string p;
  if (to_utf8(env, path, &p, "the path is null")) ok(env, tern_session_state_save_file(session_of(session), p.c_str()));
}

JNIEXPORT void JNICALL Java_dev_tern_Session_nativeLoadStateFile(JNIEnv* env, jclass, jlong session, jstring path) {
  std::string p;
  if (to_utf8(env, path, &p, "the path is null")) ok(env, tern_session_state_load_file(session_of(session), p.c_str()));
}

JNIEXPORT void JNICALL Java_dev_tern_Session_nativeFree(JNIEnv*, jclass, jlong session) {
  tern_session_free(session_of(session));
}

}  // extern "C"
