#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Build a ThreadSanitizer-instrumented oneTBB from Debian's own source package
# (same release as the installed libtbb-dev) and install it into a cache dir.
#
# Why: Debian's libtbb.so is not instrumented, so TSan cannot see the
# synchronisation done inside the library and reports false races between
# task construction (in our code) and task execution (in TBB worker threads).
#
# Usage:   scripts/build-tbb-tsan.sh
# Output:  the install prefix, on the last (only) line of stdout; all progress
#          goes to stderr. Pass it on as
#            -DCMAKE_PREFIX_PATH=<prefix>   (or -DTBB_DIR=<prefix>/lib/cmake/TBB)
# Cache:   ${TICKWHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tickwheel}/onetbb-tsan-<debian-source-version>
# Needs:   root the first time only (enables deb-src, installs dpkg-dev, clang,
#          cmake, ninja-build); a cached result is returned without root.
set -euo pipefail

exec 3>&1 1>&2   # fd 3 = real stdout (only the prefix goes there)

log()  { printf 'build-tbb-tsan: %s\n' "$*" >&2; }
warn() { printf 'build-tbb-tsan: WARNING: %s\n' "$*" >&2; }
die()  { printf 'build-tbb-tsan: ERROR: %s\n' "$*" >&2; exit 1; }

SRC_PKG=onetbb
CACHE="${TICKWHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tickwheel}"
CONFIG_REL=lib/cmake/TBB/TBBConfig.cmake
NEEDED_PKGS=(dpkg-dev clang cmake ninja-build)

command -v dpkg-query >/dev/null || die "dpkg-query not found: this script needs a Debian/Ubuntu system"

