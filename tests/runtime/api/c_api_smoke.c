/* Compiled as C: the public header is plain C. Loads the bundle in argv[1] (the fixture
 * converts it from the repository's tiny-austen), generates greedily, and checks a few error
 * paths. */
#include <stdio.h>
#include <string.h>

#include "tern.h"

static int append(const char* text, size_t size, void* user) {
  size_t* total = (size_t*)user;
  (void)text;
  *total += size;
  return 0;
}

#define CHECK(cond)                                                                                            \
  do {                                                                                                         \
    if (!(cond)) {                                                                                             \
      fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond, tern_last_error_message()); \
      return 1;                                                                                                \
    }                                                                                                          \
  } while (0)

int main(int argc, char** argv) {
  tern_model* model = NULL;
  tern_session* session = NULL;
  tern_model_params mp = tern_model_default_params();
  tern_session_params sp = tern_session_default_params();
  tern_generate_params gp = tern_generate_default_params();
  tern_generate_stats stats;
  tern_memory_report report;
  size_t produced = 0;
  FILE* f;

  CHECK(tern_model_load(NULL, &mp, &model) == TERN_INVALID_ARGUMENT);
  CHECK(strlen(tern_last_error_message()) > 0);
  CHECK(strcmp(tern_status_string(TERN_BUDGET_TOO_SMALL), "BUDGET_TOO_SMALL") == 0);
  if (argc < 2 || (f = fopen(argv[1], "rb")) == NULL) {
    fprintf(stderr, "bundle not present: %s\n", argc < 2 ? "(no argument)" : argv[1]);
    return 1;
  }
  fclose(f);
  CHECK(tern_model_load(argv[1], &mp, &model) == TERN_OK);
  sp.sampler.temperature = 0.0f;
  CHECK(tern_session_create(model, &sp, &session) == TERN_OK);
  gp.max_new_tokens = 16;
  CHECK(tern_generate(session, "It is a truth", 13, &gp, append, &produced, &stats) == TERN_OK);
  CHECK(stats.prompt_tokens > 0 && stats.generated_tokens == 16 && produced > 0);
  CHECK(tern_memory_report_get(model, &report) == TERN_OK && report.arena_used_bytes > 0);
  CHECK(tern_decode(session, -5) == TERN_INVALID_TOKEN);
  tern_session_free(session);
  tern_model_free(model);
  printf("ok: %zu bytes of text, arena_used_bytes %llu\n", produced, (unsigned long long)report.arena_used_bytes);
  return 0;
}
