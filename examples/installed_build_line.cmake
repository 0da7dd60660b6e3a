# Installs the build tree into PREFIX, then builds and runs samples against it
# the ways users do: CANN's plain compiler line, pkg-config, find_package.
foreach(v BUILD_DIR PREFIX CXX SAMPLE_DIR LIBDIR GENERATOR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "installed_build_line.cmake: ${v} is not set")
  endif()
endforeach()

function(run_checked what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}${err}")
  endif()
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

function(run_sample what exe expect)
  run_checked("${what}" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${PREFIX}/${LIBDIR} ${exe})
  if(NOT LAST_OUTPUT MATCHES "PASS ${expect}")
    message(FATAL_ERROR "${what} did not print 'PASS ${expect}':\n${LAST_OUTPUT}")
  endif()
  message(STATUS "${what}: PASS ${expect}")
endfunction()

file(REMOVE_RECURSE ${PREFIX})
run_checked("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})

# 1. CANN's line. The sample's helper header sits next to it and is found by
#    its quoted include; everything else must come from the prefix.
run_checked("the CANN build line" ${CXX} ${SAMPLE_DIR}/conv_backward_2d.cpp -I${PREFIX}/include
            -I${PREFIX}/include/aclnnop -L${PREFIX}/${LIBDIR} -lascendcl -lnnopbase -lopapi -o ${PREFIX}/sample_2d)
run_sample("CANN build line" ${PREFIX}/sample_2d conv_backward_2d)

# 2. pkg-config.
if(PKG_CONFIG)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${PREFIX}/${LIBDIR}/pkgconfig
                          ${PKG_CONFIG} --cflags --libs convbwd
                  RESULT_VARIABLE rc OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config cannot find convbwd in ${PREFIX}")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run_checked("the pkg-config build line" ${CXX} ${SAMPLE_DIR}/conv_backward_3d.cpp ${flags} -o ${PREFIX}/sample_3d)
  run_sample("pkg-config" ${PREFIX}/sample_3d conv_backward_3d)
endif()

# 3. find_package, shared and static.
set(consumer ${PREFIX}/consumer-build)
run_checked("configuring the find_package consumer" ${CMAKE_COMMAND} -S ${SAMPLE_DIR}/consumer -B ${consumer}
            -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_CXX_COMPILER=${CXX} -DSAMPLE_DIR=${SAMPLE_DIR})
run_checked("building the find_package consumer" ${CMAKE_COMMAND} --build ${consumer})
run_sample("find_package (shared)" ${consumer}/consumer_1d conv_backward_1d)
run_sample("find_package (static)" ${consumer}/consumer_1d_static conv_backward_1d)
run_sample("find_package, #include \"aclnn_convolution_backward.h\", C++14 project"
           ${consumer}/consumer_cann_flat_include cann_flat_include)
run_sample("find_package, the C++ API" ${consumer}/consumer_cpp_api cpp_api)

message("ALL INSTALLED CHECKS PASSED")
