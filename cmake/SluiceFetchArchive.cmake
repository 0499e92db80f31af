# sluice_fetch_archive(name url hint...): makes `name` available with
# FetchContent from the release archive at `url`. The archive is downloaded
# here, once, with short time limits, so that a machine without a network
# fails in about a second instead of retrying for minutes; a failed download
# is a configure error that says what failed and then `hint` (which packages
# to install, which option skips the download). A source tree named by
# FETCHCONTENT_SOURCE_DIR_<NAME>, or one already populated, is used as it is.
include(FetchContent)

function(sluice_fetch_archive name url)
  string(JOIN "" hint ${ARGN})
  string(TOUPPER "${name}" upper)
  get_filename_component(file_name "${url}" NAME)
  set(archive "${CMAKE_BINARY_DIR}/_sluice_downloads/${name}-${file_name}")
  if(NOT FETCHCONTENT_SOURCE_DIR_${upper}
     AND NOT EXISTS "${FETCHCONTENT_BASE_DIR}/${name}-src/CMakeLists.txt"
     AND NOT EXISTS "${archive}")
    message(STATUS "Sluice: ${name} not installed; downloading ${url}")
    file(DOWNLOAD "${url}" "${archive}.part" TIMEOUT 120 INACTIVITY_TIMEOUT 15 STATUS status)
    list(GET status 0 code)
    if(NOT code EQUAL 0)
      file(REMOVE "${archive}.part")
      list(GET status 1 why)
      message(FATAL_ERROR "Sluice: ${name} is not installed, and downloading it failed (${why}).\n"
                          "${hint}")
    endif()
    file(RENAME "${archive}.part" "${archive}")
  endif()
  FetchContent_Declare(${name} URL "${archive}")
  FetchContent_MakeAvailable(${name})
endfunction()
