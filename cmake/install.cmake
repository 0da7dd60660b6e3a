# Install rules: the shared and static libraries, every public header, a CMake
# package (find_package(convbwd)), a pkg-config file, and CANN's link names.
include(CMakePackageConfigHelpers)

install(TARGETS convbwd convbwd_static
  EXPORT convbwdTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# include/convbwd (C++), include/acl, include/aclnn, include/aclnnop (C).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

set(CONVBWD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/convbwd)
install(EXPORT convbwdTargets NAMESPACE convbwd:: DESTINATION ${CONVBWD_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/convbwdConfig.cmake.in
  ${PROJECT_BINARY_DIR}/convbwdConfig.cmake INSTALL_DESTINATION ${CONVBWD_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/convbwdConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/convbwdConfig.cmake ${PROJECT_BINARY_DIR}/convbwdConfigVersion.cmake
  DESTINATION ${CONVBWD_CMAKE_DIR})

# Relocatable: the prefix is found from the .pc file's own location, so
# `cmake --install --prefix <anywhere>` yields a working file.
file(RELATIVE_PATH CONVBWD_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" CONVBWD_PC_TO_PREFIX "${CONVBWD_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/convbwd.pc.in ${PROJECT_BINARY_DIR}/convbwd.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/convbwd.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# CANN programs link -lascendcl (runtime), -lnnopbase (objects) and -lopapi
# (operators); all three live in this one library. Symlinks to the unversioned
# name keep one copy of the code, and the binary records libconvbwd's SONAME,
# so the program loads the real library at run time.
foreach(alias ascendcl nnopbase opapi)
  install(CODE "
    set(dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\")
    execute_process(COMMAND \${CMAKE_COMMAND} -E create_symlink
      ${CMAKE_SHARED_LIBRARY_PREFIX}convbwd${CMAKE_SHARED_LIBRARY_SUFFIX}
      \"\${dir}/${CMAKE_SHARED_LIBRARY_PREFIX}${alias}${CMAKE_SHARED_LIBRARY_SUFFIX}\")
    message(STATUS \"Installing: \${dir}/${CMAKE_SHARED_LIBRARY_PREFIX}${alias}${CMAKE_SHARED_LIBRARY_SUFFIX}\")")
endforeach()
