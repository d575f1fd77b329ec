# `cmake --install BUILD --prefix P` installs:
#   P/include/xpd/...              public headers and the generated xpd/config.hpp
#   P/lib/libxpd.a                 the library
#   P/bin/xpd                      the command line
#   P/share/xpd/viewer/            the browser viewer bundle (when it was built), found by `xpd view`
#   P/lib/cmake/xpd/               xpdConfig.cmake, its version file, the exported xpd::xpd target
#                                  and xpd_native_deps.cmake (CHOLMOD, TetGen found again)
# so that an outside project does find_package(xpd REQUIRED) and links xpd::xpd (docs/library.md,
# examples/). The test `package_examples` (tests/package) checks exactly this from the build tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(XPD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/xpd)

install(TARGETS xpd EXPORT xpdTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/library/include/xpd DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/generated/xpd/config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xpd)
install(TARGETS xpd_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The viewer bundle installs itself (viewer/CMakeLists.txt), where its output folder is known.

install(EXPORT xpdTargets NAMESPACE xpd:: DESTINATION ${XPD_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/xpdConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/xpdConfig.cmake
                              INSTALL_DESTINATION ${XPD_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/xpdConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/xpdConfig.cmake ${PROJECT_BINARY_DIR}/xpdConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/xpd_native_deps.cmake
        DESTINATION ${XPD_INSTALL_CMAKEDIR})
