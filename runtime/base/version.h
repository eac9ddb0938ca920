#pragma once

namespace tern {

// "MAJOR.MINOR.PATCH" of this build.
const char* version_string();

}  // namespace tern
