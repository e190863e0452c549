# `cmake --install` layout of the tandem package:
#   <prefix>/lib/libtandem_*.a                   the layer libraries
#   <prefix>/include/{framework,checkpoint,serving,hooks,estimator}/**.h, framework/protos/*.pb.h,
#   <prefix>/include/apps/trainer/trainer_main.h public headers, paths as in the tree
#   <prefix>/lib/cmake/tandem/                   tandemConfig.cmake (+ version, targets,
#                                                TandemTrainer.cmake)
#   <prefix>/bin/ckpt                            the checkpoint tool
# Included last by the top CMakeLists, once every target exists.
include(CMakePackageConfigHelpers)

set(TANDEM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/tandem)

# Every library a user's trainer may link, bottom layer first. hooks, estimator and
# trainer_main are built only once their sources exist.
set(_tandem_libraries
    tandem_core tandem_protos tandem_tensor tandem_graph tandem_kernels tandem_cpu_kernels
    tandem_cuda_kernels
    tandem_ops tandem_feature_column tandem_runtime tandem_data tandem_distributed_base
    tandem_distributed
    tandem_distributed_rpc tandem_checkpoint tandem_serving tandem_serving_rest
    tandem_hooks tandem_estimator tandem_trainer_main)
set(_tandem_installed)
foreach(_lib ${_tandem_libraries})
  if(TARGET ${_lib})
    list(APPEND _tandem_installed ${_lib})
  endif()
endforeach()

install(TARGETS ${_tandem_installed}
        EXPORT tandemTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT tandemTargets
        NAMESPACE tandem::
        FILE tandemTargets.cmake
        DESTINATION ${TANDEM_INSTALL_CMAKEDIR})
if(TARGET ckpt)
  install(TARGETS ckpt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET trainer)
  install(TARGETS trainer RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# Public headers, paths kept so "estimator/model.h" resolves against <prefix>/include.
foreach(_dir framework checkpoint serving hooks estimator)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_dir}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/apps/trainer/trainer_main.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/apps/trainer)
install(DIRECTORY ${PROJECT_BINARY_DIR}/framework/protos/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/framework/protos
        FILES_MATCHING PATTERN "*.pb.h"
        PATTERN "CMakeFiles" EXCLUDE)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tandemConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/tandemConfig.cmake
                              INSTALL_DESTINATION ${TANDEM_INSTALL_CMAKEDIR})
# 0.x: minor versions may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tandemConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tandemConfig.cmake
              ${PROJECT_BINARY_DIR}/tandemConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/TandemTrainer.cmake
        DESTINATION ${TANDEM_INSTALL_CMAKEDIR})
