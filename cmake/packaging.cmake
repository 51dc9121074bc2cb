# Install rules and the .deb (CPack). Nothing here adds build steps: `cmake --install` and
# `cpack` only copy what the build made (measured: cpack with Ninja did not build the
# unbuilt test targets), so build tessera first (docs/install.md).
#
#   cmake --build build --target tessera
#   cmake --install build --prefix ~/.local        # bin/tessera, share/doc/tessera/
#   (cd build && cpack -G DEB)                     # build/tessera_<version>_<arch>.deb
include(GNUInstallDirs)

# The binary is self-contained at run time: the web page (src/server/ui) is embedded at build
# time (cmake/embed_files.cmake) and the worker is the same binary (`tessera worker`).
install(TARGETS tessera RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES README.md SUPPORT.md SECURITY.md CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs FILES_MATCHING PATTERN "*.md")
# Hook for the built-in demo model (stories260k, issue #44): it is meant to be embedded in
# the binary like the web page. If it ships as files instead, install them here, e.g.
#   install(DIRECTORY models/stories260k/ DESTINATION ${CMAKE_INSTALL_DATADIR}/tessera/stories260k)
# together with its licence and source note under ${CMAKE_INSTALL_DOCDIR}, and make the
# binary look there (relative to its own location, so `--prefix` installs keep working).

set(CPACK_PACKAGE_NAME tessera)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "tessera developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "LLM inference runtime (CPU, exact results) with an OpenAI-compatible server")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
  "tessera runs language models on the CPU with results matching a reference, and serves "
  "them through an OpenAI-compatible HTTP API with a built-in web page and task endpoints.")
set(CPACK_PACKAGE_INSTALL_DIRECTORY tessera)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # tessera_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
# Depends: from the shared libraries the binary links (dpkg-shlibdeps), so the list follows
# the build machine's distribution (Debian 12: libc6, libstdc++6, libssl3, libcurl4,
# libpcre2-8-0, libutf8proc2, ...).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_GENERATOR DEB)
include(CPack)
