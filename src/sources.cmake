# SPDX-License-Identifier: MIT
# The library's sources, one list per layer, bottom to top (docs/DESIGN.md,
# "Layers"). Included by the top CMakeLists.txt and by fuzz/CMakeLists.txt.
# A layer's files may include the headers of their own folder and the
# *_internal.h of the layers below; scripts/check-layers.sh checks that.
set(ELECTOR_SRC_DIR ${CMAKE_CURRENT_LIST_DIR})
set(ELECTOR_LAYERS transport etcd election driver)

set(ELECTOR_TRANSPORT_SRCS
  autosync.c
  buf.c
  call.c
  conn.c
  endpoint.c
  engine.c
  grpc.c
  h2.c
  ping.c
  reply.c
  ssl_lazy.c
  sync.c
  timer.c
  tls.c
  tls_reload.c
  util.c
  version.c)
set(ELECTOR_ETCD_SRCS
  keys.c
  kv.c
  lease.c
  watch.c)
set(ELECTOR_ELECTION_SRCS
  campaign.c
  election.c
  leader.c
  names.c
  observe.c
  pacer.c
  release.c
  release_find.c
  release_helper.c
  session.c
  session_close.c
  session_notify.c
  session_view.c
  wait.c)
# The public API of both ways to drive a client: the caller's loop (the core
# below) or its own thread (own_thread: the loop thread, the callback thread).
set(ELECTOR_DRIVER_SRCS
  api_election.c
  api_etcd.c
  api_kv.c
  api_ops.c
  api_session.c
  loop_thread.c
  callback_thread.c)

set(ELECTOR_LAYER_DIRS)
set(ELECTOR_SRCS)
foreach(layer ${ELECTOR_LAYERS})
  string(TOUPPER ${layer} L)
  list(TRANSFORM ELECTOR_${L}_SRCS PREPEND ${ELECTOR_SRC_DIR}/${layer}/)
  list(APPEND ELECTOR_SRCS ${ELECTOR_${L}_SRCS})
  list(APPEND ELECTOR_LAYER_DIRS ${ELECTOR_SRC_DIR}/${layer})
endforeach()
