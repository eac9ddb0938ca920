// How much memory the process can still get before the OS kills it for memory: what an
// app sizes its budget from (Android's lmkd and iOS's jetsam act on this, not on total RAM).
#pragma once

#include <cstdint>

#include "platform/error.h"

namespace tern {

// Linux and Android: MemAvailable from /proc/meminfo, lowered to the cgroup's limit minus
// its usage when the process's cgroup (v2, or v1's memory controller) sets one. iOS:
// os_proc_available_memory(). NotSupported elsewhere. No heap use.
Result<uint64_t> available_memory();

// The Linux reading from explicit files (tests): meminfo_path, and the cgroup v2 directory
// holding memory.max / memory.current (null: none).
Result<uint64_t> available_memory_from(const char* meminfo_path, const char* cgroup_dir);

// The machine's physical memory in bytes (sysconf), or 0 where it cannot be told. A budget
// above it cannot be a promise (model load warns; tern_model_budget_above_physical()).
uint64_t physical_memory();

}  // namespace tern
