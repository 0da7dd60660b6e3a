# Installs the build tree into PREFIX, compiles SAMPLE with one plain compiler
# line against it (CANN's link names, no CMake), and runs the result.
foreach(v BUILD_DIR PREFIX CXX SAMPLE LIBDIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "installed_build_line.cmake: ${v} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
set(exe ${PREFIX}/sample_2d)
# The sample's own directory is not on the line: it must build from the
# installed headers (its helper header sits next to it and is found by the
# quoted include).
execute_process(COMMAND ${CXX} ${SAMPLE} -I${PREFIX}/include -I${PREFIX}/include/aclnnop
                        -L${PREFIX}/${LIBDIR} -lascendcl -lnnopbase -lopapi -o ${exe}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the plain build line failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${PREFIX}/${LIBDIR} ${exe}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the sample failed: ${rc}")
endif()
