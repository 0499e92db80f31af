# CPack: `cpack -G DEB` in a build directory makes sluice-dev_<version>_all.deb
# (headers, CMake package, pkg-config file, license), installed under /usr.

# The Debian license statement (machine-readable copyright format), made from
# LICENSE: the copyright line, then the text indented, blank lines as " .".
file(STRINGS ${PROJECT_SOURCE_DIR}/LICENSE sluice_license_lines)
set(SLUICE_COPYRIGHT "")
set(SLUICE_LICENSE_TEXT "")
set(sluice_previous_blank TRUE)
foreach(line IN LISTS sluice_license_lines)
  if(line MATCHES "^Copyright \\(c\\) (.*)$")
    set(SLUICE_COPYRIGHT "${CMAKE_MATCH_1}")
  elseif(line STREQUAL "MIT License")
    # The title and the copyright line are fields of their own, not text.
  elseif(line STREQUAL "")
    if(NOT sluice_previous_blank)
      string(APPEND SLUICE_LICENSE_TEXT " .\n")
    endif()
    set(sluice_previous_blank TRUE)
  else()
    string(APPEND SLUICE_LICENSE_TEXT " ${line}\n")
    set(sluice_previous_blank FALSE)
  endif()
endforeach()
string(REGEX REPLACE "\n$" "" SLUICE_LICENSE_TEXT "${SLUICE_LICENSE_TEXT}")
if(SLUICE_COPYRIGHT STREQUAL "" OR SLUICE_LICENSE_TEXT STREQUAL "")
  message(FATAL_ERROR "Sluice: LICENSE has no copyright line or no text")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/copyright.in ${PROJECT_BINARY_DIR}/deb/copyright @ONLY)

# Debian looks for the license in /usr/share/doc/<package>/copyright; only the
# package gets it (component "deb", not installed by cmake --install).
install(FILES ${PROJECT_BINARY_DIR}/deb/copyright
  DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/sluice-dev
  COMPONENT deb EXCLUDE_FROM_ALL)

set(SLUICE_DEB_MAINTAINER "The Sluice authors" CACHE STRING
    "Maintainer field of the Debian package (Name <email>)")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sluice-dev)
set(CPACK_PACKAGE_VENDOR "The Sluice authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
# CPack turns each line into a continuation line of the control file.
string(JOIN "\n" CPACK_PACKAGE_DESCRIPTION
  "Sluice is a header-only C++17 in-process message bus: many producer threads"
  "publish lock-free into a bounded ring and one consumer thread dispatches to"
  "typed subscriptions. Priority admission refuses LOW, then MEDIUM messages as"
  "the ring fills and keeps room for HIGH."
  ""
  "This package holds the headers, a CMake package (find_package(sluice)) and a"
  "pkg-config file (sluice). Consumers compile with -std=c++17 or later."
  "License: MIT.")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${SLUICE_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Headers only: no shared-library dependencies to compute.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Everything in one package: the default component and the Debian-only files.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL Unspecified deb)
include(CPack)
