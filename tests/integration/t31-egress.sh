#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Egress policy (issue 11, first step; space-egress(5)): profiles from spaced.conf and SPACE_EGRESS_PROFILES,
# a wildcard refused at start naming the profile and the rule, profiles chosen at create (--egress, the body,
# X-Space-Egress-Profiles over TCP) and shown by inspect, unknown ones refused, forks keeping them, `egress
# ls|show|test`. test's verdicts: IP literals of 127.0.0.1 and 169.254.169.254 in decimal, octal, hex, short,
# IPv6, IPv4-mapped and NAT64 forms all denied with the reason; an explicit IP rule opening 127.0.0.5:8080 on
# that port only; denies beating allows; SMTP closed; the daemon's own API port denied. A gateway rate of 0 in
# spaced.conf stops the daemon. Names resolve with
# the host's resolver: only `localhost` and literals are used here (no /etc/hosts edits). Enforcement on
# real connections is t32-egress-enforce.sh's.
. "$(dirname "$0")/lib.sh"

space_env_setup

# ---- a wildcard stops the daemon, naming the profile and the rule
write_config "egress_profile = ok: allow example.com" "egress_profile = wild: allow api.example.com, *.example.com"
run timeout -k 5 30 "$SPACED_BIN"
check_eq "a wildcard profile in spaced.conf: spaced refuses to start (exit 1)" 1 "$RC"
check_contains "... naming the profile and the rule" "egress profile wild: rule 'allow *.example.com': wildcard" "$ERR"
check_contains "... and the line" "spaced.conf:5" "$ERR"
write_config
SPACE_EGRESS_PROFILES='envwild: allow *' run timeout -k 5 30 "$SPACED_BIN"
check_eq "a wildcard in SPACE_EGRESS_PROFILES: spaced refuses to start" 1 "$RC"
check_contains "... naming it" "egress profile envwild: rule 'allow *'" "$ERR"
write_config "egress_default = nope"
run timeout -k 5 30 "$SPACED_BIN"
check_eq "egress_default naming no profile: spaced refuses to start" 1 "$RC"
check_contains "... and says which" "'nope'" "$ERR"
write_config "egress_connect_rate = 0"
run timeout -k 5 30 "$SPACED_BIN"
check_eq "a gateway rate of 0: spaced refuses to start" 1 "$RC"
check_contains "... saying what a rate may be" "egress_connect_rate must be 1..1000000, got '0'" "$ERR"
check_rc "no daemon was left running" 1 test -S "$SPACE_SOCKET"

# ---- the daemon with profiles
tcp_config \
        "egress_base = deny 93.184.216.99" \
        "egress_profile = web: allow example.com, 93.184.216.0/24:443" \
        "egress_profile = local: allow 127.0.0.5:8080, 10.1.0.0/16:5432" \
        "egress_profile = local: deny 10.1.2.3" \
        "egress_profile = mail: allow 93.184.216.40" \
        "egress_profile = wide: allow 127.0.0.0/8" \
        "egress_profile = lo: allow localhost" \
        "egress_default = web"
export SPACE_EGRESS_PROFILES='envprof: allow 1.1.1.1:443; deny 1.1.1.2'
start_daemon_tcp
unset SPACE_EGRESS_PROFILES

check_rc "spacectl egress ls exits 0" 0 sc egress ls
check_match "ls has a header" '^NAME +DEFAULT +RULES' "$(head -n1 "$OUT")"
for p in web local mail wide lo envprof; do
        grep -qE "^$p " "$OUT" || fail "egress ls lists $p" "$(cat "$OUT")"
done
pass "egress ls lists the config's profiles and SPACE_EGRESS_PROFILES' one"
check_match "web is the default" '^web +yes' "$(grep '^web ' "$OUT")"
check_contains "local's two lines add up" "allow 127.0.0.5:8080; allow 10.1.0.0/16:5432; deny 10.1.2.3" "$OUT"
check_rc "egress ls -q prints the names" 0 sc egress ls -q
check_eq "... one a line" "web local mail wide lo envprof" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')"
check_rc "egress ls --json" 0 sc egress ls --json
check_eq "... has the base policy" '["deny 93.184.216.99"]' "$(json "$OUT" 'd["base"]')"
check_eq "... says the gateway enforces it" true "$(json "$OUT" 'd["enforced"]')"
check_rc "egress show local" 0 sc egress show local
check_eq "... prints its rules" "name: local
default: no
rules:
  allow 127.0.0.5:8080
  allow 10.1.0.0/16:5432
  deny 10.1.2.3" "$(cat "$OUT")"
