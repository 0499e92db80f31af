# sluice_bench, its report library, the peers it compares against and its
# CTest runs. Included from benchmarks/CMakeLists.txt once nlohmann-json and
# CLI11 are available.

# The report model (JSON, compare, text, Markdown, HTML): tested on its own.
add_library(sluice_bench_report STATIC report/report.cpp report/html.cpp report/markdown.cpp)
target_include_directories(sluice_bench_report PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_features(sluice_bench_report PUBLIC cxx_std_17)
target_link_libraries(sluice_bench_report PUBLIC nlohmann_json::nlohmann_json PRIVATE sluice_warnings)

# The flags the figures were measured with, printed with every table.
string(TOUPPER "${CMAKE_BUILD_TYPE}" sluice_build_type)
set(sluice_bench_flags "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${sluice_build_type}}")
string(STRIP "${sluice_bench_flags}" sluice_bench_flags)
if(sluice_bench_flags STREQUAL "")
  set(sluice_bench_flags "no optimisation flags")
endif()

add_executable(sluice_bench
  sluice_bench.cpp
  harness/deadline.cpp
  harness/platform.cpp
  scenarios/common.cpp
  scenarios/admission_scenarios.cpp
  scenarios/backlog_scenario.cpp
  scenarios/latency_scenario.cpp
  scenarios/loan_scenario.cpp
  scenarios/memory_scenario.cpp
  scenarios/one_core_scenario.cpp
  scenarios/scaling_scenario.cpp
  scenarios/publish_scenarios.cpp
  scenarios/throughput_scenarios.cpp
  scenarios/peer_scenario.cpp
  scenarios/soak_scenario.cpp
  scenarios/sleep_scenario.cpp)
target_include_directories(sluice_bench PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(sluice_bench PRIVATE
  SLUICE_BENCH_FLAGS="${CMAKE_BUILD_TYPE}: ${sluice_bench_flags}")
target_link_libraries(sluice_bench PRIVATE sluice::sluice sluice_bench_report CLI11::CLI11
                                           Threads::Threads sluice_warnings)

# Peers for the side-by-side comparison: each optional, skipped with a message.
sluice_use_peers(sluice_bench)
find_package(cppzmq QUIET)
if(cppzmq_FOUND)
  target_link_libraries(sluice_bench PRIVATE cppzmq)
  target_compile_definitions(sluice_bench PRIVATE SLUICE_PEER_ZEROMQ=1)
else()
  message(STATUS "Sluice peers: ZeroMQ not found (libzmq3-dev, cppzmq-dev); skipped")
endif()

if(SLUICE_BUILD_TESTS)
  # Smoke runs: the binary and its JSON, compare and HTML paths work. No
  # figure is asserted; the burst table's PASS line is behaviour, not speed.
  set(smoke_dir ${CMAKE_CURRENT_BINARY_DIR}/smoke)
  file(MAKE_DIRECTORY ${smoke_dir})
  add_test(NAME bench_smoke_report
    COMMAND sluice_bench --suite smoke --json ${smoke_dir}/baseline.json
            --html ${smoke_dir}/report.html --markdown ${smoke_dir}/report.md)
  set_tests_properties(bench_smoke_report PROPERTIES
    FIXTURES_SETUP bench_baseline
    PASS_REGULAR_EXPRESSION "PASS: no HIGH message lost")
  add_test(NAME bench_smoke_compare_self
    COMMAND sluice_bench --suite smoke --only burst,memory --compare ${smoke_dir}/baseline.json)
  set_tests_properties(bench_smoke_compare_self PROPERTIES FIXTURES_REQUIRED bench_baseline)
  # A baseline whose slots were smaller must be reported as a regression.
  add_test(NAME bench_smoke_compare_detects_regression
    COMMAND sluice_bench --suite smoke --only memory
            --compare ${PROJECT_SOURCE_DIR}/tests/data/regressed_baseline.json)
  set_tests_properties(bench_smoke_compare_detects_regression PROPERTIES
    PASS_REGULAR_EXPRESSION "REGRESSION: at least one figure is worse")
  # The soak's exactly-once check, briefly, with more producers than cores.
  add_test(NAME bench_soak_smoke COMMAND sluice_bench --suite soak --duration 2 --producers 4)
  set_tests_properties(bench_soak_smoke PROPERTIES
    PASS_REGULAR_EXPRESSION "PASS: every admitted message arrived exactly once")
  # A saved report renders again without measuring.
  add_test(NAME bench_render_saved_report
    COMMAND sluice_bench --from-json ${smoke_dir}/baseline.json --html ${smoke_dir}/rendered.html
            --markdown ${smoke_dir}/rendered.md)
  set_tests_properties(bench_render_saved_report PROPERTIES
    FIXTURES_REQUIRED bench_baseline
    PASS_REGULAR_EXPRESSION "5. Backpressure burst")
  add_test(NAME bench_rejects_unknown_table COMMAND sluice_bench --only nonsense)
  set_tests_properties(bench_rejects_unknown_table PROPERTIES WILL_FAIL TRUE)

  # Runs sluice_bench and checks its exit status and its output together:
  #   sluice_bench_expect(name rc ARGS ... [EXPECT re] [REJECT re]
  #                       [FILE path [FILE_EXPECT re] [FILE_REJECT re]])
  function(sluice_bench_expect name rc)
    cmake_parse_arguments(arg "" "EXPECT;REJECT;FILE;FILE_EXPECT;FILE_REJECT" "ARGS" ${ARGN})
    list(JOIN arg_ARGS "|" joined)
    set(defines -DBENCH=$<TARGET_FILE:sluice_bench> "-DARGS=${joined}" -DRC=${rc})
    foreach(key EXPECT REJECT FILE FILE_EXPECT FILE_REJECT)
      if(DEFINED arg_${key})
        list(APPEND defines "-D${key}=${arg_${key}}")
      endif()
    endforeach()
    add_test(NAME ${name}
      COMMAND ${CMAKE_COMMAND} ${defines} -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/expect_run.cmake)
  endfunction()
  set(data ${PROJECT_SOURCE_DIR}/tests/data)

  # --compare must have compared something, with a baseline of the right shape.
  sluice_bench_expect(bench_compare_rejects_disjoint_baseline 2
    ARGS --suite smoke --only memory --compare ${data}/disjoint_baseline.json
    EXPECT "shares no metric with this run")
  sluice_bench_expect(bench_compare_rejects_empty_metrics 2
    ARGS --suite smoke --only memory --compare ${data}/empty_metrics_baseline.json
    EXPECT "metrics.* must be an array" REJECT "\\[1/1\\]")
  sluice_bench_expect(bench_compare_rejects_other_format 2
    ARGS --suite smoke --only memory --compare ${data}/wrong_format_baseline.json
    EXPECT "format is \"some-other-report/3\"")
  # A gated metric missing from the run is named and fails; another CPU warns.
  sluice_bench_expect(bench_compare_names_missing_metric 1
    ARGS --suite smoke --only memory --compare ${data}/missing_gated_baseline.json
    EXPECT "MISSING[^\n]*memory.slot_bytes.24B.262144.*warning: different CPU")
  # CPU % counts from the start signal, so it cannot exceed 100 % per core
  # (5 % allowed for the resolution of the process CPU clock).
  sluice_bench_expect(bench_load_cpu_within_cores 0
    ARGS --suite smoke --only load --duration 0.002 --json ${smoke_dir}/load.json
    FILE ${smoke_dir}/load.json JSON_MAX_PER_CORE "^load\\..*\\.cpu_percent$=105")
  # The sustained timer starts with the producers, however many there are.
  sluice_bench_expect(bench_sustained_many_producers 0
    ARGS --suite smoke --only sustained --producers 256 --duration 0.2
    REJECT "MPSC +(consumer [^ ]+ ns/msg|free-running) +0 ")
  # --duration is a finite number of seconds within a stated bound.
  foreach(bad nan 1e300 1e10 inf)
    sluice_bench_expect(bench_rejects_duration_${bad} 2
      ARGS --suite smoke --only memory --duration ${bad}
      EXPECT "--duration: must be a finite number from 0.001 to 86400")
  endforeach()
  sluice_bench_expect(bench_rejects_duration_0 2
    ARGS --suite smoke --only memory --duration 0
    EXPECT "--duration: must be a finite number from 0.001 to 86400" REJECT "[0-9]{30}")
  sluice_bench_expect(bench_rejects_nan_consumer_work 2
    ARGS --suite smoke --only memory --consumer-work-ns nan EXPECT "--consumer-work-ns")
  # --only with --from-json keeps the selected tables' metrics and no others.
  sluice_bench_expect(bench_render_only_keeps_its_metrics 0
    ARGS --from-json ${smoke_dir}/baseline.json --only memory --json ${smoke_dir}/memory.json
    FILE ${smoke_dir}/memory.json FILE_EXPECT "memory.slot_bytes"
    FILE_REJECT "\"(modes|batch|latency|noise|dispatch|burst|sustained|load|subscribers|payload|peers)\\.")
  set_tests_properties(bench_render_only_keeps_its_metrics PROPERTIES
    FIXTURES_REQUIRED bench_baseline)
  # The load rows' throughput counts admitted messages; attempts are context.
  sluice_bench_expect(bench_load_counts_admitted 0
    ARGS --suite smoke --only load --duration 0.02 --json ${smoke_dir}/load_admitted.json
    FILE ${smoke_dir}/load_admitted.json
    FILE_EXPECT "\"better\": \"higher\",[^}]*\"name\": \"load.unlimited.admitted_per_second\""
    FILE_REJECT "achieved_per_second")
  # Outputs are checked before measuring, and after the last byte is flushed.
  sluice_bench_expect(bench_full_device_fails 2
    ARGS --suite smoke --only memory --markdown /dev/full EXPECT "cannot write /dev/full")
  sluice_bench_expect(bench_unwritable_output_fails_first 2
    ARGS --suite smoke --only memory --json ${smoke_dir}/early.json
         --html ${smoke_dir}/no/such/folder/report.html
    EXPECT "cannot write .*no/such/folder/report.html" REJECT "\\[1/1\\]")
  # One round has no spread: "n/a", not "+- 0.00".
  sluice_bench_expect(bench_one_round_has_no_spread 0
    ARGS --suite smoke --only modes,batch,dispatch --rounds 1
    EXPECT "\\+- n/a" REJECT "\\+- 0\\.00")
  # Every table with latencies says how coarse the clock is.
  sluice_bench_expect(bench_latency_discloses_clock_step 0
    ARGS --suite smoke --only latency,load --duration 0.02
    EXPECT "3\\. End-to-end latency.*clock step: .* ns.*7\\. Load scenarios.*clock step: .* ns")
  # No row can hang (harness/deadline.hpp). A peer row that cannot make
  # progress ends at its deadline as "not finished" and the run succeeds; a
  # Sluice row that cannot fails the run; a row stuck in a call that cannot
  # poll its deadline is ended by the watchdog (here deadline + 1 s), exit 3.
  sluice_bench_expect(bench_unfinished_peer_row_is_reported 0
    ARGS --only selftest-peer --row-deadline 1
    EXPECT "a peer that refuses every push +not finished.*Not finished: .*retried a full queue until the 1 s deadline.*does not fail the run")
  sluice_bench_expect(bench_unfinished_sluice_row_fails_the_run 3
    ARGS --only selftest-sluice --row-deadline 1
    EXPECT "MPSC, closed +not finished.*measurement failed: selftest-sluice: MPSC, closed did not finish")
  sluice_bench_expect(bench_watchdog_ends_a_stuck_row 3
    ARGS --only selftest-blocking --row-deadline 1 --watchdog-grace 1
    EXPECT "watchdog: the row 'peers: end to end' is still running .* past its 1 s deadline")
  # The band is a finite percentage.
  sluice_bench_expect(bench_rejects_nan_noise_band 2
    ARGS --suite smoke --only memory --noise-band nan EXPECT "--noise-band.*finite number")
endif()

