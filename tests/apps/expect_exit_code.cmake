# cmake -DCMD=<binary> -DEXPECT=<code> [-DARGS="a;b"] -P expect_exit_code.cmake: fails
# unless running CMD with ARGS exits with EXPECT.
execute_process(COMMAND ${CMD} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL EXPECT)
  message(FATAL_ERROR "${CMD} ${ARGS}: exit ${rc}, expected ${EXPECT}\n${out}${err}")
endif()
