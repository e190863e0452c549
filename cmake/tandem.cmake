# Helpers shared by every folder's CMakeLists.
include(GNUInstallDirs)

# tandem_export_name(TARGET): a project library `tandem_foo` is `tandem::foo` both in
# this tree (an ALIAS) and in the installed package (EXPORT_NAME under the tandem::
# namespace), so tandem_add_trainer() and users link the same names either way.
function(tandem_export_name name)
  string(REGEX REPLACE "^tandem_" "" short ${name})
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${short})
  add_library(tandem::${short} ALIAS ${name})
endfunction()

# TANDEM_PCH: each library's C++ sources share one precompiled header of the standard,
# abseil and glog headers that most of them include (the quick start's build).
option(TANDEM_PCH "Precompile the common standard, abseil and glog headers per library" OFF)
set(TANDEM_PCH_HEADERS
  <algorithm> <cstdint> <functional> <map> <memory> <optional> <string> <utility> <vector>
  "absl/container/flat_hash_map.h" "absl/status/status.h" "absl/status/statusor.h"
  "absl/strings/str_cat.h" "absl/strings/string_view.h" "absl/synchronization/mutex.h"
  "glog/logging.h")

# tandem_library(NAME SOURCES ... DEPS ...): a static library of project code. Its
# includes are the source and build roots in the tree ("framework/core/status.h",
# "framework/protos/graph.pb.h") and <prefix>/include once installed.
function(tandem_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                            $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}>
                                            $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${name} PUBLIC cxx_std_20)
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${TANDEM_WARNINGS}>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  if(TANDEM_PCH)
    foreach(h ${TANDEM_PCH_HEADERS})
      string(REPLACE ">" "$<ANGLE-R>" h "${h}")  # Inside a generator expression.
      target_precompile_headers(${name} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${h}>")
    endforeach()
  endif()
  tandem_export_name(${name})
endfunction()
