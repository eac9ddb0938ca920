# Sourced by .ci/demo and .ci/test. Compiles go through ccache with paths taken relative to
# the checkout, so a second clone of the same tree (.ci/run's fresh-clone stage) reuses the
# first one's objects. Both scripts must configure build/release alike, or ninja rebuilds it:
# the README's own cmake line (run by .ci/demo) gets the launcher from the environment.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD"
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
