#!/usr/bin/env bash
# The proof that the README's main command works on a new machine: a fresh Debian 12 (bookworm)
# root made with debootstrap (minbase, plus only what a learner installs before `make book`: make
# and git, with git's ca-certificates), the repository copied in, and there, as root, exactly the
# README's `make book`, with Debian's own /usr/bin/python3 (setup.sh installs python3-venv, the
# compilers and MPI with apt-get from Debian's mirror) and the Python packages from a wheelhouse made
# here (COURSE_WHEELHOUSE). Then the built book is checked here by the book's own test,
# tests/test_book.py with COURSE_BOOK_HTML (offline in Debian's chromium: math typeset, figures
# loaded, no console errors). `make clean-root` runs it; CI runs it after `make test`.
#
#   bash scripts/clean-root.sh            make the root anew, `make book` in it, check the book
#   bash scripts/clean-root.sh --remove   remove the last run's folder (the root stays until then)
#
# It prints the time of each phase and the total; on a failure its last line is
# "clean-root: FAILED: <why>" and it exits non-zero. Root on a Debian 12 machine only.
#
# Environment:
#   CLEAN_ROOT_DIR=/var/tmp/course-clean-root   the run's folder: the root (about 3 GB), the logs;
#                                               kept for a look until the next run or --remove
#   CLEAN_ROOT_MIRROR=http://deb.debian.org/debian
# Nothing is cached between runs: Debian's packages download in seconds here, and a first run on a
# new machine (CI) is what has to fit.
#
# Safety: everything runs in a mount and PID namespace of its own (unshare), so the root's /proc,
# /sys and /dev mounts and every process started in the root end with this script, even when it is
# killed; on exit a trap also stops the root's processes, unmounts, and checks. The root's /dev is a
# small tmpfs of its own, never the host's /dev bound in; nothing is deleted while anything is
# mounted below the run's folder, and the deletion stays on one file system (rm --one-file-system).
set -euo pipefail
set -E                                   # the ERR trap (the reason of a failure) in functions too

SELF=$(realpath "$0")
REPO=$(cd "$(dirname "$SELF")/.." && pwd)
BASE=$(realpath -m "${CLEAN_ROOT_DIR:-/var/tmp/course-clean-root}")
MIRROR=${CLEAN_ROOT_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
ROOT=$BASE/root                          # the new machine's file system
MARK=$BASE/.made-by-clean-root           # only a folder holding this is ever deleted
COURSE=/root/course                      # the learner's copy of the repository, inside the root
WHEELHOUSE=$REPO/build/wheelhouse        # `make setup-test` makes it for /usr/bin/python3
# what a learner installs before the README's `make book` (apt-get install make git: git recommends
# ca-certificates, which debootstrap would leave out)
FIRST_PACKAGES=make,git,ca-certificates
PHASES=(debootstrap prepare apt pip kernels book check)
declare -A NAME=([debootstrap]="debootstrap" [prepare]="copy in" [apt]="apt set-up"
                 [pip]="pip" [kernels]="kernels" [book]="book" [check]="check")
declare -A TOOK=()
reason=""
mode=run
started=$(printf '%(%s)T' -1)

say() { printf 'clean-root: %s\n' "$*"; }
now() { printf '%(%s)T' -1; }
clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }
# stop with a one-line reason (the EXIT trap prints it last)
fail() { reason=$*; exit 1; }

# --- safety: mounts, processes, deletion ---------------------------------------------------------

# The mount points at or below a folder (in this mount namespace), deepest first.
mounted_under() {
    awk -v d="$1" '{ m = $5; gsub(/\\040/, " ", m); if (m == d || index(m, d "/") == 1) print m }' \
        /proc/self/mountinfo | sort -r
}

# Stop the processes whose root is the new root (a daemon, a kernel left by a failed build): ours.
stop_root_processes() {
    local signal pid pids
    for signal in TERM KILL; do
        pids=()
        for pid in /proc/[0-9]*; do
            if [ "$(readlink "$pid/root" 2>/dev/null)" = "$ROOT" ]; then pids+=("${pid#/proc/}"); fi
        done
        [ "${#pids[@]}" -gt 0 ] || return 0
        say "stopping the processes left in the root (SIG$signal): ${pids[*]}"
        kill -s "$signal" "${pids[@]}" 2>/dev/null || true
        sleep 2
    done
}

