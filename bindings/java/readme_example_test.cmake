# cmake -DREADME=README.md -DEXAMPLE=.../ReadmeExample.java -P readme_example_test.cmake
# The README's Java example must be the code the JUnit suite runs, line for line.
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)
string(REGEX MATCH "```java\n([^`]*)```" _ "${readme}")
set(from_readme "${CMAKE_MATCH_1}")
string(REGEX MATCH "// readme-example-begin\n(.*)    // readme-example-end" _ "${example}")
set(from_test "${CMAKE_MATCH_1}")
if(from_readme STREQUAL "" OR from_test STREQUAL "")
  message(FATAL_ERROR "README java block or the example's markers not found")
endif()
# The test's copy is indented by four spaces inside its method.
string(REGEX REPLACE "\n    " "\n" from_test "\n${from_test}")
string(REGEX REPLACE "^\n" "" from_test "${from_test}")
if(NOT from_readme STREQUAL from_test)
  message(FATAL_ERROR "README's Java example differs from ReadmeExample.java:\n--- README\n${from_readme}--- test\n${from_test}")
endif()
message("README's Java example is the tested one")