check_rc "egress show envprof --json" 0 sc egress show envprof --json
check_eq "... the profile from the environment" '["allow 1.1.1.1:443", "deny 1.1.1.2"]' "$(json "$OUT" 'd["rules"]')"
check_rc "egress show nope: exit 1" 1 sc egress show nope
check_contains "... saying there is no such profile" "no egress profile 'nope'" "$ERR"

# ---- create picks profiles, fixed for life
create_sandbox SB1 --egress local
check_match "create --egress local makes a sandbox" "$ID_RE" "$SB1"
check_rc "inspect --json" 0 sc inspect "$SB1" --json
check_eq "inspect shows its profiles" '["local"]' "$(json "$OUT" 'd["egress_profiles"]')"
check_eq "... and its (empty) own lists" '[[], []]' "$(json "$OUT" '[d["egress_allow"], d["egress_deny"]]')"
check_rc "inspect (text)" 0 sc inspect "$SB1"
check_contains "... shows egress_profiles" "local" "$(grep egress_profiles "$OUT")"
BEFORE=$(sandbox_ids)
check_rc "create --egress nope: exit 1" 1 sc create --egress nope
check_contains "... naming the unknown profile" "no egress profile 'nope'" "$ERR"
check_eq "... and nothing was created" "$BEFORE" "$(sandbox_ids)"

# without --egress: the default profile; the body's lists (no wait: the policy is there from the start)
ureq POST /v1/sandboxes -H 'Content-Type: application/json' -d '{}'
check_status "POST /v1/sandboxes without egress_profiles" 202
SB2=$(json "$OUT" 'd["sandbox"]["id"]'); track_sandbox "$SB2"
check_eq "... gets the default profile" '["web"]' "$(json "$OUT" 'd["sandbox"]["egress_profiles"]')"
ureq POST /v1/sandboxes -H 'Content-Type: application/json' \
        -d '{"egress_profiles": ["wide", "mail"], "egress_allow": ["93.184.216.50:25"], "egress_deny": ["127.0.0.9"]}'
check_status "POST /v1/sandboxes with profiles and its own lists" 202
SB3=$(json "$OUT" 'd["sandbox"]["id"]'); track_sandbox "$SB3"
check_eq "... shown" '[["wide", "mail"], ["93.184.216.50:25"], ["127.0.0.9"]]' \
        "$(json "$OUT" '[d["sandbox"][k] for k in ("egress_profiles", "egress_allow", "egress_deny")]')"
ureq POST /v1/sandboxes -H 'Content-Type: application/json' -d '{"egress_profiles": ["web", "nope"]}'
check_status "an unknown profile in the body: 404 egress_profile_not_found" 404 egress_profile_not_found
ureq POST /v1/sandboxes -H 'Content-Type: application/json' -d '{"egress_allow": ["*.example.com"]}'
check_status "a wildcard in egress_allow: 400" 400 invalid_argument
ureq POST /v1/sandboxes -H 'Content-Type: application/json' -d '{"egress_profiles": "web"}'
check_status "egress_profiles not an array: 400" 400 invalid_argument

# over TCP: X-Space-Egress-Profiles
API_KEY=$(mint_key t31) || bail_out "cannot mint an API key"
req GET /v1/egress/profiles
check_status "GET /v1/egress/profiles over TCP without a key: 401" 401 unauthorized
kreq GET /v1/egress/profiles/local
check_status "GET /v1/egress/profiles/local with a key" 200
kreq GET /v1/egress/profiles/nope
check_status "GET /v1/egress/profiles/nope: 404 egress_profile_not_found" 404 egress_profile_not_found
kreq POST /v1/sandboxes -H 'Content-Type: application/json' -H 'X-Space-Egress-Profiles: envprof, lo' -d '{}'
check_status "an authenticated create with X-Space-Egress-Profiles" 202
SB4=$(json "$OUT" 'd["sandbox"]["id"]'); track_sandbox "$SB4"
check_eq "... gets those profiles" '["envprof", "lo"]' "$(json "$OUT" 'd["sandbox"]["egress_profiles"]')"
kreq POST /v1/sandboxes -H 'Content-Type: application/json' -H 'X-Space-Egress-Profiles: nope' -d '{}'
check_status "the header naming an unknown profile: 404" 404 egress_profile_not_found
kreq POST /v1/sandboxes -H 'Content-Type: application/json' -H 'X-Space-Egress-Profiles: web' \
        -d '{"egress_profiles": ["local"]}'
