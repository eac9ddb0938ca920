/* SPDX-License-Identifier: MIT */
/* A chat request with a tool, through tern_chat_complete: the model must call get_weather, the
 * call's name and arguments stream back as events, then the tool's result goes back in a
 * second request (a reply or another call) that reuses the first one's tokens.
 *
 *   chat_tools BUNDLE */
#include <stdio.h>
#include <string.h>

#include "tern.h"

struct reply {
  char name[80];
  char arguments[1024];
  size_t arguments_size;
};

static int on_event(const tern_chat_event* e, void* user) {
  struct reply* r = (struct reply*)user;
  if (e->type == TERN_CHAT_CONTENT) {
    fwrite(e->text, 1, e->size, stdout);
  } else if (e->type == TERN_CHAT_TOOL_CALL) {
    snprintf(r->name, sizeof r->name, "%.*s", (int)e->size, e->text);
  } else if (e->type == TERN_CHAT_TOOL_ARGUMENTS && r->arguments_size + e->size < sizeof r->arguments) {
    memcpy(r->arguments + r->arguments_size, e->text, e->size);
    r->arguments_size += e->size;
    r->arguments[r->arguments_size] = '\0';
  }
  return 0;
}

static int fail(const char* what, tern_status s) {
  fprintf(stderr, "%s: %s (%s)\n", what, tern_last_error_message(), tern_status_string(s));
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s BUNDLE\n", argv[0]);
    return 2;
  }
  tern_model_params mp = tern_model_default_params();
  mp.n_ctx = 1024;
  tern_model* model = NULL;
  tern_status s = tern_model_load(argv[1], &mp, &model);
  if (s != TERN_OK) return fail("load", s);
  tern_session* session = NULL;
  s = tern_session_create(model, NULL, &session);
  if (s != TERN_OK) return fail("session", s);

  const tern_chat_tool tools[] = {
      {"get_weather", "The weather in a town",
       "{\"type\": \"object\", \"properties\": {\"town\": {\"type\": \"string\", \"maxLength\": 16}}, "
       "\"required\": [\"town\"], \"additionalProperties\": false}"}};
  tern_chat_turn turns[3] = {{"user", "What is the weather in Bath?", NULL, 0, NULL}};
  tern_chat_request r = tern_chat_default_request();
  r.messages = turns;
  r.n_messages = 1;
  r.tools = tools;
  r.n_tools = 1;
  r.tool_choice = TERN_TOOL_CHOICE_REQUIRED;
  r.max_tokens = 64;
  r.sampler.seed = 7;
  struct reply call = {{0}, {0}, 0};
  tern_chat_result result;
  s = tern_chat_complete(session, &r, on_event, &call, &result);
  if (s != TERN_OK) return fail("chat", s);
  printf("finish reason %d: call %s(%s)\n", (int)result.finish_reason, call.name, call.arguments);

  /* The call and the tool's result go back into the conversation. */
  const tern_tool_call made = {"call_1", call.name, call.arguments};
  turns[1] = (tern_chat_turn){"assistant", NULL, &made, 1, NULL};
  turns[2] = (tern_chat_turn){"tool", "Rain, 12 degrees.", NULL, 0, "call_1"};
  r.n_messages = 3;
  r.tool_choice = TERN_TOOL_CHOICE_AUTO; /* the same tools: the first request's tokens are reused */
  r.max_tokens = 16;
  s = tern_chat_complete(session, &r, on_event, &call, &result);
  if (s != TERN_OK) return fail("chat", s);
  printf("\n%u prompt tokens, %u of them reused\n", result.prompt_tokens, result.cached_tokens);
  tern_session_free(session);
  tern_model_free(model);
  return 0;
}
