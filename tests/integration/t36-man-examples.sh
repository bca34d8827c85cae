#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every example of spacectl(1) runs as written (issue 25): the blocks of its EXAMPLES section are read from the
# man page itself, in order, and each is run by bash against a daemon of our own, on the templates it names.
# The one that needs a terminal (exec -it, attach) gets one from script(1), with the keys a person would type;
# the TCP example's port 7070 becomes our daemon's (7070 may be anybody's here). A new example that this script
# does not know fails the count, so it cannot go unrun.
. "$(dirname "$0")/lib.sh"

space_env_setup
tcp_config
start_daemon_tcp
export PATH="$(dirname "$SPACECTL_BIN"):$PATH"

seed_template
check_eq "the seed template (built, or imported as an earlier test built it)" 0 "$RC" || { last_diag; bail_out "no seed template"; }

EX=$TEST_TMP/examples
mkdir -p "$EX"
python3 - "$TOP_SRCDIR/man/spacectl.1" "$EX" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
sect = text[text.index(".SH EXAMPLES\n"):text.index(".SH SEE ALSO")]
blocks = re.findall(r"^\.nf\n(.*?)^\.fi\n", sect, re.S | re.M)
for i, b in enumerate(blocks, 1):
    b = b.replace("\\-", "-").replace("\\(aq", "'").replace("\\(dq", '"').replace("\\&", "").replace("\\e", "\\")
    open(f"{sys.argv[2]}/{i}.sh", "w").write(b)
PY
N=$(ls "$EX" | wc -l)
check_eq "spacectl(1) has the 8 examples this script runs" 8 "$N"

# what the second example copies in: a package with a test, as a project would have
mkdir -p "$TEST_TMP/work/src"
cat >"$TEST_TMP/work/src/test_add.py" <<'PY'
import unittest

class T(unittest.TestCase):
    def test_add(self):
        self.assertEqual(1 + 1, 2)
        open("report.txt", "w").write("ok\n")   # the project writes where it was copied: the user's own

if __name__ == "__main__":
    unittest.main()
PY
cd "$TEST_TMP/work" || bail_out "no work directory"

# example N [DESC]: runs block N with bash; status in $RC, output in $OUT and $ERR
example() {
        run timeout -k 10 300 bash -o pipefail "$EX/$1.sh"
        check_eq "example $1 ($2) exits 0" 0 "$RC" || last_diag
}

example 1 "run seed -- python3"
check_eq "... and prints 2" 2 "$(cat "$OUT")"

example 2 "create seed, cp into it (the files become its user's), run the tests there"
check_rc "... the sandbox is named build" 0 sc inspect build
for f in "$SPACE_RUNTIME_DIR"/sandboxes/*/qemu.pid; do [ -r "$f" ] && SEEN_PIDS+=("$(cat "$f")"); done
check_rc "... the tests wrote their report as the template's user" 0 sc exec build -- test -O /home/user/src/report.txt

# example 3: a terminal from script(1); Ctrl-P Ctrl-Q detaches, then "exit" ends the shell after the attach
sed -n 1p "$EX/3.sh" >"$EX/3a.sh"
sed -n 2p "$EX/3.sh" >"$EX/3b.sh"
sed -n 3p "$EX/3.sh" >"$EX/3c.sh"
check_eq "example 3 is exec -it, ps, attach" "spacectl exec -it build -- bash|spacectl ps build|spacectl attach build" \
        "$(paste -sd'|' "$EX/3.sh")"
run timeout -k 10 60 sh -c '(sleep 8; printf "\020\021"; sleep 2) | script -qec "bash $0" /dev/null' "$EX/3a.sh"
check_eq "example 3: exec -it build -- bash, detached with Ctrl-P Ctrl-Q, exits 0" 0 "$RC" || last_diag
run bash "$EX/3b.sh"
check_match "... ps build shows the shell running, with a pty" ' running +yes .*bash' "$(grep bash "$OUT")"
run timeout -k 10 60 sh -c '(sleep 5; printf "exit\r"; sleep 5) | script -qec "bash $0" /dev/null' "$EX/3c.sh"
check_eq "... attach build goes back to it, and exit ends it (status 0)" 0 "$RC" || last_diag

example 4 "a long job: ps -q, logs, kill -s INT"
check_contains "... logs shows its output" tick "$OUT"
job_ended() { sc ps build --json >"$TEST_TMP/ps.json" && [ "$(json "$TEST_TMP/ps.json" '[p["state"] for p in d["processes"] if "tick" in " ".join(p["argv"])][-1]')" = exited ]; }
check_rc "... and the job ends on SIGINT" 0 wait_for 30 job_ended
check_eq "... killed by SIGINT" 2 "$(json "$TEST_TMP/ps.json" '[p["signal"] for p in d["processes"] if "tick" in " ".join(p["argv"])][-1]')"

example 5 "create --async, op wait"
check_rc "... the sandbox ci runs" 0 sc exec ci -- true
for f in "$SPACE_RUNTIME_DIR"/sandboxes/*/qemu.pid; do [ -r "$f" ] && SEEN_PIDS+=("$(cat "$f")"); done

sed -i "s/127\.0\.0\.1:7070/127.0.0.1:$API_PORT/" "$EX/6.sh"
example 6 "a key, then spacectl info over TCP"
check_contains "... info went over TCP" "Connected to: $API_URL" "$OUT"

example 7 "telling a failed command from a failure of spacectl"
check_eq "... the command succeeded, so nothing is said" "" "$(grep 'spacectl or spaced failed' "$OUT")"

example 8 "remove every sandbox"
check_eq "... none is left" 0 "$(sandbox_count)"

done_testing