# Unmount everything below the root, deepest first (lazily where busy), then check that nothing is
# left: a later rm -rf must never walk into a mounted /proc, /sys or /dev.
unmount_root() {
    local m
    for _ in 1 2 3; do
        [ -n "$(mounted_under "$ROOT")" ] || return 0
        while IFS= read -r m; do
            umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
        done < <(mounted_under "$ROOT")
    done
    [ -z "$(mounted_under "$ROOT")" ] || {
        echo "clean-root: STILL MOUNTED below $ROOT (do not delete it): $(mounted_under "$ROOT" | tr '\n' ' ')"
        return 1
    }
}

# Delete the run's folder: only one this script made, only with nothing mounted below it.
remove_base() {
    [ -e "$BASE" ] || return 0
    [ -f "$MARK" ] || fail "refusing to delete $BASE: not made by this script (no $MARK)"
    local left
    left=$(mounted_under "$BASE")
    [ -z "$left" ] || fail "refusing to delete $BASE: mounted below it: ${left//$'\n'/ }"
    rm -rf --one-file-system "$BASE"
}

on_exit() {
    local status=$? phase total
    set +e
    trap - ERR
    if [ "${CLEAN_ROOT_NAMESPACE:-}" = 1 ]; then
        if [ -d "$ROOT" ]; then
            stop_root_processes
            unmount_root || { status=1; reason=${reason:-"could not unmount below $ROOT"}; }
        fi
        total=$(( $(now) - started ))
        say "times (minutes:seconds):"
        for phase in "${PHASES[@]}"; do
            printf '  %-16s %s\n' "${NAME[$phase]}" \
                "$(if [ -n "${TOOK[$phase]:-}" ]; then clock "${TOOK[$phase]}"; else echo -; fi)"
        done
        printf '  %-16s %s\n' total "$(clock "$total")"
    fi
    if [ "$status" != 0 ]; then
        echo "clean-root: FAILED: ${reason:-exit status $status}"
    elif [ "$mode" = remove ]; then
        say "removed $BASE"
    else
        say "OK: make book works in a fresh Debian $SUITE root with its own Python, and its book passes the check ($(clock "$total"))"
    fi
    exit "$status"
}

# --- the phases ----------------------------------------------------------------------------------

preflight() {
    [ "$(id -u)" = 0 ] || fail "run as root (debootstrap, chroot and mounts need it)"
    grep -qs '^VERSION_CODENAME=bookworm' /etc/os-release ||
        fail "this machine is not Debian 12: the wheelhouse, made with its /usr/bin/python3, would not fit the root's Python"
    case $BASE in /|/var|/var/tmp|/tmp|"$REPO"|*[[:space:]]*)
        fail "CLEAN_ROOT_DIR=$BASE: use a folder of its own, without spaces" ;;
    esac
    for command in chroot unshare git tar; do
        command -v "$command" >/dev/null || fail "$command is missing on this machine"
    done
    "$REPO/.venv/bin/python" -c 'import playwright, pytest' 2>/dev/null ||
        fail "no .venv with the test packages here (the book's check needs them): run make setup-test first"
}

make_root() {
    if ! command -v debootstrap >/dev/null; then
        say "installing debootstrap on this machine"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq -o DPkg::Lock::Timeout=600 debootstrap >/dev/null 2>&1 ||
            { apt-get update -qq && apt-get install -y -qq -o DPkg::Lock::Timeout=600 debootstrap >/dev/null; }
    fi
    remove_base
    mkdir -p "$ROOT"
    touch "$MARK"
    say "debootstrap --variant=minbase --include=$FIRST_PACKAGES $SUITE $ROOT $MIRROR"
    debootstrap --variant=minbase --include="$FIRST_PACKAGES" "$SUITE" "$ROOT" "$MIRROR" \
            >"$BASE/debootstrap.log" 2>&1 || {
        tail -n 15 "$BASE/debootstrap.log" "$ROOT/debootstrap/debootstrap.log" 2>/dev/null
        fail "debootstrap failed (log: $BASE/debootstrap.log)"
    }
    say "the root: $(chroot "$ROOT" dpkg-query -W -f '.\n' | wc -l) Debian packages, python3: $(
        chroot "$ROOT" sh -c 'command -v python3 || echo none')"
}

