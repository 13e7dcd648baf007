# SPDX-License-Identifier: MIT
# Install rules (GNUInstallDirs layout), included by the top CMakeLists.txt when
# ELECTOR_INSTALL is on. Components: `runtime` (libelector.so.N), `dev` (headers,
# libelector.so, libelector.a, elector.pc, the CMake package), `tool` (the
# program, its man page, its bash completion). debian/ splits the packages
# along the same lines.
include(CMakePackageConfigHelpers)

set(ELECTOR_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/elector)
# The public headers; elector/etcd_rpc.h is not one (it needs the generated
# protobuf-c headers of the build tree).
set(ELECTOR_PUBLIC_HEADERS election.h elector.hpp error.h etcd.h version.h)
list(TRANSFORM ELECTOR_PUBLIC_HEADERS PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/include/elector/)
install(FILES ${ELECTOR_PUBLIC_HEADERS}
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/elector COMPONENT dev)

install(FILES ${ELECTOR_STATIC} DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)

# The release helper goes with the library (runtime), at the path compiled
# into it.
install(TARGETS elector_release RUNTIME DESTINATION ${ELECTOR_HELPER_DIR}
        COMPONENT runtime)

if(ELECTOR_SHARED)
  install(TARGETS elector_shared EXPORT elector-targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                  NAMELINK_COMPONENT dev
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT elector-targets NAMESPACE elector:: DESTINATION ${ELECTOR_CMAKE_DIR}
          COMPONENT dev)
  configure_package_config_file(
    ${CMAKE_CURRENT_SOURCE_DIR}/cmake/elector-config.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/elector-config.cmake
    INSTALL_DESTINATION ${ELECTOR_CMAKE_DIR})
  # Same major version: compatible (0.x: same minor, see docs/DESIGN.md).
  if(PROJECT_VERSION_MAJOR EQUAL 0)
    set(_elector_compat SameMinorVersion)
  else()
    set(_elector_compat SameMajorVersion)
  endif()
  write_basic_package_version_file(
    ${CMAKE_CURRENT_BINARY_DIR}/elector-config-version.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY ${_elector_compat})
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/elector-config.cmake
                ${CMAKE_CURRENT_BINARY_DIR}/elector-config-version.cmake
          DESTINATION ${ELECTOR_CMAKE_DIR} COMPONENT dev)
endif()

# pkg-config: `pkg-config --cflags --libs elector` (shared), add --static for the
# archive. OpenSSL is loaded at run time (dlopen) when an endpoint uses TLS, so it
# is no link dependency.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(ELECTOR_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(ELECTOR_PC_LIBDIR "\${exec_prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(ELECTOR_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(ELECTOR_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(ELECTOR_PC_LIBS_PRIVATE "")
foreach(l ${CMAKE_DL_LIBS})
  string(APPEND ELECTOR_PC_LIBS_PRIVATE " -l${l}")
endforeach()
string(APPEND ELECTOR_PC_LIBS_PRIVATE " -pthread")
# ${prefix} stays literal through the install(CODE) below.
string(REPLACE "\${" "\\\${" _elector_pc_libdir "${ELECTOR_PC_LIBDIR}")
string(REPLACE "\${" "\\\${" _elector_pc_includedir "${ELECTOR_PC_INCLUDEDIR}")
# Written at install time, so that the prefix is the one installed into
# (cmake --install --prefix P), not the one configured.
install(CODE "
  set(ELECTOR_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(ELECTOR_PC_LIBDIR \"${_elector_pc_libdir}\")
  set(ELECTOR_PC_INCLUDEDIR \"${_elector_pc_includedir}\")
  set(ELECTOR_PC_LIBS_PRIVATE \"${ELECTOR_PC_LIBS_PRIVATE}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  configure_file(\"${CMAKE_CURRENT_SOURCE_DIR}/cmake/elector.pc.in\"
                 \"${CMAKE_CURRENT_BINARY_DIR}/elector.pc\" @ONLY)" COMPONENT dev)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/elector.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

if(ELECTOR_TOOL)
  install(TARGETS elector_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tool)
  install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/docs/elector.1
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tool)
  install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/tool/options/elector.bash-completion
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/bash-completion/completions
          RENAME elector COMPONENT tool)
endif()
