# `cmake --install`: the public headers, libwick.so and libwick.a, the wick program (and
# wick-parity, which `wick parity` runs), the CMake package (find_package(wick CONFIG), targets
# wick::wick and wick::wick_static, the backends as components) and wick.pc for pkg-config.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/wick DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(_wick_installed wick_static)
if(TARGET wick_shared)
  list(APPEND _wick_installed wick_shared)
endif()
install(TARGETS ${_wick_installed} EXPORT wickTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT wick_dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET wick_cli)
  install(TARGETS wick_cli wick_parity_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  # `wick generate` with no --model runs it (tools/wick/generate.cpp looks beside the program).
  install(FILES ${PROJECT_SOURCE_DIR}/models/tiny.gguf DESTINATION ${CMAKE_INSTALL_DATADIR}/wick)
endif()

set(WICK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/wick)
install(EXPORT wickTargets NAMESPACE wick:: DESTINATION ${WICK_CMAKE_DIR})
# The backends this build holds, the package's components.
set(WICK_COMPONENTS CPU)
if(WICK_CUDA)
  list(APPEND WICK_COMPONENTS CUDA)
elseif(WICK_ROCM)
  list(APPEND WICK_COMPONENTS ROCm)
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/wickConfig.cmake.in ${PROJECT_BINARY_DIR}/wickConfig.cmake
  INSTALL_DESTINATION ${WICK_CMAKE_DIR})
# 0.y releases may break the ABI (the SONAME names the minor version): only the same minor matches.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_wick_compat SameMinorVersion)
else()
  set(_wick_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wickConfigVersion.cmake COMPATIBILITY ${_wick_compat})
install(FILES ${PROJECT_BINARY_DIR}/wickConfig.cmake ${PROJECT_BINARY_DIR}/wickConfigVersion.cmake
  DESTINATION ${WICK_CMAKE_DIR})

# wick.pc: -lwick is the shared library; `pkg-config --static` adds what libwick.a needs.
set(WICK_PC_LIBS_PRIVATE "-fopenmp -lopenblas -lpcre2-8 -ldl -lpthread")
if(WICK_CUDA)
  string(APPEND WICK_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcudnn")
elseif(WICK_ROCM)
  string(APPEND WICK_PC_LIBS_PRIVATE " -L${WICK_ROCM_PATH}/lib -lamdhip64 -lrocblas -lMIOpen")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/wick.pc.in ${PROJECT_BINARY_DIR}/wick.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/wick.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
