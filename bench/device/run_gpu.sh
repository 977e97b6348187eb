#!/usr/bin/env bash
# On the GPU machine (no network; torch, torchvision and numpy installed), from a
# folder holding what bench/device/prepare.sh wrote (DEVCARRY, default .devcarry):
# unpack it under /opt/deploy-bench (readable from the python-backend stub's box),
# check the python-backend stub links against this Python, then run
# bench/gpu_local_endpoint.py with the arguments given. Logs and the JSON go to
# $OUT (default ./gpu-out).
set -euo pipefail
carry=$(realpath "${DEVCARRY:-.devcarry}")
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
base=/opt/deploy-bench
rm -rf "$base"
mkdir -p "$base/site"
tar -xJf "$carry/src.tar.xz" -C "$base"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --target "$base/site" "$carry"/wheels/*.whl
tar -xJf "$carry/triton.tar.xz" -C "$base/site"  # pytriton/, nvidia_pytriton.libs/, triton-stub-site/
# deploy.local.triton.install looks for the stub's numpy<2 beside the running Python's prefix.
prefix=$(python3 -c 'import sys; print(sys.prefix)')
rm -rf "$prefix/triton-stub-site"
mv "$base/site/triton-stub-site" "$prefix/triton-stub-site"
export PYTHONPATH="$base/src:$base/site" PYTHONUNBUFFERED=1
stub=$(echo "$base"/site/pytriton/tritonserver/python_backend_stubs/3.*/triton_python_backend_stub)
# The stub links libpython3.X.so.1.0; tritonserver is given sys.base_prefix/lib. Where
# this Python keeps it elsewhere, name that folder too (tritonserver's environment
# keeps LD_LIBRARY_PATH).
libdir="$(python3 -c 'import sys; print(sys.base_prefix)')/lib"
if LD_LIBRARY_PATH="$libdir" ldd "$stub" | grep -q 'libpython.*not found'; then
  found=$(find / -xdev -name "libpython3.$(python3 -c 'import sys; print(sys.version_info[1])').so.1.0" 2>/dev/null | head -1)
  [ -n "$found" ] && export LD_LIBRARY_PATH="$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name(0))'
  echo "stub: $stub"
  LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$stub" | grep -E 'python|not found' || true
  command -v cc gcc || true
  echo "commit: $(cat "$base/src/COMMIT")"
} 2>&1 | tee "$out/setup.log"
cd "$base/src"
# SETUP_ONLY=1: leave the unpacked tree and its environment for other benchmarks.
[ "${SETUP_ONLY:-0}" = 1 ] && exit 0
set -o pipefail
python3 bench/device/box_gpu_check.py 2>&1 | tee "$out/box_gpu_check.log"
python3 bench/gpu_local_endpoint.py --out "$out/gpu_local_endpoint.json" "$@" 2>&1 | tee "$out/bench.log"
