# The README's C++ snippet must be the code examples/cpp_api.cpp runs: the
# first ```c++ block after "## C++ API" in README.md equals the lines between
# "// README begin" and "// README end" in the example, one indent removed.
#   cmake -DREADME=README.md -DEXAMPLE=examples/cpp_api.cpp -P readme_snippet.cmake
file(READ "${README}" readme)
string(FIND "${readme}" "## C++ API" at)
if(at LESS 0)
  message(FATAL_ERROR "README.md has no '## C++ API' section")
endif()
string(SUBSTRING "${readme}" ${at} -1 readme)
string(FIND "${readme}" "```c++\n" open)
string(SUBSTRING "${readme}" ${open} -1 readme)
string(LENGTH "```c++\n" skip)
string(SUBSTRING "${readme}" ${skip} -1 readme)
string(FIND "${readme}" "```" close)
string(SUBSTRING "${readme}" 0 ${close} shown)

file(READ "${EXAMPLE}" code)
string(FIND "${code}" "// README begin\n" begin)
string(FIND "${code}" "  // README end" end)
if(begin LESS 0 OR end LESS 0)
  message(FATAL_ERROR "${EXAMPLE} lacks the README markers")
endif()
string(LENGTH "// README begin\n" skip)
math(EXPR begin "${begin} + ${skip}")
math(EXPR len "${end} - ${begin}")
string(SUBSTRING "${code}" ${begin} ${len} region)
# One level of indent (two spaces) off every line (the region starts at a
# line's beginning; CMake's regex ^ would match after every replacement).
string(REPLACE "\n  " "\n" region "\n${region}")
string(SUBSTRING "${region}" 1 -1 region)
set(expected "#include <convbwd/convbwd.hpp>\n\n${region}")
if(NOT shown STREQUAL expected)
  message(FATAL_ERROR "README's C++ snippet differs from ${EXAMPLE}.\n--- README\n${shown}--- expected\n${expected}---")
endif()
message("README snippet matches ${EXAMPLE}")
