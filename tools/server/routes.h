// tern-server's HTTP endpoints on the httplib server: the API key check, error replies, the
// status routes (/health, /props, /v1/models), generation, embeddings and the token routes.
#pragma once

#include "tools/server/connection_gate.h"
#include "tools/server/server_state.h"

namespace tern::server {

// Registers every handler on `http`; they answer from `s` (503 until the model is ready).
void add_routes(GatedServer& http, ServerState& s, const ConnectionGate& gate);

// What the gate needs of the server: the HTTP handling of a whole request, and its own
// refusals (408, 413, 503, ...) in the API's error shape and the server's log.
GateHooks gate_hooks(GatedServer& http, ServerState& s);

}  // namespace tern::server
