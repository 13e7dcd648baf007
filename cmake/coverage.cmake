# SPDX-License-Identifier: MIT
# The coverage build (-DELECTOR_COVERAGE=ON; scripts/coverage.sh, docs/COVERAGE.md).
# Everything compiled with --coverage -O0. Processes that leave through _exit()
# or exec*() would not write their counters (libgcov writes them at exit()):
# every program and library is linked with --wrap for those functions and
# test/covwrap.c, whose wrappers call __gcov_dump() first. That object is
# compiled here, at configure time, without --coverage.
if(NOT CMAKE_C_COMPILER_ID STREQUAL "GNU")
  message(FATAL_ERROR "ELECTOR_COVERAGE needs gcc (gcov, gcovr)")
endif()
if(ELECTOR_SANITIZE OR ELECTOR_TSAN)
  message(FATAL_ERROR "ELECTOR_COVERAGE excludes ELECTOR_SANITIZE and ELECTOR_TSAN")
endif()
set(ELECTOR_COVWRAP_O ${CMAKE_BINARY_DIR}/covwrap.o)
execute_process(
  COMMAND ${CMAKE_C_COMPILER} -std=c11 -O1 -fPIC -Wall -Wextra -Werror -c
          ${CMAKE_CURRENT_LIST_DIR}/../test/covwrap.c -o ${ELECTOR_COVWRAP_O}
  RESULT_VARIABLE _covwrap_rc)
if(NOT _covwrap_rc EQUAL 0)
  message(FATAL_ERROR "test/covwrap.c does not compile")
endif()
# Which of them the sources call: grep -rnE '\b(_exit|exec[lv]p?e?|raise)\s*\(' src tool test fault
add_compile_options(--coverage -O0)
add_link_options(--coverage
  -Wl,--wrap=_exit,--wrap=execl,--wrap=execv,--wrap=execvp,--wrap=execve,--wrap=raise
  ${ELECTOR_COVWRAP_O})

# The fuzz targets of fuzz/ as programs (fuzz/replay_main.c) that run their
# corpora once: what the fuzzers found adds to the coverage measured.
function(elector_coverage_fuzz_replay)
  set(dir ${PROJECT_SOURCE_DIR}/fuzz)
  foreach(t grpc_recv grpc_engine election endpoints tool_args)
    set(src ${t})
    if(t STREQUAL "grpc_engine")
      set(src grpc_recv)
    endif()
    add_executable(elector_replay_${t} ${dir}/fuzz_${src}.c ${dir}/replay_main.c)
    set_target_properties(elector_replay_${t} PROPERTIES OUTPUT_NAME replay_fuzz_${t}
                          RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fuzz)
    target_include_directories(elector_replay_${t} PRIVATE ${ELECTOR_LAYER_DIRS})
    target_link_libraries(elector_replay_${t} PRIVATE elector PkgConfig::OPENSSL)
    if(t STREQUAL "grpc_engine")
      target_compile_definitions(elector_replay_${t} PRIVATE FUZZ_ENGINE=1)
    elseif(t STREQUAL "tool_args")
      target_link_libraries(elector_replay_${t} PRIVATE elector_toolcore)
    endif()
  endforeach()
endfunction()
