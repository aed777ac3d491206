# Sourced by scripts/test and scripts/demo: find Python 3.12+, make .venv, install.
#
#   UJ_PYTHON   interpreter to use (default: the newest 3.12+ on PATH, then pyenv's)
#   UJ_VENV     virtual environment directory (default: .venv)
#   UJ_EXTRAS   extras to install (default given by the caller)
#   UJ_DJANGO   a Django requirement to pin, e.g. 'Django>=5.2,<5.3' (CI's second leg)

find_python() {
    if [ -n "${UJ_PYTHON:-}" ]; then
        command -v "$UJ_PYTHON" || { echo "UJ_PYTHON=$UJ_PYTHON not found" >&2; return 1; }
        return 0
    fi
    # 3.12 first: the version development and CI run on (SPEC section 0).
    local candidate minor
    for candidate in python3.12 python3.13 python3.14 python3; do
        if command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    if command -v pyenv >/dev/null 2>&1; then
        local root version
        root="$(pyenv root)"
        for minor in 12 13 14; do
            for version in $(ls "$root/versions" 2>/dev/null | grep "^3\.$minor\." | sort -rV); do
                candidate="$root/versions/$version/bin/python3"
                if [ -x "$candidate" ]; then
                    echo "$candidate"
                    return 0
                fi
            done
        done
    fi
    echo "No Python 3.12+ found on PATH or in pyenv; set UJ_PYTHON=/path/to/python3.12" >&2
    return 1
}

ensure_venv() {
    local extras="${UJ_EXTRAS:-$1}"
    local venv="${UJ_VENV:-.venv}"
    local python
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
        echo "==> installing .[$extras] ${UJ_DJANGO:-} into $venv" >&2
        local log="$venv/install.log"
        # shellcheck disable=SC2086
        if ! { "$venv/bin/python" -m pip install --disable-pip-version-check --upgrade pip \
                && "$venv/bin/python" -m pip install --disable-pip-version-check -e ".[$extras]" ${UJ_DJANGO:+"$UJ_DJANGO"}; } \
                >"$log" 2>&1; then
            grep -v "^WARNING: Location" "$log" | tail -n 40 >&2
            echo "==> install failed; the whole log is $log" >&2
            return 1
        fi
        "$venv/bin/python" -c "import ultimate_jobs, django; print('==> Django', django.get_version())" >&2
        echo "$want" > "$stamp"
    fi
    export PATH="$PWD/$venv/bin:$PATH"
    export VIRTUAL_ENV="$PWD/$venv"
}
