# The progress line of a check (tools/convbwd/progress.hpp), three ways:
#   forced    --progress=always with stderr a pipe: the line appears for every
#             gradient, ends erased, and stdout is what --progress=never prints
#   pipe      the default with stderr a pipe, on a check that runs longer than
#             the line's 1 s delay: nothing on stderr
#   terminal  the default under script(1), stdout and stderr one terminal: the
#             line appears and is erased before the report's next line
#   cmake -DEXE=convbwd -DMODE=forced|pipe|terminal -DDESC=descriptor [-DSCRIPT=script] -P progress.cmake
string(ASCII 27 esc)
set(erase "\r${esc}\\[K")  # as a regex
set(count "[0-9.]+[kMG]?")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${ARGN}\nexit ${rc}\n--- stdout\n${out}--- stderr\n${err}---")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "exit code ${rc}, expected 0")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

# The check must outlast the delay, or a quiet stderr proves nothing.
function(expect_long report)
  if(NOT report MATCHES "reference ([0-9.]+) s")
    message(FATAL_ERROR "no reference time in the report")
  endif()
  if(CMAKE_MATCH_1 LESS 1.5)
    message(FATAL_ERROR "the reference took ${CMAKE_MATCH_1} s, too short to test the 1 s delay; use a larger DESC")
  endif()
endfunction()

set(check --threads=1 --check-all ${DESC})
if(MODE STREQUAL "forced")
  run(${EXE} --progress=always ${check})
  set(out_forced "${out}")
  set(err_forced "${err}")
  foreach(g gradInput gradWeight gradBias)
    if(NOT err_forced MATCHES "${erase}convbwd: checking ${g}: ${count} of ${count} elements \\([0-9]+%\\)")
      message(FATAL_ERROR "no progress line for ${g} on stderr")
    endif()
  endforeach()
  if(NOT err_forced MATCHES "${erase}$")
    message(FATAL_ERROR "the progress line is not erased at the end")
  endif()
  run(${EXE} --progress=never ${check})
  if(NOT err STREQUAL "")
    message(FATAL_ERROR "--progress=never wrote on stderr")
  endif()
  # stdout is the same but for the times.
  set(timing "execute [^\n]*\n")
  string(REGEX REPLACE "${timing}" "(times)\n" a "${out_forced}")
  string(REGEX REPLACE "${timing}" "(times)\n" b "${out}")
  if(NOT a STREQUAL b OR NOT a MATCHES "PASS")
    message(FATAL_ERROR "stdout differs with the progress line on")
  endif()
elseif(MODE STREQUAL "pipe")
  run(${EXE} ${check})
  expect_long("${out}")
  if(NOT err STREQUAL "")
    message(FATAL_ERROR "progress (or something else) on a stderr that is not a terminal")
  endif()
elseif(MODE STREQUAL "terminal")
  string(REPLACE ";" " " command "${EXE};${check}")
  run(${SCRIPT} -qec "${command}" /dev/null)
  expect_long("${out}")
  # The terminal's transcript: the line, then erased, then the report's line.
  if(NOT out MATCHES "${erase}convbwd: checking gradInput: ${count} of ${count} elements \\([0-9]+%\\)${erase}  gradInput ")
    message(FATAL_ERROR "no progress line erased before the report's gradInput line")
  endif()
else()
  message(FATAL_ERROR "MODE=${MODE}: expected forced, pipe or terminal")
endif()
