#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Reloading the configuration (issue 25): `spacectl daemon reload` and SIGHUP re-read spaced.conf while a sandbox
# runs. A good file applies at once: the sandbox keeps its profile's name and its next connection is decided by
# the profile's new definition (a tightened profile refuses what it allowed a moment before, a real connection
# from the guest to a server here); a bad file is refused with its line and the reason, and the configuration in
# use stays; a setting that takes a restart (listen) keeps its value and is named; `spacectl info` says which
# file is loaded and when. The sandbox runs through all of it.
. "$(dirname "$0")/lib.sh"

space_env_setup
S=127.0.35.2 T=127.0.35.3
mkdir -p "$TEST_TMP/www" && echo hello-t35 >"$TEST_TMP/www/index.html"
python3 -m http.server --bind $S --directory "$TEST_TMP/www" 8080 >"$TEST_TMP/http.log" 2>&1 &
track_pid $!
wait_for 20 curl -sf "http://$S:8080/index.html" || bail_out "the test's web server on $S:8080 did not start"

tcp_config "egress_profile = lab: allow $S:8080"
LISTEN_LINE="listen = 127.0.0.1:$API_PORT"
start_daemon_tcp
create_sandbox SB --name t35 --egress lab
[ -n "$SB" ] || { last_diag; bail_out "create failed"; }
pass "a sandbox with the profile lab"

# guest_get: an HTTP GET of $S:8080 from the guest through the egress proxy; body in $OUT
# (through the proxy: 127.0.35.2 is the guest's own loopback to a plain socket; no -T, on which busybox 1.35's
# wget crashes here)
guest_get() { run timeout -k 5 60 "$SPACECTL_BIN" exec "$SB" -- wget -q -O - "http://$S:8080/index.html"; }
guest_get
check_contains "the guest reaches $S:8080, which lab allows" hello-t35 "$OUT" || last_diag

check_rc "spacectl info" 0 sc info
check_match "... names the configuration file and when it was read" "^Config: +$SPACE_CONFIG \(read 20[0-9-]+T" \
        "$(grep '^Config:' "$OUT")"
check_contains "... and the profiles loaded" "1 egress profile(s)" "$OUT"
sc info --json >"$TEST_TMP/info0.json"
LOADED0=$(json "$TEST_TMP/info0.json" 'd["config"]["loaded_at"]')

# ---- tighten: lab now allows another address only
sleep 1 # loaded_at has a resolution of seconds
write_config "$LISTEN_LINE" "egress_profile = lab: allow $T:8080"
check_rc "daemon reload of a good file exits 0" 0 sc daemon reload
check_match "... says what it read" "^reloaded $SPACE_CONFIG \(read .*\): 1 egress profile\(s\)" "$(cat "$OUT")"
check_eq "... with nothing on stderr" "" "$(cat "$ERR")"
guest_get
check_rc "the running sandbox's next connection follows lab's new definition: refused" 0 test "$RC" -ne 0
check_rc "egress test agrees" 1 sc egress test "$SB" "$S:8080"
check_rc "the sandbox runs on" 0 sc exec "$SB" -- true
sc info --json >"$TEST_TMP/info1.json"
check_rc "info: loaded_at moved on" 0 test "$(json "$TEST_TMP/info1.json" 'd["config"]["loaded_at"]')" != "$LOADED0"

# ---- a bad file is refused whole, and the configuration in use stays
write_config "$LISTEN_LINE" "egress_profile = lab: allow $S:8080" "egress_profile = bad name: allow x.test"
check_rc "daemon reload of a bad file exits 1" 1 sc daemon reload
check_contains "... naming the line" "$SPACE_CONFIG:6:" "$ERR"
check_contains "... and saying nothing changed" "the configuration in use stays as it was" "$ERR"
check_rc "... so lab still refuses $S" 1 sc egress test "$SB" "$S:8080"
write_config "$LISTEN_LINE" "no_such_key = 1"
ureq POST /v1/daemon/reload
check_status "POST /v1/daemon/reload of a file with an unknown key: 400" 400 invalid_argument
check_contains "... the message names the line and what lines may be" "spaced.conf:5: expected one of" "$OUT"

# ---- SIGHUP does the same
write_config "$LISTEN_LINE" "egress_profile = lab: allow $S:8080"
DPID=$(daemon_pid)
kill -HUP "$DPID"
egress_allows_s() { sc egress test "$SB" "$S:8080"; }
check_rc "after SIGHUP lab allows $S again" 0 wait_for 20 egress_allows_s
guest_get
check_contains "... and the guest reaches it" hello-t35 "$OUT" || last_diag
check_rc "SIGHUP left the daemon running" 0 pid_alive "$DPID"

# ---- a setting that takes a restart keeps its value and is named
write_config "listen = 127.0.0.1:$(free_port)" "egress_profile = lab: allow $S:8080"
check_rc "daemon reload with a new listen address exits 0" 0 sc daemon reload --json
check_eq "... and names listen as needing a restart" '["listen"]' "$(json "$OUT" 'd["restart_needed"]')"
check_rc "... the API still answers where it did" 0 tcp_answers
run sc daemon reload
check_contains "... as a warning on stderr" "'listen' changed in the file but keeps its value until spaced restarts" "$ERR"

check_rc "daemon reload with an argument is a usage error (2)" 2 sc daemon reload extra
check_rc "daemon with no sub-verb is a usage error (2)" 2 sc daemon
check_rc "the sandbox ran through all of it" 0 sc exec "$SB" -- true
check_eq "... under its name and profile" '["lab"]' "$(sc inspect t35 --json | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["egress_profiles"]))')"

done_testing
