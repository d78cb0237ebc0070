# muster_test(NAME SOURCES a.cc b.cc DEPS lib1 lib2): one gtest binary, one line. Each of
# its cases is a ctest test of its own, named NAME.Suite.Case (gtest_discover_tests), so
# `ctest -N` lists every case and `ctest -R` picks one; scripts/sanitize.sh selects
# executables by NAME.
find_package(GTest REQUIRED)
include(GoogleTest)
function(muster_test name)
  cmake_parse_arguments(T "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_DEPS} muster_options GTest::gtest GTest::gtest_main)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  # PRE_TEST: the case list is read when ctest runs, not at link time, so a sanitizer build
  # that builds only some test binaries configures and links the way it did before.
  gtest_discover_tests(${name} TEST_PREFIX "${name}." DISCOVERY_MODE PRE_TEST
                       DISCOVERY_TIMEOUT 30)
endfunction()
