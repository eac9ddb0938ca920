/* chat_render BUNDLE ADD_GENERATION_PROMPT ROLE CONTENT [ROLE CONTENT ...]
 * Prints tern_chat_apply's text, then a line "\x1e" and the token ids of that text
 * (tokenized with add_bos 0, parse_special 1), space-separated: what
 * tests/runtime/text/chat_template_test.py compares with the Jinja rendering. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern.h"

int main(int argc, char** argv) {
  tern_model* model = NULL;
  tern_chat_message messages[64];
  size_t n = 0, size = 0, count = 0;
  char* text = NULL;
  int32_t* ids = NULL;
  tern_status s;
  int i;
  if (argc < 3 || (argc - 3) % 2 != 0 || (argc - 3) / 2 > 64) {
    fprintf(stderr, "usage: %s BUNDLE ADD_GENERATION_PROMPT [ROLE CONTENT]...\n", argv[0]);
    return 2;
  }
  for (i = 3; i + 1 < argc; i += 2) {
    messages[n].role = argv[i];
    messages[n].content = argv[i + 1];
    ++n;
  }
  if ((s = tern_model_load(argv[1], NULL, &model)) != TERN_OK) goto fail;
  s = tern_chat_apply(model, messages, n, atoi(argv[2]), NULL, 0, &size);
  if (s != TERN_OUT_OF_RANGE && s != TERN_OK) goto fail;
  text = (char*)malloc(size + 1);
  ids = (int32_t*)malloc((size + 2) * sizeof(int32_t));
  if (text == NULL || ids == NULL) return 1;
  if ((s = tern_chat_apply(model, messages, n, atoi(argv[2]), text, size + 1, &size)) != TERN_OK) goto fail;
  if ((s = tern_tokenize(model, text, size, 0, 1, ids, size + 2, &count)) != TERN_OK) goto fail;
  fwrite(text, 1, size, stdout);
  printf("\n\x1e\n");
  for (i = 0; (size_t)i < count; ++i) printf("%s%d", i ? " " : "", ids[i]);
  printf("\n");
  free(text);
  free(ids);
  tern_model_free(model);
  return 0;
fail:
  fprintf(stderr, "chat_render: %s (%s)\n", tern_last_error_message(), tern_status_string(s));
  tern_model_free(model);
  return 1;
}
