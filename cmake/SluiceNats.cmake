# The NATS bridge (include/sluice/nats/): the header-only target sluice::nats,
# which adds the NATS C client (nats.c, Debian libnats-dev) to sluice::sluice,
# and its tests, example and benchmark table. Included from the top-level
# CMakeLists.txt when SLUICE_BUILD_NATS is on; skipped with a message when the
# C client is not installed. The core target never depends on it.

# pkg-config's libnats first. The client's CMake package (cnats, target
# cnats::nats) is not loaded: Debian 12's copy names libnats_static.a, which
# libnats-dev does not ship, and then find_package fails the whole configure.
# Without pkg-config (or when cross-compiling, where it would describe the
# host's library) the header and library are looked up directly.
set(sluice_nats_client "")
if(NOT CMAKE_CROSSCOMPILING)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(SLUICE_LIBNATS QUIET IMPORTED_TARGET libnats)
    if(SLUICE_LIBNATS_FOUND)
      set(sluice_nats_client PkgConfig::SLUICE_LIBNATS)
    endif()
  endif()
endif()
if(NOT sluice_nats_client)
  find_path(SLUICE_NATS_INCLUDE_DIR nats/nats.h)
  find_library(SLUICE_NATS_LIBRARY nats)
  if(SLUICE_NATS_INCLUDE_DIR AND SLUICE_NATS_LIBRARY)
    add_library(sluice_nats_client INTERFACE IMPORTED)
    target_include_directories(sluice_nats_client INTERFACE ${SLUICE_NATS_INCLUDE_DIR})
    target_link_libraries(sluice_nats_client INTERFACE ${SLUICE_NATS_LIBRARY})
    set(sluice_nats_client sluice_nats_client)
  endif()
endif()

if(NOT sluice_nats_client)
  message(STATUS "Sluice: the NATS C client was not found (pkg-config libnats, or nats/nats.h "
                 "and libnats; Debian: libnats-dev); the NATS bridge, its tests, example and "
                 "benchmark table are skipped")
  return()
endif()

add_library(sluice_nats INTERFACE)
add_library(sluice::nats ALIAS sluice_nats)
target_link_libraries(sluice_nats INTERFACE sluice::sluice ${sluice_nats_client})
target_compile_features(sluice_nats INTERFACE cxx_std_17)

# Signed frames (sluice/nats/frame_signature.hpp) need OpenSSL's libcrypto,
# for HMAC-SHA256. Without it the bridge builds without them, and a Start
# whose options name a key fails.
find_package(OpenSSL QUIET COMPONENTS Crypto)
if(OpenSSL_FOUND)
  target_link_libraries(sluice_nats INTERFACE OpenSSL::Crypto)
  target_compile_definitions(sluice_nats INTERFACE SLUICE_NATS_HAS_SIGNING=1)
else()
  message(STATUS "Sluice: OpenSSL's libcrypto not found (Debian: libssl-dev); the NATS bridge "
                 "is built without signed frames, and their tests skip")
endif()

find_program(SLUICE_NATS_SERVER nats-server)
if(SLUICE_NATS_SERVER)
  message(STATUS "Sluice: NATS bridge on (${sluice_nats_client}); tests use ${SLUICE_NATS_SERVER}")
else()
  message(STATUS "Sluice: NATS bridge on (${sluice_nats_client}); nats-server not found "
                 "(Debian: nats-server), so the bridge tests that need a server skip and the "
                 "benchmark table reports it missing")
endif()

# The report binary's bridged table (sluice_bench --only nats).
if(TARGET sluice_bench)
  target_sources(sluice_bench PRIVATE ${PROJECT_SOURCE_DIR}/benchmarks/scenarios/nats_scenario.cpp)
  target_compile_definitions(sluice_bench PRIVATE SLUICE_BENCH_NATS=1)
  target_link_libraries(sluice_bench PRIVATE sluice::nats sluice_testing)
endif()

if(SLUICE_BUILD_EXAMPLES)
  add_subdirectory(${PROJECT_SOURCE_DIR}/examples/nats_bridge
                   ${PROJECT_BINARY_DIR}/examples/nats_bridge)
endif()

# The NATS bridge's rows in the shared-memory benchmark's table.
if(TARGET sluice_ipc_sizes_bench)
  target_compile_definitions(sluice_ipc_sizes_bench PRIVATE SLUICE_HAVE_NATS=1)
  if(SLUICE_NATS_SERVER)
    target_compile_definitions(sluice_ipc_sizes_bench PRIVATE
      SLUICE_NATS_SERVER_FOUND="${SLUICE_NATS_SERVER}")
  endif()
  target_link_libraries(sluice_ipc_sizes_bench PRIVATE sluice::nats sluice_testing)
endif()
