# cmake -DREADME=bindings/java/README.md -DEXAMPLE=.../ReadmeExample.java -P readme_example_test.cmake
# The README's Java quick start (Hello.java, which docs_quickstart_test compiles and runs) must
# hold the code the JUnit suite runs, line for line, at the same indentation.
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)
string(REGEX MATCH "// readme-example-begin\n(.*)    // readme-example-end" _ "${example}")
set(from_test "${CMAKE_MATCH_1}")
if(from_test STREQUAL "")
  message(FATAL_ERROR "${EXAMPLE}: the readme-example-begin/-end markers are not found")
endif()
string(FIND "${readme}" "${from_test}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${README} does not hold ReadmeExample.java's example (indented by four spaces):\n${from_test}")
endif()
message("${README}'s Java example is the tested one")
