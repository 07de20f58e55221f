# Shared helpers of the guest build scripts (sourced, not run).
# shellcheck shell=bash

GUEST_CACHE=${BERTH_GUEST_CACHE:-${BERTH_TEST_CACHE:-/var/cache/berth-test}/guest}
GUEST_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# step NAME CMD...: runs CMD, then prints how long it took (the CI log shows where setup time goes).
step() {
  local name=$1 t0=$SECONDS
  shift
  echo "guest: $name ..." >&2
  "$@"
  echo "guest: $name done in $((SECONDS - t0)) s" >&2
}

die() {
  echo "guest: $*" >&2
  exit 1
}

# The Debian mirror apt uses here (deb822 sources or one-line sources), for debootstrap.
debian_mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    if [[ $f == *.sources ]]; then
      # A stanza whose Suites list bookworm (not only bookworm-security) and whose URI ends in /debian.
      uri=$(awk '/^URIs:/ {u=$2} /^Suites:/ && / bookworm( |$)/ {s=1} /^$/ {if (s && u ~ /\/debian\/?$/) {print u; done=1; exit} u=""; s=0}
                 END {if (!done && s && u ~ /\/debian\/?$/) print u}' "$f")
    else
      uri=$(awk '$1 == "deb" && $3 == "bookworm" && $2 ~ /\/debian\/?$/ {print $2; exit}' "$f")
    fi
    if [ -n "$uri" ]; then
      echo "$uri"
      return
    fi
  done
  echo http://deb.debian.org/debian
}

# need_cmds CMD...: fails naming the Debian package to install for the first missing command.
need_cmds() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null || die "$c missing (run .ci/setup.d/40-guest.sh, or apt-get install the package that has it)"
  done
}

# copy_modules KERNEL_ROOT VERSION DEST MODULE...: copies the modules and everything they depend on
# from an extracted kernel package (KERNEL_ROOT/lib/modules/VERSION) to DEST/lib/modules/VERSION, and
# indexes them (depmod) so that modprobe finds them there. Prints the load order, one module per line.
copy_modules() {
  local root=$1 ver=$2 dest=$3
  shift 3
  local m line path
  mkdir -p "$dest/lib/modules/$ver"
  for m in "$@"; do
    # --show-depends lists "insmod /path/to/dep.ko" lines, dependencies first.
    modprobe -d "$root" -S "$ver" --show-depends "$m" | while read -r line; do
      [[ $line == insmod* ]] || continue
      path=${line#insmod }
      path=${path%% *}
      mkdir -p "$dest/$(dirname "${path#"$root"}")"
      cp -n "$path" "$dest/${path#"$root"}"
      basename "$path" | sed -E 's/\.ko(\.xz|\.zst|\.gz)?$//'
    done
  done | awk '!seen[$0]++'
  cp "$root/lib/modules/$ver/modules.order" "$root/lib/modules/$ver/modules.builtin"* "$dest/lib/modules/$ver/" 2>/dev/null || true
  depmod -b "$dest" "$ver"
}
