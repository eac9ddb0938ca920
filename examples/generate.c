/* The smallest complete use of the C API: load a bundle within a memory budget, open a
 * session, stream a greedy continuation of a prompt to stdout, free everything.
 *   generate BUNDLE PROMPT [NEW_TOKENS] [MEMORY_BUDGET]
 * Every call returns a tern_status; on failure tern_last_error_message() says why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern.h"

static int print_piece(const char* text, size_t size, void* user_data) {
  (void)user_data;
  fwrite(text, 1, size, stdout);
  fflush(stdout);
  return 0; /* nonzero would stop generation */
}

static int fail(const char* what, tern_status status) {
  fprintf(stderr, "generate: %s: %s (%s)\n", what, tern_last_error_message(), tern_status_string(status));
  return 1;
}

int main(int argc, char** argv) {
  tern_model_params model_params = tern_model_default_params();
  tern_session_params session_params = tern_session_default_params();
  tern_generate_params generate_params = tern_generate_default_params();
  tern_generate_stats stats;
  tern_model* model = NULL;
  tern_session* session = NULL;
  tern_status status;

  if (argc < 3) {
    fprintf(stderr, "usage: %s BUNDLE PROMPT [NEW_TOKENS] [MEMORY_BUDGET]\n", argv[0]);
    return 2;
  }
  if (argc > 4 && (status = tern_parse_byte_size(argv[4], &model_params.memory_budget_bytes)) != TERN_OK) {
    return fail("memory budget", status);
  }
  if ((status = tern_model_load(argv[1], &model_params, &model)) != TERN_OK) return fail("load", status);

  session_params.sampler.temperature = 0.0f; /* greedy */
  if ((status = tern_session_create(model, &session_params, &session)) != TERN_OK) {
    tern_model_free(model);
    return fail("session", status);
  }

  generate_params.max_new_tokens = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 64;
  fputs(argv[2], stdout);
  status = tern_generate(session, argv[2], strlen(argv[2]), &generate_params, print_piece, NULL, &stats);
  fputc('\n', stdout);
  if (status == TERN_OK) {
    fprintf(stderr, "%u prompt tokens, %u generated\n", stats.prompt_tokens, stats.generated_tokens);
  }

  tern_session_free(session);
  tern_model_free(model);
  return status == TERN_OK ? 0 : fail("generate", status);
}
