# Hostile-client end-to-end tests of `tessera serve`'s HTTP front end
# (js/hostile_http_test.mjs): request smuggling through unread bodies, slowloris, chunked
# bodies past --max-body-bytes, --no-auth on a name that is not loopback, pipelining,
# connection bursts, framing errors, Expect: 100-continue, usage on error events, HTTP/1.0,
# auth-scheme case, /v1/models/{id} and a second SIGTERM. One CTest test per group
# (server_hostile_GROUP); each starts its own server on a free loopback port. node >= 18 with
# its built-in modules only (raw sockets through net), so no npm fixture is needed.
set(SERVER_HOSTILE_JS ${CMAKE_CURRENT_SOURCE_DIR}/js/hostile_http_test.mjs)
# GROUP:TIMEOUT (seconds). The script gives up on a group 10 s before its timeout.
set(SERVER_HOSTILE_GROUPS
    desync:120 slowloris:180 trickle:120 chunked:180 noauth:120 pipeline:120 burst:180
    framing:120 expect:120 usage:300 compat:180)
foreach(entry IN LISTS SERVER_HOSTILE_GROUPS)
  string(REPLACE ":" ";" entry_parts "${entry}")
  list(GET entry_parts 0 group)
  list(GET entry_parts 1 group_timeout)
  add_test(NAME server_hostile_${group}
    COMMAND node ${SERVER_HOSTILE_JS} ${group} $<TARGET_FILE:tessera> ${SERVER_E2E_WORK}/hostile/${group}
            ${SERVER_E2E_WORK}/tiny ${SERVER_E2E_WORK}/slow ${SERVER_E2E_STORIES})
  set_tests_properties(server_hostile_${group} PROPERTIES
    ENVIRONMENT "${TESSERA_TEST_ENVIRONMENT}" FIXTURES_REQUIRED server_models LABELS e2e
    TIMEOUT ${group_timeout})
endforeach()
# These two measure latency and completion under load: no other test beside them.
set_tests_properties(server_hostile_slowloris server_hostile_burst PROPERTIES RUN_SERIAL TRUE)
