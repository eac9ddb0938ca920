// tern-server's memory outside the model's plan: what requests allocate (bodies, parsed JSON,
// token lists, responses) comes from glibc's malloc, which by default gives each worker thread
// an arena of its own (up to 8 per core) and keeps what a request freed for the next one in
// that arena. Forty rounds of large legal requests (1 MiB bodies, deep JSON, 1,001 pipelined
// requests) took a 64M-budget server from 10 to 380 MiB that way, and it never went down.
// Configured here instead:
//  - two arenas (requests on many threads share them, so freed memory is reused, not kept per
//    thread);
//  - blocks of 64 KiB and more are mapped for themselves and unmapped at free (a fixed
//    threshold: glibc's adaptive one climbs to 32 MiB after the first big free);
//  - after a request, free memory above 1 MiB in the arenas is given back (malloc_trim).
// The RSS then stays within the plan plus `memory_allowance` (/health reports both).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tools/server/server_options.h"

namespace tern::server {

// Before any thread starts.
void configure_allocator();

// After a request: hands freed arena memory back to the system when there is enough of it.
void release_request_memory();

// The process's resident set (VmRSS), 0 if unknown.
uint64_t resident_bytes();

// What tern-server may hold beyond the model's plan: the program and its libraries, thread
// stacks, and the requests being received and run (max_buffered_bytes of request bytes in the
// gate, each worker's parsed request and response).
uint64_t memory_allowance(const ServerOptions& opt);

}  // namespace tern::server
