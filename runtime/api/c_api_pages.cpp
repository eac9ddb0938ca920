// The C API's report of the weights' pages (tern_model_weights_pages) over Model::weights_pages().
#include <cstdio>
#include <cstring>

#include "include/tern.h"
#include "runtime/api/c_api_support.h"
#include "runtime/engine/model.h"

using namespace tern;

extern "C" {

tern_status tern_model_weights_pages(const tern_model* model, tern_weights_pages* out) {
  TERN_C_REQUIRE_(model);
  TERN_C_REQUIRE_(out);
  const WeightPagesReport r = reinterpret_cast<const Model*>(model)->weights_pages();
  std::memset(out, 0, sizeof *out);
  std::snprintf(out->mode, sizeof out->mode, "%s", to_string(r.mode));
  std::snprintf(out->load, sizeof out->load, "%s", to_string(r.load));
  out->mapped = r.mapped ? 1 : 0;
  out->anonymous = r.anonymous ? 1 : 0;
  out->known = r.usage.known ? 1 : 0;
  out->bytes = r.bytes;
  out->resident_bytes = r.usage.resident_bytes;
  out->large_bytes = r.usage.large_bytes;
  out->large_page_bytes = r.large_page_bytes;
  return TERN_OK;
}

}  // extern "C"