pkg_installed() {
    [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" == installed ]]
}
# Debian versions may carry an epoch ("1:2.3-4"); keep ':' out of paths.
prefix_for() { printf '%s/onetbb-tsan-%s' "$CACHE" "${1//:/_}"; }
is_complete() { [[ -f "$1/$CONFIG_REL" ]]; }
finish() { log "oneTBB (TSan) ready in $1"; printf '%s\n' "$1" >&3; exit 0; }

# ---------------------------------------------------------------- 1. cache --
installed_ver=""
if pkg_installed libtbb-dev; then
    # Source version (differs from the binary version after a binNMU).
    installed_ver="$(dpkg-query -W -f='${source:Version}' libtbb-dev)"
    prefix="$(prefix_for "$installed_ver")"
    is_complete "$prefix" && finish "$prefix"
else
    warn "libtbb-dev is not installed (apt-get install libtbb-dev); building the candidate ${SRC_PKG} source version"
fi

# ---------------------------------------------------- 2. system prerequisites --
missing=()
for p in "${NEEDED_PKGS[@]}"; do pkg_installed "$p" || missing+=("$p"); done

have_src_index() { [[ -n "$(apt-cache showsrc --only-source "$SRC_PKG" 2>/dev/null)" ]]; }

if [[ $EUID -ne 0 ]]; then
    if (( ${#missing[@]} == 0 )) && have_src_index; then
        log "not root, but all prerequisites are present; building as $(id -un)"
    else
        {
            echo "build-tbb-tsan: the TSan oneTBB build is not cached and the first run needs root."
            (( ${#missing[@]} )) && echo "  missing Debian packages: ${missing[*]}"
            have_src_index || echo "  Debian source packages (deb-src) are not enabled/indexed"
            echo "  run:  sudo $(readlink -f "$0")"
            echo "  (with TICKWHEEL_CACHE=$CACHE if you run it as root for this user)"
        } >&2
        exit 1
    fi
else
    # shellcheck disable=SC1091
    codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
    [[ -n "$codename" ]] || die "cannot determine the Debian codename from /etc/os-release"

    # Is there already a deb-src entry for <codename> main? Look at one-line
    # *.list files and deb822 *.sources files (stanza-wise, honouring Enabled:).
    one_line_files=(); deb822_files=()
    [[ -f /etc/apt/sources.list ]] && one_line_files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list;    do [[ -f $f ]] && one_line_files+=("$f"); done
    for f in /etc/apt/sources.list.d/*.sources; do [[ -f $f ]] && deb822_files+=("$f"); done

    has_debsrc=no
    if (( ${#one_line_files[@]} )) && grep -hEq \
        "^[[:space:]]*deb-src([[:space:]]+\[[^]]*\])?[[:space:]]+[^[:space:]]+[[:space:]]+${codename}[[:space:]]+(.*[[:space:]])?main([[:space:]]|\$)" \
        "${one_line_files[@]}"; then
        has_debsrc=yes
    fi
    # awk helper: print each enabled deb822 stanza as one line of
    # "types|uris|suites|components|signed-by" (continuation lines ignored,
    # except for the Signed-By value which must be a key file path here).
    deb822_stanzas() {
        awk '
            function flush() {
                if (types != "" && tolower(enabled) != "no")
                    print types "|" uris "|" suites "|" comps "|" signedby
                types = uris = suites = comps = signedby = enabled = ""
            }
            /^[[:space:]]*#/ { next }
            /^[[:space:]]*$/ { flush(); next }
            /^[^[:space:]]/ {
                key = tolower($1); sub(/:$/, "", key)
                val = $0; sub(/^[^:]*:[[:space:]]*/, "", val); sub(/[[:space:]]+$/, "", val)
                if (key == "types") types = val
                else if (key == "uris") uris = val
                else if (key == "suites") suites = val
                else if (key == "components") comps = val
                else if (key == "signed-by") signedby = val
                else if (key == "enabled") enabled = val
            }
            END { flush() }' "$@"
    }
    stanzas=""
    (( ${#deb822_files[@]} )) && stanzas="$(deb822_stanzas "${deb822_files[@]}")"
    while IFS='|' read -r types uris suites comps signedby; do
        [[ -n "$types" ]] || continue
        if [[ " $types " == *" deb-src "* && " $suites " == *" $codename "* && " $comps " == *" main "* ]]; then
            has_debsrc=yes
        fi
    done <<<"$stanzas"

    added_src=no
    if [[ $has_debsrc == no ]]; then
        out=/etc/apt/sources.list.d/tickwheel-src.sources
        new=""
        # Mirror every "deb" stanza of this release (codename, -updates, -security ...).
        while IFS='|' read -r types uris suites comps signedby; do
            [[ " $types " == *" deb "* ]] || continue
            keep=""
            for s in $suites; do [[ $s == "$codename" || $s == "$codename"-* ]] && keep+="${keep:+ }$s"; done
            [[ -n "$keep" ]] || continue
            new+="Types: deb-src"$'\n'"URIs: $uris"$'\n'"Suites: $keep"$'\n'"Components: $comps"$'\n'
            [[ -n "$signedby" ]] && new+="Signed-By: $signedby"$'\n'
            new+=$'\n'
        done <<<"$stanzas"
        # ... and every one-line "deb" entry of this release.
        if (( ${#one_line_files[@]} )); then
            while read -r line; do
                opts=""; signedby=""
                if [[ $line =~ ^deb[[:space:]]+\[([^]]*)\][[:space:]]+(.*)$ ]]; then
                    opts="${BASH_REMATCH[1]}"; line="deb ${BASH_REMATCH[2]}"
                fi
                read -r _ uri suite comps <<<"$line"
                [[ $suite == "$codename" || $suite == "$codename"-* ]] || continue
                [[ $opts =~ signed-by=([^[:space:]]+) ]] && signedby="${BASH_REMATCH[1]}"
                new+="Types: deb-src"$'\n'"URIs: $uri"$'\n'"Suites: $suite"$'\n'"Components: $comps"$'\n'
                [[ -n "$signedby" ]] && new+="Signed-By: $signedby"$'\n'
                new+=$'\n'
            done < <(grep -hE '^[[:space:]]*deb[[:space:]]' "${one_line_files[@]}" | sed 's/#.*//; s/^[[:space:]]*//')
        fi
        [[ -n "$new" ]] || die "found no 'deb' entry for $codename in /etc/apt/sources.list{,.d/*}; add a deb-src line for $codename main yourself"
        log "enabling Debian source packages: writing $out"
        printf '# Added by tickwheel scripts/build-tbb-tsan.sh (needed for: apt-get source %s)\n%s' "$SRC_PKG" "$new" >"$out"
        added_src=yes
    fi

    if [[ $added_src == yes ]] || ! have_src_index; then
        log "apt-get update"
        apt-get update -q || die "apt-get update failed"
    fi
    have_src_index || die "apt-cache showsrc $SRC_PKG finds nothing even though deb-src is enabled"

    if (( ${#missing[@]} )); then
        log "installing missing Debian packages: ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
            || die "could not install: ${missing[*]} (try: apt-get install ${missing[*]})"
    fi
fi

for t in dpkg-source:dpkg-dev clang:clang clang++:clang cmake:cmake ninja:ninja-build; do
    command -v "${t%%:*}" >/dev/null || die "'${t%%:*}' not found; install the Debian package ${t#*:}"
done

# -------------------------------------------------------------- 3. build --
mkdir -p "$CACHE"
exec 9>"$CACHE/.onetbb-tsan.lock"
flock 9   # serialise concurrent runs; re-check the cache once we hold the lock
if [[ -n "$installed_ver" ]] && is_complete "$(prefix_for "$installed_ver")"; then
    finish "$(prefix_for "$installed_ver")"
fi

work="$(mktemp -d "$CACHE/onetbb-build.XXXXXX")"
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

cd "$work"
# Prefer exactly the installed release; fall back to the candidate source.
fetched=no
if [[ -n "$installed_ver" ]]; then
    log "apt-get source $SRC_PKG=$installed_ver"
    if apt-get source -q "$SRC_PKG=$installed_ver"; then
        fetched=yes
    else
        warn "source $SRC_PKG=$installed_ver not available from the configured deb-src entries; trying the candidate version"
    fi
fi
if [[ $fetched == no ]]; then
    log "apt-get source $SRC_PKG"
    apt-get source -q "$SRC_PKG" || die "apt-get source $SRC_PKG failed (needs Debian package dpkg-dev and a deb-src entry)"
fi

dsc=(./"${SRC_PKG}"_*.dsc)
[[ -f ${dsc[0]} ]] || die "apt-get source did not leave a .dsc file in $work"
src_ver="$(sed -n 's/^Version:[[:space:]]*//p' "${dsc[0]}" | head -n1)"
[[ -n "$src_ver" ]] || die "cannot read the version from ${dsc[0]}"
srcdir=""
for d in ./"${SRC_PKG}"-*/; do [[ -f "$d/CMakeLists.txt" ]] && srcdir="$(cd "$d" && pwd)"; done
[[ -n "$srcdir" ]] || die "no unpacked source tree in $work (is dpkg-dev installed?)"

if [[ -z "$installed_ver" ]]; then
    :
elif [[ "$src_ver" != "$installed_ver" ]]; then
    warn "source version $src_ver differs from installed libtbb-dev source version $installed_ver; continuing with $src_ver"
fi

prefix="$(prefix_for "$src_ver")"
if is_complete "$prefix"; then finish "$prefix"; fi

log "configuring oneTBB $src_ver (clang, -fsanitize=thread) -> $prefix"
# TBB_STRICT=OFF drops -Werror (clang 14 warns on some oneTBB code);
# hwloc/tbbbind is disabled so the result does not depend on libhwloc-dev.
CC=clang CXX=clang++ cmake -S "$srcdir" -B "$work/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DCMAKE_INSTALL_LIBDIR=lib \
    -DTBB_SANITIZE=thread \
    -DTBB_TEST=OFF \
    -DTBB_EXAMPLES=OFF \
    -DTBBMALLOC_BUILD=OFF \
    -DTBB_STRICT=OFF \
    -DTBB_DISABLE_HWLOC_AUTOMATIC_SEARCH=ON \
    -DTBB4PY_BUILD=OFF

log "building"
cmake --build "$work/build" --parallel "$(nproc 2>/dev/null || echo 2)"

log "installing"
rm -rf "$prefix.tmp"
DESTDIR="$work/destdir" cmake --install "$work/build"
is_complete "$work/destdir$prefix" || die "install did not produce $CONFIG_REL"
mv "$work/destdir$prefix" "$prefix.tmp"
rm -rf "$prefix"        # incomplete leftover from an interrupted run, if any
mv -T "$prefix.tmp" "$prefix"

cleanup
trap - EXIT
finish "$prefix"
