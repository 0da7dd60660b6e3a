# bench/alternate.sh, the side-by-side timer bench/RESULTS.md's comparisons
# come from: without arguments it prints its usage and exits 2; with two
# sides it prints, per descriptor, both minima and medians with their
# ratios; a side the CLI refuses fails the run, naming what failed, instead
# of printing a ratio of nothing.
#   cmake -DSCRIPT=bench/alternate.sh -DCLI=<convbwd> -P alternate_sh.cmake
execute_process(COMMAND bash "${SCRIPT}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "bench/alternate.sh OLD NEW THREADS DESC")
  message(FATAL_ERROR "no arguments: exit ${rc}, expected 2 and the usage; stderr:\n${err}")
endif()
set(ENV{ALT} 2)
set(ENV{REP} 1)
# The second side through an environment assignment, as the usage shows.
execute_process(COMMAND bash "${SCRIPT}" "${CLI}" "CONVBWD_ISA=scalar ${CLI}" 1 mb1ic4ih6oc4kh3 mb1ic2iw9oc3kw2
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "two good sides: exit ${rc}\n${out}\n${err}")
endif()
set(num "[0-9]+\\.[0-9]+")
foreach(desc mb1ic4ih6oc4kh3 mb1ic2iw9oc3kw2)
  if(NOT out MATCHES "${desc} +min +${num} +${num} +${num} +median +${num} +${num} +${num}")
    message(FATAL_ERROR "no result line for ${desc}:\n${out}")
  endif()
endforeach()
execute_process(COMMAND bash "${SCRIPT}" "${CLI}" "${CLI}" 1 mb1ic4ih6oc4kh3 mbXX
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "failed" OR NOT err MATCHES "mbXX")
  message(FATAL_ERROR "a refused descriptor: exit ${rc}, expected a failure naming it; stderr:\n${err}")
endif()
message("bench/alternate.sh: usage, result lines and a refused side as expected")
