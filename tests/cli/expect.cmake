# Runs a command and checks its exit code and output: CTest alone can check an
# exit code or a regex, not both, and the CLI's contract is both (a clear
# message AND a non-zero exit).
#   cmake -DEXE=... -DARGS="a|b" -DRC=2 [-DSTDOUT=regex] [-DSTDERR=regex] [-DNO_STDERR=1] -P expect.cmake
# Arguments are separated by '|': add_test would split a ;-list itself.
string(REPLACE "|" ";" ARGS "${ARGS}")
execute_process(COMMAND ${EXE} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit ${rc}\n--- stdout\n${out}--- stderr\n${err}---")
if(NOT "${rc}" STREQUAL "${RC}")
  message(FATAL_ERROR "exit code ${rc}, expected ${RC}")
endif()
if(DEFINED STDOUT AND NOT out MATCHES "${STDOUT}")
  message(FATAL_ERROR "stdout does not match '${STDOUT}'")
endif()
if(DEFINED STDERR AND NOT err MATCHES "${STDERR}")
  message(FATAL_ERROR "stderr does not match '${STDERR}'")
endif()
if(NO_STDERR AND NOT err STREQUAL "")
  message(FATAL_ERROR "unexpected output on stderr")
endif()
if(err MATCHES "Segmentation|Aborted|terminate called|AddressSanitizer|runtime error")
  message(FATAL_ERROR "the CLI crashed")
endif()