check_status "the header and the body both: 400" 400 invalid_argument
kreq POST /v1/sandboxes -H 'Content-Type: application/json' -H 'X-Space-Egress-Profiles: Bad Name' -d '{}'
check_status "a malformed header: 400" 400 invalid_argument

# ---- egress test: exit 0 allowed, 1 denied
allowed() { # SANDBOX DEST DESC
        check_rc "$3: $2 allowed (exit 0)" 0 sc egress test "$1" "$2"
        check_match "... says allowed" '^allowed: ' "$(head -n1 "$OUT")"
}
denied() { # SANDBOX DEST NEEDLE DESC
        check_rc "$4: $2 denied (exit 1)" 1 sc egress test "$1" "$2"
        check_match "... says denied" '^denied: ' "$(head -n1 "$OUT")"
        check_contains "... and why ($3)" "$3" "$OUT"
}
allowed "$SB1" 127.0.0.5:8080 "an explicit IP rule"
check_contains "... naming the rule" "allowed by profile local: allow 127.0.0.5:8080" "$OUT"
denied "$SB1" 127.0.0.5:8081 "loopback" "the same address on another port"
denied "$SB1" 127.0.0.6:8080 "loopback" "another loopback address"
allowed "$SB1" 10.1.9.9:5432 "a CIDR rule"
denied "$SB1" 10.1.2.3:5432 "denied by profile local: deny 10.1.2.3" "a deny inside an allowed range"
denied "$SB1" 10.2.0.1:5432 "private" "a private address outside the rule"
for lit in 2130706433 0177.0.0.1 0x7f.1 0x7f000001 127.1 '[::ffff:127.0.0.1]'; do
        denied "$SB1" "$lit:80" "127.0.0.1 is loopback" "127.0.0.1 written as $lit"
done
denied "$SB1" "[::1]:80" "::1 is loopback" "IPv6 loopback"
denied "$SB1" "[64:ff9b::7f00:1]:80" "NAT64 form of 127.0.0.1" "NAT64 127.0.0.1"
denied "$SB1" "[::127.0.0.1]:80" "IPv4-compatible form of 127.0.0.1" "IPv4-compatible 127.0.0.1"
denied "$SB1" "[2002:7f00:1::1]:80" "6to4 form of 127.0.0.1" "6to4 127.0.0.1"
for lit in 169.254.169.254 2852039166 0xa9fea9fe 0251.0376.0251.0376 0xa9.0xfe.0xa9.0xfe '[::ffff:169.254.169.254]'; do
        denied "$SB1" "$lit:80" "169.254.169.254 is metadata" "the metadata address written as $lit"
done
denied "$SB1" "[64:ff9b::a9fe:a9fe]:80" "metadata (NAT64 form of 169.254.169.254" "NAT64 metadata"
denied "$SB1" "[fd00:ec2::254]:80" "metadata" "the IPv6 metadata address"
denied "$SB1" "0x7f.1:8080" "loopback" "0x7f.1 is not 127.0.0.5"
allowed "$SB1" "0x7f000005:8080" "127.0.0.5 written in hex is still 127.0.0.5"
denied "$SB1" localhost:8080 "localhost: no allow rule names it" "localhost, which no rule of its names: never resolved"
denied "$SB4" localhost:443 "localhost is allowed by profile lo" "a name allowed by a profile never opens loopback"
check_rc "egress test --json" 1 sc egress test "$SB1" 2130706433:80 --json
check_eq "... the decision's fields" '[false, "127.0.0.1", "protected_address", null]' \
        "$(json "$OUT" '[d["allowed"], d["address"], d["reason_code"], d["rule"]]')"
