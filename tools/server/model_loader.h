// tern-server's model: named after its bundle, loaded through the C API on a thread of its own
// while the server already answers /health ("loading"), and freed at the end.
#pragma once

#include <functional>
#include <string>

#include "tools/server/server_state.h"

namespace tern::server {

// The model's name in the API: the bundle's file name without ".tern".
std::string model_name_of(const std::string& bundle);

// Loads s.opt.bundle with a session per slot, then sets s.ready. A model that cannot load
// sets s.failed and s.load_error, says why on stderr and calls `stop` (the server then ends
// with exit 1, for a supervisor to see).
void load_model(ServerState& s, const std::function<void()>& stop);

// The sessions and the model (after every request has ended).
void free_model(ServerState& s);

}  // namespace tern::server
