# The bare queues the benchmarks compare Sluice against, each optional:
# sluice_use_peers(target) compiles every one found into `target`
# (SLUICE_PEER_* definitions) and names the missing ones once.

# A header-only peer: SLUICE_PEER_<name>=1 where `header` is found.
function(sluice_use_peer_header target name header missing_note reported)
  find_path(SLUICE_${name}_INCLUDE_DIR ${header})
  if(SLUICE_${name}_INCLUDE_DIR)
    target_include_directories(${target} SYSTEM PRIVATE ${SLUICE_${name}_INCLUDE_DIR})
    target_compile_definitions(${target} PRIVATE SLUICE_PEER_${name}=1)
  elseif(NOT reported)
    message(STATUS "Sluice peers: ${missing_note}; skipped")
  endif()
endfunction()

function(sluice_use_peers target)
  get_property(reported GLOBAL PROPERTY SLUICE_PEERS_REPORTED)
  set_property(GLOBAL PROPERTY SLUICE_PEERS_REPORTED TRUE)
  sluice_use_peer_header(${target} ATOMIC_QUEUE atomic_queue/atomic_queue.h
                         "atomic_queue not found (libatomic-queue-dev)" "${reported}")
  sluice_use_peer_header(${target} CONCURRENTQUEUE concurrentqueue/concurrentqueue.h
                         "moodycamel ConcurrentQueue not found (libconcurrentqueue-dev)"
                         "${reported}")
  find_package(Boost 1.65 QUIET)
  if(Boost_FOUND)
    target_link_libraries(${target} PRIVATE Boost::headers)
    target_compile_definitions(${target} PRIVATE SLUICE_PEER_BOOST_LOCKFREE=1)
  elseif(NOT reported)
    message(STATUS "Sluice peers: Boost.Lockfree not found (libboost-dev); skipped")
  endif()
endfunction()
