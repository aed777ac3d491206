# Sourced by scripts/test and scripts/demo: find Python, make .venv, install.
#
# The package supports Python 3.11 (with Django 5.2 LTS) and 3.12+ (with Django 6).
# The scripts prefer 3.12+, the version development and CI's main leg run on (SPEC
# section 0); with only 3.11 found they use it, and pip resolves Django 5.2 for it.
#
#   UJ_PYTHON   interpreter to use (default: python3.12, 3.13, 3.14 or python3 on PATH
#               when 3.12+, then pyenv's 3.12+, then the same for 3.11)
#   UJ_VENV     virtual environment directory (default: .venv)
#   UJ_EXTRAS   extras to install (default given by the caller)
#   UJ_DJANGO   a Django requirement to pin, e.g. 'Django>=5.2,<5.3' (CI's second leg)

# The "3.N" of an interpreter, or nothing when it does not run.
python_minor() {
    "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null
}

# The first interpreter of Python 3.<lowest> up to 3.<highest> on PATH, then in pyenv.
find_python_between() {
    local lowest="$1" highest="$2" candidate minor version
    for candidate in $(seq -f 'python3.%g' "$lowest" "$highest") python3; do
        command -v "$candidate" >/dev/null 2>&1 || continue
        minor="$(python_minor "$candidate")" || continue
        if [ "${minor%%.*}" = 3 ] && [ "${minor#*.}" -ge "$lowest" ] \
            && [ "${minor#*.}" -le "$highest" ]; then
            command -v "$candidate"
            return 0
        fi
    done
    if command -v pyenv >/dev/null 2>&1; then
        local root
        root="$(pyenv root)"
        for minor in $(seq "$lowest" "$highest"); do
            for version in $(ls "$root/versions" 2>/dev/null | grep "^3\.$minor\." | sort -rV); do
                candidate="$root/versions/$version/bin/python3"
                if [ -x "$candidate" ]; then
                    echo "$candidate"
                    return 0
                fi
            done
        done
    fi
    return 1
}

find_python() {
    if [ -n "${UJ_PYTHON:-}" ]; then
        command -v "$UJ_PYTHON" || { echo "UJ_PYTHON=$UJ_PYTHON not found" >&2; return 1; }
        return 0
    fi
    find_python_between 12 14 && return 0
    if find_python_between 11 11; then
        echo "==> no Python 3.12+ found: using 3.11, with Django 5.2 LTS (Django 6 needs 3.12+)" >&2
        return 0
    fi
    echo "No Python 3.11+ found on PATH or in pyenv (3.12+ preferred); set UJ_PYTHON=/path/to/python3.12" >&2
    return 1
}

# Read pip's output on stdin; say each step on stderr: one line per step, or one line
# rewritten in place on a terminal. pip's own progress bars only draw on a terminal,
# and its output goes to the install log, so these lines are what a person sees.
pip_steps() {
    local line step count=0 tty=""
    [ -t 2 ] && tty=1
    while IFS= read -r line; do
        step=""
        case "$line" in
            Collecting\ *)
                count=$((count + 1))
                step="${line#Collecting }"
                step="collecting ${step%%[ <>=!~;(\[]*}"
                ;;
            Processing\ /*)  # a wheel from a local index or find-links
                count=$((count + 1))
                step="${line#Processing }"
                step="${step##*/}"
                step="collecting ${step%%-*}"
                ;;
            *"Installing build dependencies: started") step="installing build dependencies" ;;
            *"Building editable for "*": started" | *"Building wheel for "*": started")
                step="${line#*for }"
                step="building ${step%% *}"
                ;;
            "Installing collected packages: "*)
                step="${line#Installing collected packages: },"
                step="installing $(printf '%s' "$step" | tr -cd , | wc -c | tr -d ' ') package(s)"
                ;;
            "Successfully installed "*) step="installed" ;;
            ERROR:*) step="$line" ;;
        esac
        [ -n "$step" ] || continue
        if [ -n "$tty" ]; then
            printf '\r\033[K    [%d] %s' "$count" "$step" >&2
        else
            printf '    %s\n' "$step" >&2
        fi
    done
    if [ -n "$tty" ]; then printf '\n' >&2; fi
    return 0
}

ensure_venv() {
    local extras="${UJ_EXTRAS:-$1}"
    local venv="${UJ_VENV:-.venv}"
    local python started=$SECONDS
    python="$(find_python)"
    echo "==> Python: $python ($("$python" -c 'import sys; print(sys.version.split()[0])'))" >&2
    if [ ! -x "$venv/bin/python" ]; then
        echo "==> creating $venv" >&2
        "$python" -m venv "$venv"
    fi
    local stamp="$venv/.ultimate-jobs-installed"
    local want
    want="$(cat pyproject.toml; echo "$extras ${UJ_DJANGO:-}")"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        local log="$venv/install.log"
        echo "==> installing .[$extras] ${UJ_DJANGO:-} into $venv (a minute or so the first time; the whole log: $log)" >&2
        : >"$log"
        # shellcheck disable=SC2086
        if ! (
            set -o pipefail  # the status is pip's, not that of the step filter
            { "$venv/bin/python" -m pip install --disable-pip-version-check --upgrade pip \
                && "$venv/bin/python" -m pip install --disable-pip-version-check -e ".[$extras]" ${UJ_DJANGO:+"$UJ_DJANGO"}; } \
                2>&1 | tee -a "$log" | pip_steps
        ); then
            grep -v "^WARNING: Location" "$log" | tail -n 40 >&2
            echo "==> install failed; the whole log is $log" >&2
            return 1
        fi
        "$venv/bin/python" -c "import ultimate_jobs, django; print('==> Django', django.get_version())" >&2
        echo "$want" > "$stamp"
        echo "==> installed in $((SECONDS - started)) s" >&2
    fi
    export PATH="$PWD/$venv/bin:$PATH"
    export VIRTUAL_ENV="$PWD/$venv"
}
