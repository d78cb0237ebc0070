# muster_options: the compile and link options of every target muster builds from its own
# sources (warnings, -Werror under MUSTER_WERROR, the sanitizer MUSTER_SANITIZE names), as
# one INTERFACE target each target links PRIVATE, instead of directory-wide
# add_compile_options: generated code (muster_proto) takes only the sanitizer
# (muster_sanitize), and a target's options show on the target.
#   MUSTER_WERROR  OFF by default (a newer compiler's new warning must not break a user's
#                  build); scripts/test.sh (CI) turns it on, for gcc and clang builds.
option(MUSTER_WERROR "Treat compiler warnings as errors (CI turns it on)" OFF)
include(${CMAKE_CURRENT_LIST_DIR}/MusterSanitize.cmake)

add_library(muster_options INTERFACE)
# Designated initializers leave defaulted members out on purpose (STYLE: aggregates are
# built by name); gcc 12 would warn about each.
target_compile_options(muster_options INTERFACE
  -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
  $<$<BOOL:${MUSTER_WERROR}>:-Werror>)
# clang checks the locking the code declares (docs/design.md §4.10): a member
# is ABSL_GUARDED_BY(mu_), a function that expects the lock ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_),
# the lock is base/mutex.h's Mutex (absl::Mutex); a warning is an error under MUSTER_WERROR,
# as every other. gcc has no such analysis; its builds ignore the annotations.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  target_compile_options(muster_options INTERFACE -Wthread-safety)
endif()
target_link_libraries(muster_options INTERFACE muster_sanitize)

# MUSTER_UNITY  ON by default: each target compiles its sources in batches of 16 (CMake's
#               unity build), so one compiler run parses spdlog, Abseil, gRPC and gtest
#               once per batch instead of once per file. A clean gcc build on 2 cores takes
#               229 s instead of 427 s. Turn it OFF (scripts/build.sh -DMUSTER_UNITY=OFF)
#               for edit-compile loops with ccache, where only the edited file recompiles.
#               A file's anonymous-namespace names share the batch: two files of a target
#               cannot both define a helper of the same name and signature.
option(MUSTER_UNITY "Compile each target's sources in batches (a CMake unity build)" ON)
if(MUSTER_UNITY)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 16)
  # gcc's -Wsubobject-linkage fires for a class of one .cc whose member's type sits in that
  # file's anonymous namespace, once the file is #included into a batch: the batching, not
  # a bug (the same class is in one translation unit either way).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(muster_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-subobject-linkage>)
  endif()
endif()
