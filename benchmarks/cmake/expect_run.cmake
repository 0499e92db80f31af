# Runs sluice_bench and checks its exit status and output together: CTest
# alone checks one or the other. Variables:
#   BENCH   the binary             ARGS    its arguments, separated by '|'
#   RC      the exit status wanted  EXPECT  a regex the output must match
#   REJECT  a regex the output must not match (optional)
#   FILE, FILE_EXPECT, FILE_REJECT  the same for a file the run writes
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${BENCH} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
set(all "${out}${err}")
string(REPLACE "|" " " shown "${ARGS}")
if(NOT rc STREQUAL "${RC}")
  message(FATAL_ERROR "sluice_bench ${shown}: exit status ${rc}, wanted ${RC}\n${all}")
endif()
if(DEFINED EXPECT AND NOT all MATCHES "${EXPECT}")
  message(FATAL_ERROR "sluice_bench ${shown}: output does not match '${EXPECT}'\n${all}")
endif()
if(DEFINED REJECT AND all MATCHES "${REJECT}")
  message(FATAL_ERROR "sluice_bench ${shown}: output matches '${REJECT}'\n${all}")
endif()
if(DEFINED FILE)
  if(NOT EXISTS "${FILE}")
    message(FATAL_ERROR "sluice_bench ${shown}: ${FILE} was not written\n${all}")
  endif()
  file(READ "${FILE}" text)
  if(DEFINED FILE_EXPECT AND NOT text MATCHES "${FILE_EXPECT}")
    message(FATAL_ERROR "${FILE} does not match '${FILE_EXPECT}'")
  endif()
  if(DEFINED FILE_REJECT AND text MATCHES "${FILE_REJECT}")
    message(FATAL_ERROR "${FILE} matches '${FILE_REJECT}'")
  endif()
endif()
message(STATUS "sluice_bench ${shown}: exit ${rc} as wanted\n${all}")
