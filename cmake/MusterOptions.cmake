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
target_link_libraries(muster_options INTERFACE muster_sanitize)
