#!/bin/sh
# Prints this project's version for -X .../internal/version.Version (the
# Makefile, the Docker builds and getting-started.sh use it): "0.2.0" on the
# v0.2.0 tag, "0.2.0+3.gabc1234" three commits past it, "+dirty"/".dirty"
# with uncommitted changes (semver build metadata: a build past a release
# compares equal to it, not below it as a pre-release would). With no v*
# tag in reach (a shallow clone) it is internal/version's Version plus the
# commit, "0.2.0+gabc1234"; outside a git checkout that Version alone.
set -eu
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
src=$(sed -n 's/^var Version = "\(.*\)"$/\1/p' "$root/internal/version/version.go")
[ -n "$src" ] || {
	echo "version.sh: no 'var Version = \"...\"' in $root/internal/version/version.go" >&2
	exit 1
}
if ! d=$(git -C "$root" describe --tags --always --dirty --match 'v[0-9]*' 2>/dev/null); then
	echo "$src"
	exit 0
fi
case $d in
v[0-9]*)
	echo "$d" | sed -E 's/^v//; s/-([0-9]+)-g([0-9a-f]+)(-dirty)?$/+\1.g\2\3/; s/-dirty$/.dirty/; s/^([^+]*)\.dirty$/\1+dirty/'
	;;
*)
	# --always without a tag: the bare abbreviated hash, maybe -dirty.
	h=${d%-dirty}
	meta=g$h
	[ "$h" = "$d" ] || meta=$meta.dirty
	echo "$src+$meta"
	;;
esac
