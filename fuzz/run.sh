#!/bin/bash
# Runs libFuzzer harnesses one after the other (make fuzz):
#   fuzz/run.sh BUILD_DIR SECONDS [NAME...]     (default: every fuzz/fuzz_*.c)
# Each runs SECONDS with fuzz/corpus/NAME as its seeds; new inputs go to a
# scratch corpus ($FUZZ_WORK, default BUILD_DIR/fuzz-work/NAME/corpus) and
# crashes, leaks and timeouts to its artifacts/, whence they are copied to
# fuzz/crashes/NAME/ and the run fails. fuzz/NAME.dict, when there is one,
# is its dictionary (-dict). Extra libFuzzer flags: $FUZZ_ARGS.
set -u
build=${1:?usage: fuzz/run.sh BUILD_DIR SECONDS [NAME...]}
secs=${2:?usage: fuzz/run.sh BUILD_DIR SECONDS [NAME...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$here"/fuzz_*.c; do n=${f##*/fuzz_}; names+=("${n%.c}"); done
fi
work_root=${FUZZ_WORK:-$build/fuzz-work}
failed=0
for n in "${names[@]}"; do
  bin=$build/fuzz_$n
  work=$work_root/$n
  mkdir -p "$work/corpus" "$work/artifacts" "$work/tmp" "$here/crashes/$n"
  echo "fuzz_$n: ${secs}s"
  dict=()
  [ -f "$here/$n.dict" ] && dict=(-dict="$here/$n.dict")
  # the harness's scratch files (fuzz_tmpdir) go to $work/tmp: libFuzzer
  # may end without running atexit handlers
  # shellcheck disable=SC2086
  TMPDIR=$work/tmp "$bin" -max_total_time="$secs" -timeout=20 -print_final_stats=1 "${dict[@]}" \
    -artifact_prefix="$work/artifacts/" ${FUZZ_ARGS:-} \
    "$work/corpus" "$here/corpus/$n" >"$work/log" 2>&1
  rc=$?
  rm -rf "${work:?}/tmp"
  stats=$(grep -E '^#[0-9]+' "$work/log" | tail -1)
  echo "  rc=$rc ${stats}"
  found=0
  for a in "$work"/artifacts/*; do
    [ -f "$a" ] || continue
    cp "$a" "$here/crashes/$n/" && rm -f "$a"
    echo "  finding: fuzz/crashes/$n/${a##*/} (log: $work/log)"
    found=1
  done
  if [ $found -ne 0 ] || [ $rc -ne 0 ]; then
    failed=1
    grep -E 'ERROR: |SUMMARY: |runtime error' "$work/log" | head -5 | sed 's/^/  /'
  fi
done
exit $failed
