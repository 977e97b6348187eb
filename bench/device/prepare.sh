#!/usr/bin/env bash
# Build the folder a GPU machine without network needs to run bench/gpu_local_endpoint.py:
#   DEST/src.tar.xz     this checkout's committed tree (git archive HEAD) and its COMMIT
#   DEST/wheels/        CPython 3.12 x86_64 wheels of the runtime dependencies such a
#                       machine may lack (it is assumed to have torch, torchvision, numpy)
#   DEST/triton.tar.xz  tritonserver and its libraries from the nvidia-pytriton wheel
#                       installed in .venv (only the 3.12 python-backend stub), and the
#                       numpy 1.x the stub needs, as a folder named triton-stub-site
# Usage: bench/device/prepare.sh DEST   (run from the repository root; DEST is replaced)
set -euo pipefail
dest=${1:?usage: bench/device/prepare.sh DEST}
root=$(git rev-parse --show-toplevel)
venv_python="$root/.venv/bin/python"
site=$("$venv_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cache="${XDG_CACHE_HOME:-$HOME/.cache}/deploy-device-wheels"
mkdir -p "$cache"

rm -rf "$dest"
mkdir -p "$dest/src" "$dest/wheels"
git -C "$root" archive HEAD | tar -x -C "$dest/src"
git -C "$root" rev-parse HEAD >"$dest/src/COMMIT"
tar -C "$dest" -cf - src | xz -T2 -6 >"$dest/src.tar.xz"
rm -rf "$dest/src"
cp "$root/bench/device/run_gpu.sh" "$dest/run_gpu.sh"

# The versions this checkout's virtualenv runs, as 3.12 wheels (pure ones are any-Python).
# Only what the benchmark imports (the package, the SDK's codec, the local endpoint);
# the AWS and CLI dependencies stay behind to keep the carried folder under 64 MiB.
names="tritonclient isal blake3 httptools protobuf uvloop packaging"
pins=()
for name in $names; do
  pins+=("$name==$("$venv_python" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')")
done
"$venv_python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
  -d "$cache" "${pins[@]}" numpy==1.26.4
for pin in "${pins[@]}"; do
  name=${pin%%==*}; version=${pin##*==}
  pattern=$(echo "$name" | tr '-' '_')
  cp "$(ls "$cache"/* | grep -i "/${pattern}-${version}-" | head -1)" "$dest/wheels/"
done

# tritonserver: the wheel's folders, less the stubs and libpython of other Pythons.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/triton/pytriton" "$stage/triton/triton-stub-site"
cp -a "$site/pytriton/tritonserver" "$stage/triton/pytriton/"
find "$stage/triton/pytriton/tritonserver/python_backend_stubs" -mindepth 1 -maxdepth 1 \
  ! -name 3.12 -exec rm -rf {} +
cp -a "$site/nvidia_pytriton.libs" "$stage/triton/"
rm -f "$stage/triton/nvidia_pytriton.libs/"libpython3-*
(cd "$stage/triton/triton-stub-site" && "$venv_python" -m zipfile -e \
  "$(ls "$cache"/numpy-1.26.4-cp312-*.whl)" .)
packed="$cache/triton-$("$venv_python" -m pip show nvidia-pytriton | sed -n 's/^Version: //p').tar.xz"
if [ ! -s "$packed" ]; then  # xz -9 takes minutes: once per version
  tar -C "$stage/triton" -cf - . | xz -T2 -9 >"$packed.partial"
  mv "$packed.partial" "$packed"
fi
cp "$packed" "$dest/triton.tar.xz"
du -sh "$dest" "$dest"/*
