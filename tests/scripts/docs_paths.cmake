# Every file of the repository that the user-facing docs name must exist:
# USAGE once showed `--batch=bench/suites/resnet.txt`, a file that never was.
# Globs (`bench/suites/*.txt`) and placeholders (`<isa>`) are not checked.
#   cmake -DROOT=<source dir> "-DDOCS=README.md|tools/convbwd/USAGE.md" -P docs_paths.cmake
string(REPLACE "|" ";" DOCS "${DOCS}")
set(missing "")
set(checked 0)
foreach(doc IN LISTS DOCS)
  file(READ "${ROOT}/${doc}" text)
  # Brackets would group list elements (Markdown links have them); a path is
  # matched only where it starts a word (not python/tests/x.py as tests/x.py).
  string(REGEX REPLACE "[][]" " " text "${text}")
  string(REGEX MATCHALL "(^|[^A-Za-z0-9_./-])(bench|tests|examples|tools|scripts|src|include|python|docs)/[A-Za-z0-9_./<>*-]+\\.(txt|cpp|hpp|h|md|sh|py|cmake|json)"
         paths "${text}")
  list(TRANSFORM paths REPLACE "^[^A-Za-z0-9_./-]" "")
  list(REMOVE_DUPLICATES paths)
  foreach(p IN LISTS paths)
    if(p MATCHES "[*<>]")
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    if(NOT EXISTS "${ROOT}/${p}")
      string(APPEND missing "  ${doc}: ${p}\n")
    endif()
  endforeach()
endforeach()
if(missing)
  message(FATAL_ERROR "the docs name files that do not exist:\n${missing}")
endif()
message("${checked} paths named by the docs, all present")
