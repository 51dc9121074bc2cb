#!/usr/bin/env bash
# `tessera serve` given no key (no TESSERA_API_KEY, --api-keys or --no-auth) keeps the key it
# generates in the config directory: a restart with the same HOME / XDG_CONFIG_HOME takes the
# same key (a request with the old key is still 200), the key is shown only when it is made, a
# key file others can read is refused, and a server whose port is taken creates and shows no key.
#   saved_key_e2e_test.sh TESSERA WORK TINY_MODEL
TESSERA=$1 WORK=$2 TINY=$3
WORK=$(realpath -m "$WORK") TINY=$(realpath -m "$TINY")
rm -rf "$WORK" && mkdir -p "$WORK"
. "$(dirname "$0")/server_lib.sh"
trap 'kill $(jobs -p) 2> /dev/null' EXIT
unset TESSERA_API_KEY XDG_CONFIG_HOME
export HOME=$WORK/home
mkdir -p "$HOME"
SAVED=$HOME/.config/tessera/api-key
mode_of() { stat -c %a "$1"; }
models_status() { status_of "$BASE/v1/models" -H "Authorization: Bearer $1"; }

# ---------------------------------------------------------------- first start: made and shown
start_server first --model "tiny=$TINY" --no-prewarm
KEY=$(sed -n 's/^tessera serve: API key (new, saved in \(.*\) and used again at every start): \(tsk-[0-9a-f]*\)$/\2/p' "$LOG_OUT")
check "the first start shows the new key and where it is saved" "$SAVED" \
  "$(sed -n 's/^tessera serve: API key (new, saved in \(.*\) and used again at every start): .*/\1/p' "$LOG_OUT")"
check "the key file holds the shown key" "$KEY" "$(cat "$SAVED" 2> /dev/null)"
check "the key file is 600, its directories 700" "600 700 700" \
  "$(mode_of "$SAVED") $(mode_of "$HOME/.config/tessera") $(mode_of "$HOME/.config")"
check "the key opens the API" 200 "$(models_status "$KEY")"
check "no key: 401" 401 "$(status_of "$BASE/v1/models")"
stop_server

# ---------------------------------------------------------------- a restart keeps it
start_server second --model "tiny=$TINY" --no-prewarm
check "a restart names the file" 1 "$(grep -cF "tessera serve: API key from $SAVED" "$LOG_OUT")"
check "a restart does not print the key" 0 "$(grep -cF -- "$KEY" "$LOG_OUT" "$LOG_ERR" | awk -F: '{s += $2} END {print s}')"
check "the old key still works after the restart" 200 "$(models_status "$KEY")"
check "another key does not" 401 "$(models_status "tsk-00000000000000000000000000000000")"

# ---------------------------------------------------------------- the port taken: no key
# The second server still holds $PORT. With a config directory of its own (no key yet), a
# server on the same port fails with the bind error, prints no key and saves none.
XDG_CONFIG_HOME=$WORK/other "$TESSERA" serve --port "$PORT" --placement reference \
  --model "tiny=$TINY" --no-prewarm > "$WORK/taken.out" 2> "$WORK/taken.err"
check "a taken port fails" 1 "$?"
check "a taken port: the bind error is said" 1 "$(grep -ci "in use" "$WORK/taken.err" | sed 's/^[1-9][0-9]*$/1/')"
check "a taken port: no key is printed" 0 "$(grep -ci "api key" "$WORK/taken.out" "$WORK/taken.err" | awk -F: '{s += $2} END {print s}')"
check "a taken port: no key is saved" no "$([ -e "$WORK/other/tessera/api-key" ] && echo yes || echo no)"
stop_server

# ---------------------------------------------------------------- a file others can read
chmod 644 "$SAVED"
"$TESSERA" serve --port 0 --placement reference --model "tiny=$TINY" --no-prewarm \
  > "$WORK/open.out" 2> "$WORK/open.err"
check "a key file others can read: exit 2" 2 "$?"
check "a key file others can read: the chmod to run" 1 "$(grep -cF "run chmod 600 $SAVED" "$WORK/open.err")"
check "a key file others can read: the key is not shown" 0 "$(grep -cF -- "$KEY" "$WORK/open.out" "$WORK/open.err" | awk -F: '{s += $2} END {print s}')"
check "a key file others can read: left as it was" "644 $KEY" "$(mode_of "$SAVED") $(cat "$SAVED")"

# ---------------------------------------------------------------- XDG_CONFIG_HOME
chmod 600 "$SAVED"
export XDG_CONFIG_HOME=$WORK/xdg
start_server xdg --model "tiny=$TINY" --no-prewarm
XKEY=$(cat "$XDG_CONFIG_HOME/tessera/api-key" 2> /dev/null)
check "XDG_CONFIG_HOME holds the key when set" 1 "$(grep -cF "saved in $XDG_CONFIG_HOME/tessera/api-key" "$LOG_OUT")"
check "its key opens the API" 200 "$(models_status "$XKEY")"
stop_server

if [ "$FAILURES" -ne 0 ]; then echo "$FAILURES check(s) failed" >&2; exit 1; fi
echo "all saved-key checks passed"
