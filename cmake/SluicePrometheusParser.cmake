# The Prometheus client's own text parser (Debian: python3-prometheus-client),
# which reads what sluice/extras/prometheus.hpp writes in the parse tests of
# examples/ and tests/. Sets SLUICE_PROMETHEUS_PYTHON to a python3 that can
# import it, or to "" (the callers then say what they skip).
if(NOT DEFINED SLUICE_PROMETHEUS_PYTHON)
  set(sluice_prometheus_python "")
  find_package(Python3 COMPONENTS Interpreter QUIET)
  foreach(candidate IN ITEMS "${Python3_EXECUTABLE}" /usr/bin/python3)
    if(candidate AND NOT sluice_prometheus_python)
      execute_process(COMMAND "${candidate}" -c "import prometheus_client.parser"
                      RESULT_VARIABLE import_failed OUTPUT_QUIET ERROR_QUIET)
      if(NOT import_failed)
        set(sluice_prometheus_python "${candidate}")
      endif()
    endif()
  endforeach()
  set(SLUICE_PROMETHEUS_PYTHON "${sluice_prometheus_python}")
endif()