check_rc "egress test --json of an allowed address" 0 sc egress test "$SB1" 127.0.0.5:8080 --json
check_eq "... names the rule" "profile local: allow 127.0.0.5:8080" "$(json "$OUT" 'd["rule"]')"

# default profile, base policy, denies, SMTP, the daemon's own port
allowed "$SB2" 93.184.216.34:443 "the default profile's range"
denied "$SB2" 93.184.216.34:80 "no rule allows" "the default profile on another port"
denied "$SB2" 93.184.216.99:443 "denied by base policy: deny 93.184.216.99" "the base policy's deny beats the profile"
denied "$SB2" 127.0.0.5:8080 "loopback" "local's rule is not the default sandbox's"
denied "$SB3" 93.184.216.40:25 "SMTP" "port 25 on a host allowed without ports"
denied "$SB3" 93.184.216.40:587 "SMTP" "port 587 too"
allowed "$SB3" 93.184.216.40:2525 "another port of that host"
allowed "$SB3" 93.184.216.50:25 "SMTP where the sandbox's own rule names the port"
allowed "$SB3" 127.0.0.2:80 "a profile that opens all of loopback"
denied "$SB3" "127.0.0.9:80" "denied by sandbox: deny 127.0.0.9" "the sandbox's deny beats its profile's allow"
denied "$SB3" "127.0.0.1:$API_PORT" "daemon's own API" "the daemon's API port, even with loopback open"
denied "$SB3" "0.0.0.0:$API_PORT" "daemon's own API" "0.0.0.0 on the API port"
allowed "$SB4" 1.1.1.1:443 "SPACE_EGRESS_PROFILES' profile, chosen by the header"
denied "$SB4" 1.1.1.2:443 "denied by profile envprof" "... and its deny"

# errors are neither 0 nor 1
check_rc "egress test of an unknown sandbox: exit 3" 3 sc egress test nosuchsandbox 1.1.1.1
check_rc "egress test with a bad destination: exit 2" 2 sc egress test "$SB1" 1.1.1.1:99999
check_rc "egress test of an invalid host: exit 3" 3 sc egress test "$SB1" 'a..b'
check_rc "egress test of a bad literal (256.1.1.1): exit 3" 3 sc egress test "$SB1" 256.1.1.1:80
check_contains "... saying it is not a valid address" "ends in a number" "$ERR"
check_rc "egress test with no destination: usage (2)" 2 sc egress test "$SB1"

# ---- forks keep their parent's egress
wait_for 120 sh -c "[ \"\$(spacectl inspect $SB1 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"state\"])')\" = running ]" ||
        diag "sandbox $SB1 is not running"
check_rc "fork the sandbox" 0 timeout -k 10 "$CREATE_TIMEOUT" spacectl fork -q "$SB1"
CHILD=$(grep -oE "$ID_RE" "$OUT" | head -n1)
[ -n "$CHILD" ] && track_sandbox "$CHILD"
check_rc "inspect the fork" 0 sc inspect "$CHILD" --json
check_eq "the fork keeps its parent's profiles" '["local"]' "$(json "$OUT" 'd["egress_profiles"]')"
allowed "$CHILD" 127.0.0.5:8080 "the fork's policy is its parent's"

# ---- a restart keeps them (they are in SQLite)
kill "$(daemon_pid)"
wait_for 30 pid_gone "$DAEMON_PID" || diag "the daemon did not exit"
SPACE_EGRESS_PROFILES='envprof: allow 1.1.1.1:443; deny 1.1.1.2' start_daemon_tcp
check_rc "after a restart, inspect" 0 sc inspect "$SB3" --json
check_eq "... the profiles and lists are still there" '[["wide", "mail"], ["93.184.216.50:25"], ["127.0.0.9"]]' \
        "$(json "$OUT" '[d[k] for k in ("egress_profiles", "egress_allow", "egress_deny")]')"

for sb in "$SB1" "$SB2" "$SB3" "$SB4" "$CHILD"; do
        [ -n "$sb" ] && sc rm -f "$sb" >/dev/null 2>&1
done
done_testing
