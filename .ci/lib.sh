# Helpers for .ci/run and the .ci/setup.d scripts (sourced, not run). Plain bash: a fresh machine has no bc.

# step LABEL CMD [ARGS...]: runs CMD, then prints "LABEL (N.N s)"; when CMD fails, says so and fails.
step() {
  local label=$1 t0 rc=0 tenths
  shift
  t0=$(date +%s%N)
  "$@" || rc=$?
  tenths=$((($(date +%s%N) - t0) / 100000000))
  if [ $rc = 0 ]; then
    echo "$label ($((tenths / 10)).$((tenths % 10)) s)"
  else
    echo "$label: FAILED, exit $rc ($((tenths / 10)).$((tenths % 10)) s)" >&2
  fi
  return $rc
}

# quietly CMD [ARGS...]: runs CMD with its standard output discarded; errors still show (use it inside
# `step`: a redirection after `step` would discard the timing line too).
quietly() { "$@" >/dev/null; }
