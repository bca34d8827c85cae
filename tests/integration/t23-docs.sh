#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every verb spacectl has is documented and completed: a section in spacectl(1), a word in each completion
# file (bash, zsh, fish) that the shells themselves parse and, for bash and fish, offer on Tab; template's
# subcommands the same. No daemon: completions must never start one (SPACE_NO_AUTOSTART in them).
. "$(dirname "$0")/lib.sh"

space_env_setup   # a socket of the test's own, nobody listening on it
COMP=$TOP_SRCDIR/completions
MAN=$TOP_SRCDIR/man

# the verbs from spacectl's own help, between "Verbs:" and the blank line after them
mapfile -t VERBS < <("$SPACECTL_BIN" --help | awk '/^Verbs:/ { on = 1; next } on && NF == 0 { exit } on { print $1 }')
if [ "${#VERBS[@]}" -ge 20 ]; then pass "spacectl --help lists ${#VERBS[@]} verbs"
else bail_out "spacectl --help lists only ${#VERBS[@]} verbs: ${VERBS[*]}"; fi
mapfile -t TEMPLATE_SUBS < <("$SPACECTL_BIN" help template 2>&1 | awk '/^Sub-verbs:/ { on = 1; next } on && NF == 0 { exit } on && /^  [a-z]/ { print $1 }')
if [ "${#TEMPLATE_SUBS[@]}" -ge 6 ]; then pass "spacectl help template lists ${#TEMPLATE_SUBS[@]} subcommands"
else bail_out "spacectl help template lists only: ${TEMPLATE_SUBS[*]}"; fi

# ---- the shells parse the files
check_rc "bash parses spacectl.bash" 0 bash -n "$COMP/spacectl.bash"
# build-aux/install-deps.sh installs zsh, fish and man: without them this is a broken set-up, not a skip
for tool in zsh fish man col; do
        command -v "$tool" >/dev/null || bail_out "$tool is missing: run build-aux/install-deps.sh"
done
check_rc "zsh parses _spacectl" 0 zsh -n "$COMP/_spacectl"
check_rc "fish parses spacectl.fish" 0 fish -n "$COMP/spacectl.fish"

# ---- what bash and fish offer after "spacectl " and "spacectl template "
bash_offers() {
        COMP_LINE="spacectl $1" bash -c '
                source "$0"
                read -ra COMP_WORDS <<<"$COMP_LINE"
                [[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
                COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
                _spacectl
                printf "%s\n" "${COMPREPLY[@]}"' "$COMP/spacectl.bash" 2>/dev/null
}
fish_offers() {
        SPACE_NO_AUTOSTART= fish -c "source '$COMP/spacectl.fish'; complete -C 'spacectl $1'" 2>/dev/null | cut -f1
}
BASH_VERBS=$(bash_offers "")
BASH_TEMPLATE=$(bash_offers "template ")
FISH_VERBS=$(fish_offers "")
FISH_TEMPLATE=$(fish_offers "template ")

missing_man= missing_bash= missing_zsh= missing_fish= offer_bash= offer_fish=
for v in "${VERBS[@]}"; do
        # help is spacectl(1)'s synopsis itself
        [ "$v" = help ] || grep -q "^\.SS \"$v\b" "$MAN/spacectl.1" || missing_man+=" $v"
        grep -qw -- "$v" "$COMP/spacectl.bash" || missing_bash+=" $v"
        grep -qw -- "$v" "$COMP/_spacectl" || missing_zsh+=" $v"
        grep -qw -- "$v" "$COMP/spacectl.fish" || missing_fish+=" $v"
        grep -qx -- "$v" <<<"$BASH_VERBS" || offer_bash+=" $v"
        grep -qx -- "$v" <<<"$FISH_VERBS" || offer_fish+=" $v"
done
check_eq "every verb has a section in spacectl(1)" "" "$missing_man"
check_eq "every verb is in the bash completion" "" "$missing_bash"
check_eq "every verb is in the zsh completion" "" "$missing_zsh"
check_eq "every verb is in the fish completion" "" "$missing_fish"
check_eq "bash offers every verb after 'spacectl '" "" "$offer_bash"
check_eq "fish offers every verb after 'spacectl '" "" "$offer_fish"

missing_bash= missing_fish= missing_man=
for s in "${TEMPLATE_SUBS[@]}"; do
        grep -qx -- "$s" <<<"$BASH_TEMPLATE" || missing_bash+=" $s"
        grep -qx -- "$s" <<<"$FISH_TEMPLATE" || missing_fish+=" $s"
        grep -q "^\.SS \"template $s\b" "$MAN/spacectl.1" || missing_man+=" $s"
done
check_eq "bash offers template's subcommands (${TEMPLATE_SUBS[*]})" "" "$missing_bash"
check_eq "fish offers template's subcommands" "" "$missing_fish"
check_eq "each template subcommand has a section in spacectl(1)" "" "$missing_man"

# ---- the other pages
# egress's sub-verbs, the same way (its help lists them under "Sub-verbs:")
mapfile -t EGRESS_SUBS < <("$SPACECTL_BIN" help egress 2>&1 | awk '/^Sub-verbs:/ { on = 1; next } on && NF == 0 { exit } on && /^  [a-z]/ { print $1 }')
check_eq "spacectl help egress lists ls, show, test and log" "ls show test log" "${EGRESS_SUBS[*]}"
BASH_EGRESS=$(bash_offers "egress ")
FISH_EGRESS=$(fish_offers "egress ")
missing_bash= missing_fish= missing_man= missing_zsh=
for s in "${EGRESS_SUBS[@]}"; do
        grep -qx -- "$s" <<<"$BASH_EGRESS" || missing_bash+=" $s"
        grep -qx -- "$s" <<<"$FISH_EGRESS" || missing_fish+=" $s"
        grep -q "$s\\\\:" "$COMP/_spacectl" || missing_zsh+=" $s"
        grep -q "^\.SS \"egress $s\b" "$MAN/spacectl.1" || missing_man+=" $s"
done
check_eq "bash offers egress's sub-verbs" "" "$missing_bash"
check_eq "fish offers egress's sub-verbs" "" "$missing_fish"
check_eq "zsh describes egress's sub-verbs" "" "$missing_zsh"
check_eq "each egress sub-verb has a section in spacectl(1)" "" "$missing_man"
check_match "spacectl(1) documents create --egress" '^\.BI \\-\\-egress ' "$(cat "$MAN/spacectl.1")"

for page in spacectl.1 spaced.8 space-template.5 space-e2b.7 space-egress.5; do
        check_rc "man renders $page without warnings" 0 sh -c "LC_ALL=C.UTF-8 MANROFFSEQ='' man --warnings -l '$MAN/$page' 2>&1 >/dev/null | (! grep .)"
done
# completing a sandbox asks the daemon for names; with none running it must not start one
bash_offers "exec " >/dev/null
fish_offers "exec " >/dev/null
check_rc "completing sandbox names never started a daemon" 1 test -e "$SPACE_RUNTIME_DIR/spaced.pid"
check_match "spacectl(1) points at space-template(5)" 'space-template\(5\)' \
        "$(MANWIDTH=200 man -l "$MAN/spacectl.1" 2>/dev/null | col -b)"

done_testing
