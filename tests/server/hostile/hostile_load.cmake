# Hostile-load end-to-end tests of `tessera serve` (issue #43): what a client holding a valid
# API key could do to everyone else (huge JSON objects, bursts past the queue, big task jobs
# beside a streaming model, readers that never read, prefix-cache probes across keys). One
# CTest test per group (server_hostile_load_GROUP), each a module GROUP.mjs here run by
# run.mjs; each starts its own servers on free loopback ports and is bounded in count and time.
# Their latency figures need the machine to themselves: RUN_SERIAL.
set(SERVER_HOSTILE_LOAD_DIR ${CMAKE_CURRENT_LIST_DIR})
# GROUP:TIMEOUT (seconds). run.mjs gives up on a group 10 s before its timeout.
set(SERVER_HOSTILE_LOAD_GROUPS
    json_bodies:120  # huge JSON objects refused in linear time
    deadline:120     # a deadline cancels only its job
    fair_models:120  # a big job on one model beside another model's stream
    burst:90         # 60 streams past --max-active 4 --max-queued 4
    nonreaders:90    # 8 streams that never read, --stall-timeout 2
    cache_probe:120  # another key's cached_tokens is 0; API key file and reload
)
foreach(entry IN LISTS SERVER_HOSTILE_LOAD_GROUPS)
  string(REPLACE ":" ";" entry_parts "${entry}")
  list(GET entry_parts 0 group)
  list(GET entry_parts 1 group_timeout)
  add_test(NAME server_hostile_load_${group}
    COMMAND node ${SERVER_HOSTILE_LOAD_DIR}/run.mjs ${group} ${group_timeout} $<TARGET_FILE:tessera>
            ${SERVER_E2E_WORK}/hostile_load/${group} ${SERVER_E2E_WORK} ${SERVER_E2E_STORIES})
  set_tests_properties(server_hostile_load_${group} PROPERTIES
    ENVIRONMENT "${TESSERA_TEST_ENVIRONMENT}" FIXTURES_REQUIRED server_models LABELS e2e
    TIMEOUT ${group_timeout} RUN_SERIAL TRUE)
endforeach()
