// The cuBLAS functions tandem calls, loaded from libcublas.so.13 with dlopen the first
// time one is called, instead of linking the library. cuBLAS pulls in cuBLASLt, whose
// load costs every process about 0.15 s and 200 MB of touched memory even when it
// never uses a GPU (a `trainer health` probe, a parameter server); now only a process
// that creates a GPU context pays it. Without the library each call returns
// CUBLAS_STATUS_NOT_INITIALIZED, which GpuContext::Get reports.
#include <cublas_v2.h>
#include <dlfcn.h>

namespace {

void* Library() {
  static void* const handle = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  return handle;
}

// The library's `name`, as a pointer of the declared type F; null without it.
template <typename F>
F Load(const char* name) {
  void* h = Library();
  return h == nullptr ? nullptr : reinterpret_cast<F>(dlsym(h, name));
}

}  // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  static const auto f = Load<decltype(&cublasCreate_v2)>("cublasCreate_v2");
  return f == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : f(handle);
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static const auto f = Load<decltype(&cublasSetStream_v2)>("cublasSetStream_v2");
  return f == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : f(handle, stream);
}

cublasStatus_t CUBLASWINAPI cublasSetPointerMode_v2(cublasHandle_t handle,
                                                    cublasPointerMode_t mode) {
  static const auto f = Load<decltype(&cublasSetPointerMode_v2)>("cublasSetPointerMode_v2");
  return f == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : f(handle, mode);
}

cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  static const auto f = Load<decltype(&cublasSetMathMode)>("cublasSetMathMode");
  return f == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : f(handle, mode);
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const void* alpha, const void* A, cudaDataType Atype,
                                         int lda, const void* B, cudaDataType Btype, int ldb,
                                         const void* beta, void* C, cudaDataType Ctype, int ldc,
                                         cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  using Fn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                const void*, const void*, cudaDataType, int, const void*,
                                cudaDataType, int, const void*, void*, cudaDataType, int,
                                cublasComputeType_t, cublasGemmAlgo_t);
  static const auto f = Load<Fn>("cublasGemmEx");
  return f == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED
                      : f(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb,
                          beta, C, Ctype, ldc, computeType, algo);
}

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  static const auto f = Load<decltype(&cublasGetStatusName)>("cublasGetStatusName");
  return f == nullptr ? "CUBLAS_STATUS_NOT_INITIALIZED" : f(status);
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static const auto f = Load<decltype(&cublasGetStatusString)>("cublasGetStatusString");
  return f == nullptr ? "libcublas.so.13 could not be loaded" : f(status);
}

}  // extern "C"
