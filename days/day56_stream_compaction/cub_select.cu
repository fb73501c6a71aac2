// Day 56's library baseline: CUB's own select, partition and unique (cub::DeviceSelect::If,
// cub::DevicePartition::If, cub::DeviceSelect::Unique), the single-pass look-back kernels the
// day is measured against. CuPy does not expose them (its boolean indexing is a scan and a
// scatter, two passes), so driver.py builds this file into a shared library with nvcc on first
// use and calls it through ctypes on pycuda's device pointers, on the legacy default stream
// (the stream the harness times), in the primary context pycuda shares with the runtime.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -shared -Xcompiler -fPIC cub_select.cu \
//                        -o libday56_cub.so
//
// Every function: call once with temp == nullptr to get the temporary storage it needs in
// *temp_bytes, then with that much device memory. Returns the cudaError_t (0 = success).
#include <cstddef>
#include <cub/device/device_partition.cuh>
#include <cub/device/device_select.cuh>
#include <cuda_runtime.h>

namespace {
struct GreaterThan {  // the day's predicate: x > t (NaN is rejected)
    float t;
    __host__ __device__ __forceinline__ bool operator()(const float& v) const { return v > t; }
};
}  // namespace

extern "C" {

int day56_cub_select(void* temp, size_t* temp_bytes, const float* x, float* y, int* count,
                     long long n, float t) {
    return (int)cub::DeviceSelect::If(temp, *temp_bytes, x, y, count, n, GreaterThan{t},
                                      (cudaStream_t)0);
}

int day56_cub_partition(void* temp, size_t* temp_bytes, const float* x, float* y, int* count,
                        long long n, float t) {
    return (int)cub::DevicePartition::If(temp, *temp_bytes, x, y, count, n, GreaterThan{t},
                                         (cudaStream_t)0);
}

int day56_cub_unique(void* temp, size_t* temp_bytes, const float* x, float* y, int* count,
                     long long n) {
    return (int)cub::DeviceSelect::Unique(temp, *temp_bytes, x, y, count, n, (cudaStream_t)0);
}

int day56_cub_version() { return CUB_VERSION; }
}
