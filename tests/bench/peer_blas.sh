# Sourced by the benchmark scripts: `peer_blas PYTHON` prints which OpenBLAS kernels the
# PyTorch peers run on and exports OPENBLAS_CORETYPE for the fastest the CPU allows
# (peer_blas.py), so no peer runs on misdetected or inherited slow kernels.
peer_blas() {
  local out core
  out=$("$1" "$(dirname "${BASH_SOURCE[0]}")/peer_blas.py" --export) || true
  echo "$out" | grep '^peer_blas:' || echo "peer_blas: not measured"
  core=$(echo "$out" | sed -n 's/^export OPENBLAS_CORETYPE=//p')
  if [[ -n "$core" ]]; then export OPENBLAS_CORETYPE="$core"; fi
}
