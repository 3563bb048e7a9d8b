#!/usr/bin/env bash
# An offline bundle for the many-core table: everything `benchmarks/run.py --part manycore`
# needs on a Linux x86_64 machine with many cores, Python 3.12 and no network.
#
#   bash benchmarks/manycore/make_bundle.sh [OUT]   # OUT: benchmarks/.work/manycore-bundle
#
#   OUT/benchmarks/      this suite (results/ left empty: the run writes there)
#   OUT/wheels/          supervise's wheel, built from this checkout, and binary wheels of the
#                        peers and of every dependency, for the target's Python
#   OUT/wheels/supervise-source.json   the commit the wheel was built from (for the report)
#   OUT/bin/wrk          wrk, run with the libraries in OUT/lib/ beside it
#   OUT/run.sh           the command below
#
# There, from anywhere (results under OUT/benchmarks/results/):
#
#   bash OUT/run.sh --server-cpus 0-7 --load-cpus 8-15
#
# Settings (environment): PY, the target's Python version (3.12); PYTHON, an interpreter of
# that version to build supervise's wheel with (pyenv's or pythonX.Y on PATH); WHEEL, a
# supervise wheel already built for it, used instead of building one (the build takes a
# few minutes); CHARTS=0 leaves matplotlib out (no charts; about 40 MB less).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# Under .work/ by default: ignored by git, so the bundle never shows as untracked files.
out=${1:-$root/benchmarks/.work/manycore-bundle}
mkdir -p "$out" && out=$(cd "$out" && pwd)
py=${PY:-3.12}
tag=cp${py/./}
mkdir -p "$out/wheels" "$out/bin" "$out/lib"

# supervise, from this checkout, by an interpreter of the target's version: its extension
# module is built for one Python ABI.
if [ -n "${WHEEL:-}" ]; then
  cp "$WHEEL" "$out/wheels/"
else
  python=${PYTHON:-}
  if [ -z "$python" ]; then
    python=$(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/"$py".*/bin/python 2>/dev/null | tail -1)
    python=${python:-$(command -v "python$py" || true)}
  fi
  [ -x "$python" ] || { echo "needs a Python $py to build supervise's wheel (set PYTHON or WHEEL)"; exit 1; }
  "$python" -m pip wheel -q --no-deps -w "$out/wheels" "$root"
fi
wheel=$(ls "$out"/wheels/supervise_server-*-"$tag"-*.whl 2>/dev/null | tail -1)
[ -n "$wheel" ] || { echo "no supervise_server wheel for $tag in $out/wheels"; exit 1; }

# The peers (the suite's own list), matplotlib for the charts, pip (for a Python without
# ensurepip), and every dependency, supervise's included: binary wheels for the target,
# whatever this machine runs. linux_x86_64 is the tag of supervise's own wheel.
peers=$(cd "$root/benchmarks" && python3 -c 'from bench.peers import PEERS; print(" ".join(PEERS))')
extra=(pip)
[ "${CHARTS:-1}" = 0 ] || extra+=(matplotlib)
target=(--only-binary=:all: --python-version "$py" --implementation cp --abi "$tag" --abi abi3 --abi none
        --platform linux_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for glibc in 2_17 2_24 2_28 2_31 2_34 2_35; do target+=(--platform "manylinux_${glibc}_x86_64"); done
download() { python3 -m pip download -q --disable-pip-version-check "${target[@]}" -d "$out/wheels" "$@"; }
# shellcheck disable=SC2086  # the peers are words
if ! download "$wheel" $peers "${extra[@]}"; then
  # One at a time: a peer without a wheel for the target only loses its own rows there.
  download "$wheel"
  for package in $peers "${extra[@]}"; do download "$package" || echo "no wheels for $package: left out"; done
fi

# What the report names as the measured supervise (the bundle holds no git repository).
commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo "(no commit)")
dirty=$([ -n "$(git -C "$root" status --porcelain -- supervise native 2>/dev/null)" ] && echo yes || echo no)
# A wheel given by WHEEL was built from some checkout, not necessarily this one.
[ -z "${WHEEL:-}" ] || dirty="unknown (a prebuilt wheel: $(basename "$WHEEL"))"
digest=$(cd "$root/benchmarks" && python3 -c 'from bench.peers import source_digest; print(source_digest()[:16])')
printf '{"commit": "%s", "dirty": "%s", "digest": "%s", "wheel": "%s"}\n' \
  "$commit" "$dirty" "$digest" "$(basename "$wheel")" > "$out/wheels/supervise-source.json"

# wrk and the libraries it links beyond glibc's, with a wrapper that finds them: the
# suite runs bin/wrk under taskset, and exec keeps the wrapper's cores.
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cp "$(command -v wrk)" "$out/bin/wrk.real"
ldd "$(command -v wrk)" | awk '/=> \// {print $3}' | while read -r lib; do
  case $(basename "$lib") in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libgcc_s.so*|ld-linux*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
cat > "$out/bin/wrk" <<'EOF'
#!/bin/sh
here=$(dirname "$0")
LD_LIBRARY_PATH="$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/wrk.real" "$@"
EOF
chmod +x "$out/bin/wrk"

# The suite as this checkout has it (untracked files included, ignored ones not), without
# the results of earlier runs.
rm -rf "$out/benchmarks"
(cd "$root" && git ls-files -z --cached --others --exclude-standard -- benchmarks \
  | grep -zv '^benchmarks/results/' | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) \
  | tar -xf - -C "$out"
mkdir -p "$out/benchmarks/results"

cat > "$out/run.sh" <<'EOF'
#!/bin/sh
# The many-core table from this bundle: supervise and the peers from wheels/ (pip
# --no-index), wrk from bin/. Options go to benchmarks/run.py (e.g. --server-cpus 0-7
# --load-cpus 8-15; without them the cores are split in halves).
here=$(cd "$(dirname "$0")" && pwd)
exec "${PYTHON:-python3}" "$here/benchmarks/run.py" --part manycore --wheelhouse "$here/wheels" \
  --wrk "$here/bin/wrk" "$@"
EOF
chmod +x "$out/run.sh"
du -sh "$out"