# apt in the root reaches Debian's mirror as this machine's does: its Debian sources (bookworm,
# -updates, -security) and its settings for getting there (a proxy, a snapshot's dates)
configure_apt() {
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        cp /etc/apt/sources.list.d/debian.sources "$ROOT/etc/apt/sources.list.d/"
        rm -f "$ROOT/etc/apt/sources.list"
    elif grep -qs '^deb .*debian' /etc/apt/sources.list; then
        grep '^deb .*debian' /etc/apt/sources.list >"$ROOT/etc/apt/sources.list"
    fi
    local conf
    for conf in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
        if grep -qsE 'Proxy|Check-Valid-Until|Check-Date' "$conf"; then
            cp "$conf" "$ROOT/etc/apt/apt.conf.d/"
        fi
    done
}

# the files of the repository that are committed or would be (tracked and new, as in the working
# tree; nothing git ignores: no .venv, no build/): in CI's fresh clone, exactly the commit
copy_repository() {
    mkdir -p "$ROOT$COURSE"
    git -C "$REPO" -c safe.directory="$REPO" ls-files -z --cached --others --exclude-standard |
        (cd "$REPO" && while IFS= read -r -d '' file; do
             if [ -e "$file" ] || [ -L "$file" ]; then printf '%s\0' "$file"; fi
         done | tar --null --no-recursion -T - -cf -) |
        tar -xf - -C "$ROOT$COURSE"
    say "copied $(find "$ROOT$COURSE" -type f | wc -l) files of the repository to $COURSE"
}

# the root's network set-up, its kernel file systems and a /dev of its own (with /dev/shm: MPI's
# shared memory), and no daemon started by a package there (the chroot convention, policy-rc.d)
mount_root() {
    cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
    cp -L /etc/hosts "$ROOT/etc/hosts"
    printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
    chmod 755 "$ROOT/usr/sbin/policy-rc.d"
    mount -t proc -o nosuid,nodev,noexec proc "$ROOT/proc"
    mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$ROOT/sys"
    mount -t tmpfs -o nosuid,mode=0755,size=1m dev "$ROOT/dev"
    local name major minor
    while read -r name major minor; do
        mknod -m 666 "$ROOT/dev/$name" c "$major" "$minor"
    done <<'EOF'
null 1 3
zero 1 5
full 1 7
random 1 8
urandom 1 9
tty 5 0
EOF
    ln -s /proc/self/fd "$ROOT/dev/fd"
    ln -s /proc/self/fd/0 "$ROOT/dev/stdin"
    ln -s /proc/self/fd/1 "$ROOT/dev/stdout"
    ln -s /proc/self/fd/2 "$ROOT/dev/stderr"
    ln -s pts/ptmx "$ROOT/dev/ptmx"
    mkdir -m 755 "$ROOT/dev/pts"
    mkdir -m 1777 "$ROOT/dev/shm"
    mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts "$ROOT/dev/pts"
    mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$ROOT/dev/shm"
}

prepare_root() {
    say "the wheelhouse for Debian's Python: $WHEELHOUSE"
    bash "$REPO/scripts/wheelhouse.sh" "$WHEELHOUSE" /usr/bin/python3
    configure_apt
    copy_repository
    cp -r "$WHEELHOUSE" "$ROOT/root/wheelhouse"
    mount_root
}

