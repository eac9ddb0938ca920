# Sourced by .ci/demo and .ci/test. Compiles go through ccache with paths taken relative to
# the checkout, so a second clone of the same tree (.ci/run's fresh-clone stage) reuses the
# first one's objects. Both scripts must configure build/release alike, or ninja rebuilds it.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
