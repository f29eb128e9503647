#!/bin/sh
# librumor as a user gets it. `make install DESTDIR=...` of the library, its
# headers and rumor.pc; then, with pkg-config's flags alone (the installed
# include directory, no source tree): every installed header compiles on its
# own as <rumor/X.h> (so none includes a header that is not installed, or
# one by a path that breaks under rumor/), and a program that includes them
# all links against the installed library and runs. Last, the installed
# librumor.so exports no function that an uninstalled header of the
# library's sources declares (RUMOR_INTERNAL, see Makefile.am): the list
# comes from the headers, so a new internal function is checked too.
set -u
src=${RUMOR_SRCDIR:-$(dirname "$0")/..}
. "$src/tests/shutil.sh"
b=${RUMOR_BUILDDIR:?RUMOR_BUILDDIR must be set (make check sets it)}
command -v pkg-config >/dev/null || skip "pkg-config not found"
command -v nm >/dev/null || skip "nm not found"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rumor-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# make runs here on its own, not as a part of make check's (its jobserver),
# and remakes nothing: the library, rumor.pc and the Makefile stay as built
# (a source edited since must not relink the library under the other tests)
unset MAKEFLAGS MFLAGS MAKELEVEL
frozen="-o Makefile -o librumor.la -o rumor.pc"
# what the build knows: its compiler and flags, and the library's headers
# shellcheck disable=SC2086
make -s -C "$b" $frozen print-install-check >"$tmp/vars" 2>&1 || {
  cat "$tmp/vars" >&2; fail "make print-install-check"; finish; }
var() { sed -n "s/^$1 //p" "$tmp/vars"; }
cc=$(var cc)
cflags=$(var cflags)
ldflags=$(var ldflags)

root=$tmp/root
# shellcheck disable=SC2086
make -s -C "$b" $frozen DESTDIR="$root" install-libLTLIBRARIES install-pkgincludeHEADERS \
  install-pkgconfigDATA >"$tmp/install.log" 2>&1 || {
  tail -20 "$tmp/install.log" >&2; fail "make install DESTDIR=$root"; finish; }
pc=$(find "$root" -name rumor.pc | head -1)
[ -n "$pc" ] || { fail "no rumor.pc installed under $root"; finish; }
# rumor.pc as if installed at its prefix, moved under $root (its absolute
# variables, nothing else: its dependencies' .pc files stay the system's)
mkdir "$tmp/pc"
sed -E "s#^([A-Za-z_]+)=/#\1=$root/#" "$pc" >"$tmp/pc/rumor.pc"
export PKG_CONFIG_PATH="$tmp/pc"
pcflags=$(pkg-config --cflags rumor) || { fail "pkg-config --cflags rumor"; finish; }
pclibs=$(pkg-config --libs rumor) || { fail "pkg-config --libs rumor"; finish; }
inc=$(pkg-config --variable=includedir rumor)/rumor
lib=$(pkg-config --variable=libdir rumor)
[ -d "$inc" ] || { fail "no $inc"; finish; }
so=$lib/librumor.so
[ -e "$so" ] || { fail "no $so"; finish; }
echo "installed in $inc; $pcflags $pclibs"

# each installed header alone, then all of them in one program
n=0
for h in "$inc"/*.h; do
  x=$(basename "$h")
  printf '#include <rumor/%s>\nint rumor_install_check_%d;\n' "$x" "$n" >"$tmp/one.c"
  # shellcheck disable=SC2086
  $cc -std=c11 $cflags $pcflags -fsyntax-only "$tmp/one.c" >"$tmp/one.log" 2>&1 ||
    { fail "<rumor/$x> does not compile alone: $(head -3 "$tmp/one.log")"; }
  echo "#include <rumor/$x>" >>"$tmp/all.c"
  n=$((n + 1))
done
cat >>"$tmp/all.c" <<'EOF'
#include <stdio.h>
#include <string.h>
int main(void)
{
    /* a call into the library: it links and loads */
    const char *s = rumor_strerror(RUMOR_EINVAL);
    printf("%s; %d CPU device(s)\n", s, rumor_device_count(RUMOR_DEV_CPU));
    return s && strlen(s) > 0 ? 0 : 1;
}
EOF
# shellcheck disable=SC2086
if $cc -std=c11 $cflags $pcflags "$tmp/all.c" -o "$tmp/all" $ldflags $pclibs \
  >"$tmp/all.log" 2>&1; then
  out=$(LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/all" 2>&1) ||
    fail "a program on the installed library: exit status $?: $out"
  echo "a program including all $n headers ran: $out"
else
  fail "a program including all $n headers does not build: $(head -5 "$tmp/all.log")"
fi

# rumor_ functions declared in uninstalled headers, and not in installed
# ones (a comment in an internal header may name a public function)
names() { grep -ohE '\<rumor_[a-z0-9_]+[[:space:]]*\(' "$@" 2>/dev/null | tr -d ' \t(' | sort -u; }
internal=$(var internal) # (a list of words: split on purpose below)
# shellcheck disable=SC2086
(cd "$src" && names $internal) >"$tmp/declared"
names "$inc"/*.h >"$tmp/public"
comm -23 "$tmp/declared" "$tmp/public" >"$tmp/hidden"
nm -D --defined-only "$so" | awk '{ print $NF }' | sort -u >"$tmp/exported"
leaked=$(comm -12 "$tmp/hidden" "$tmp/exported")
for f in $leaked; do
  # shellcheck disable=SC2086
  where=$(cd "$src" && grep -lwE "$f" $internal | tr '\n' ' ')
  fail "librumor.so exports $f, declared in the uninstalled $where(declare it RUMOR_INTERNAL)"
done
# shellcheck disable=SC2086
echo "$(wc -l <"$tmp/hidden") functions of $(echo $internal | wc -w) uninstalled headers," \
  "$(echo $leaked | wc -w) of them among the $(wc -l <"$tmp/exported") symbols exported"
finish