# Copy make book's output to the terminal (each line with the minutes since it started) and to its
# log, and note when each of its phases begins: setup.sh's and the Makefile's own lines mark them.
follow() {
    local marks=$1 log=$2 start line phase
    start=$(now)
    : >"$marks"
    while IFS= read -r line; do
        phase=
        case $line in
            "setup: installing with apt-get"*) phase=apt ;;
            "setup: installing from the wheelhouse"* | "setup: creating the virtual environment"* | \
                "setup: installing the Python packages"*) phase=pip ;;
            "setup: ready"*) phase=kernels ;;
            "== "*) phase=book ;;
        esac
        if [ -n "$phase" ] && ! grep -q "^$phase " "$marks"; then echo "$phase $(now)" >>"$marks"; fi
        printf '%s\n' "$line" >>"$log"
        printf '  [%s] %s\n' "$(clock $(( $(now) - start )))" "$line"
    done
}

# The phases of make book from its marks: each lasts until the next one begins; make's first
# seconds count to the first.
time_make_book() {
    local marks=$1 begin=$2 end=$3 phase at previous="" previous_at=$2
    while read -r phase at; do
        if [ -n "$previous" ]; then TOOK[$previous]=$((at - previous_at)); else at=$begin; fi
        previous=$phase previous_at=$at
    done < <(sort -k2,2n "$marks")
    if [ -n "$previous" ]; then TOOK[$previous]=$((end - previous_at)); fi
}

make_book() {
    local log=$BASE/make-book.log marks=$BASE/make-book.phases begin status phase
    say "in the root, as root: cd $COURSE && make book   (COURSE_WHEELHOUSE=/root/wheelhouse)"
    begin=$(now)
    rm -f "$BASE/make-book.status"
    # in the background, waited for: a signal to this script is handled at once, not after make
    (
        set +e
        chroot "$ROOT" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            COURSE_WHEELHOUSE=/root/wheelhouse \
            /bin/bash -c "cd $COURSE && make book" </dev/null 2>&1
        echo $? >"$BASE/make-book.status"
    ) | follow "$marks" "$log" &
    wait $! || true
    status=$(cat "$BASE/make-book.status" 2>/dev/null || echo "unknown")
    time_make_book "$marks" "$begin" "$(now)"
    if [ "$status" != 0 ]; then
        phase=$(sort -k2,2n "$marks" | tail -n 1 | cut -d' ' -f1)
        fail "make book failed in the root (exit $status, in its ${NAME[${phase:-apt}]} phase; log: $log)"
    fi
}

check_book() {
    local html=$ROOT$COURSE/build/book/_build/html
    [ -f "$html/index.html" ] || fail "make book succeeded but wrote no $html/index.html"
    say "built with the root's $(chroot "$ROOT" /usr/bin/python3 --version) (/usr/bin/python3), .venv: $(
        chroot "$ROOT" "$COURSE/.venv/bin/python" --version)"
    say "the book: $(find "$html" -name '*.html' | wc -l) pages; checking it with tests/test_book.py"
    (cd "$REPO" && COURSE_BOOK_HTML="$html" .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/test_book.py) || fail "the root's book fails tests/test_book.py (COURSE_BOOK_HTML=$html)"
}

# run a phase, noting its time
timed() {
    local phase=$1 begin
    shift
    begin=$(now)
    "$@"
    TOOK[$phase]=$(( $(now) - begin ))
}

main() {
    trap 'reason=${reason:-"line $LINENO: $BASH_COMMAND (exit $?)"}' ERR
    trap on_exit EXIT
    trap 'reason="interrupted"; exit 130' INT
    trap 'reason="terminated"; exit 143' TERM
    case "${1:-}" in
        "") ;;
        --remove) mode=remove; remove_base; return 0 ;;
        *) fail "unknown option $1 (none, or --remove)" ;;
    esac
    if [ "${CLEAN_ROOT_NAMESPACE:-}" != 1 ]; then
        preflight
        # again, in mount and PID namespaces of its own: the root's mounts and processes end with
        # it, whatever happens (--kill-child: also when unshare itself is killed)
        exec unshare --mount --propagation private --pid --fork --kill-child --mount-proc \
            env CLEAN_ROOT_NAMESPACE=1 bash "$SELF" "$@"
    fi
    timed debootstrap make_root
    timed prepare prepare_root
    make_book
    timed check check_book
}

main "$@"
