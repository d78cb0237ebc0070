# MUSTER_SANITIZE instruments every target of the build (our code only: Debian's libraries,
# gRPC and Abseil included, stay uninstrumented):
#   OFF      nothing (the default)
#   address  ASan + UBSan (ON means address: the option used to be a bool)
#   thread   TSan
# scripts/sanitize.sh builds build-asan/ (address) and build-tsan/ (thread) and runs the tests.
set(MUSTER_SANITIZE OFF CACHE STRING
    "Instrument the build: OFF, address (ASan+UBSan) or thread (TSan)")
set_property(CACHE MUSTER_SANITIZE PROPERTY STRINGS OFF address thread)

string(TOLOWER "${MUSTER_SANITIZE}" _muster_sanitize)
if(_muster_sanitize MATCHES "^(on|address)$")
  set(_muster_sanitize_flags -fsanitize=address,undefined)
elseif(_muster_sanitize STREQUAL "thread")
  set(_muster_sanitize_flags -fsanitize=thread)
elseif(_muster_sanitize MATCHES "^(off|)$")
  set(_muster_sanitize_flags)
else()
  message(FATAL_ERROR "MUSTER_SANITIZE=${MUSTER_SANITIZE} is not a sanitizer muster knows: "
                      "use -DMUSTER_SANITIZE=address (ASan+UBSan), thread (TSan) or OFF")
endif()

# muster_sanitize: the sanitizer's flags, for every target (muster_options carries it; the
# generated muster_proto links it alone).
add_library(muster_sanitize INTERFACE)
if(_muster_sanitize_flags)
  # Frame pointers: the reports' stacks (and TSan's second stack) stay cheap and complete.
  target_compile_options(muster_sanitize INTERFACE ${_muster_sanitize_flags}
                         -fno-omit-frame-pointer)
  target_link_options(muster_sanitize INTERFACE ${_muster_sanitize_flags})
  message(STATUS "muster: sanitizer build (${_muster_sanitize_flags})")
endif()
