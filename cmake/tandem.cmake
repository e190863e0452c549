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
  tandem_export_name(${name})
endfunction()
