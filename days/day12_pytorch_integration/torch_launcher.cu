// Day 12: the torch side of the extension, compiled by nvcc right after kernel.cu (load_inline
// concatenates the two into one .cu file, after #include <torch/types.h>), so the kernels
// above are in scope. It does not compile on its own: it is the second half of that file.
//
// For each op (binding.cpp has already checked the tensors): allocate the outputs
// with torch, pick the float or double kernels (AT_DISPATCH_FLOATING_TYPES), pick the 16-byte
// or the scalar path, and launch on torch's *current* stream, so the kernel is ordered with
// the torch work around it (torch.cuda.stream(s) contexts included).
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace day12_torch {

// The kernels of kernel.cu by scalar type (function pointers to __global__ functions).
template <typename T> struct Kernels;
template <> struct Kernels<float> {
    static constexpr auto fwd_vec = bias_gelu_v2_vec_f32;
    static constexpr auto fwd_scalar = bias_gelu_v2_scalar_f32;
    static constexpr auto bwd_vec = bias_gelu_bwd_vec_f32;
    static constexpr auto bwd_scalar = bias_gelu_bwd_scalar_f32;
    static constexpr auto bias_grad = bias_gelu_bias_grad_f32;
};
template <> struct Kernels<double> {
    static constexpr auto fwd_vec = bias_gelu_v2_vec_f64;
    static constexpr auto fwd_scalar = bias_gelu_v2_scalar_f64;
    static constexpr auto bwd_vec = bias_gelu_bwd_vec_f64;
    static constexpr auto bwd_scalar = bias_gelu_bwd_scalar_f64;
    static constexpr auto bias_grad = bias_gelu_bias_grad_f64;
};

// Elements per access: 16 bytes' worth when every row starts 16-byte aligned, else 1.
template <typename T>
int vec_for(std::initializer_list<const void*> ptrs, int cols) {
    constexpr int kVec = 16 / sizeof(T);
    bool aligned = true;
    for (const void* p : ptrs) aligned = aligned && reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
    return (cols % kVec == 0 && aligned) ? kVec : 1;
}

// The v2 / backward launch shape; driver.py's tiling() is the same arithmetic in Python.
// 32-256 threads across the columns, the rest of 256 down the rows; at most one full wave.
struct Tiling {
    dim3 grid, block;
};

Tiling tiling(int rows, int cols, int vec, int wave) {
    const int npack = cols / vec;
    int tx = 32;
    while (tx < npack && tx < 256) tx *= 2;
    const int ty = 256 / tx;
    const int gx = (npack + tx - 1) / tx;
    const int gy = std::max(1, std::min(std::min((rows + ty - 1) / ty, wave / gx), 65535));
    return {dim3(gx, gy, 1), dim3(tx, ty, 1)};
}

// One full wave of `kernel`: SMs x the blocks of 256 threads that fit on one SM at once
// (registers and shared memory decide). Asked once per kernel, device and shared-memory size.
template <typename Kernel>
int wave_of(Kernel kernel, int device, size_t smem) {
    static std::mutex mutex;
    static std::map<std::tuple<const void*, int, size_t>, int> cache;
    const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), device, smem);
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    int sms = 0, per_sm = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, smem));
    return cache[key] = sms * std::max(per_sm, 1);
}

}  // namespace day12_torch

at::Tensor bias_gelu_forward(const at::Tensor& x, const at::Tensor& b) {
    using namespace day12_torch;  // binding.cpp has checked x and b
    at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
    if (x.numel() == 0) return y;
    const int cols = static_cast<int>(b.size(0));
    const int rows = static_cast<int>(x.numel() / cols);
    const c10::cuda::CUDAGuard guard(x.device());            // launch on x's GPU
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();  // and on torch's stream
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "bias_gelu_forward", [&] {
        const scalar_t* xp = x.data_ptr<scalar_t>();
        const scalar_t* bp = b.data_ptr<scalar_t>();
        scalar_t* yp = y.data_ptr<scalar_t>();
        const int vec = vec_for<scalar_t>({xp, bp, yp}, cols);
        auto kernel = vec > 1 ? Kernels<scalar_t>::fwd_vec : Kernels<scalar_t>::fwd_scalar;
        const Tiling t = tiling(rows, cols, vec, wave_of(kernel, x.get_device(), 0));
        kernel<<<t.grid, t.block, 0, stream>>>(xp, bp, yp, rows, cols);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return y;
}

std::vector<at::Tensor> bias_gelu_backward(const at::Tensor& grad_y, const at::Tensor& x,
                                           const at::Tensor& b) {
    using namespace day12_torch;  // binding.cpp has checked grad_y, x and b
    at::Tensor gx = at::empty_like(x, at::MemoryFormat::Contiguous);
    at::Tensor gb = at::empty_like(b, at::MemoryFormat::Contiguous);
    if (x.numel() == 0) return {gx, gb.zero_()};
    const int cols = static_cast<int>(b.size(0));
    const int rows = static_cast<int>(x.numel() / cols);
    const c10::cuda::CUDAGuard guard(x.device());
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "bias_gelu_backward", [&] {
        const scalar_t* gyp = grad_y.data_ptr<scalar_t>();
        const scalar_t* xp = x.data_ptr<scalar_t>();
        const scalar_t* bp = b.data_ptr<scalar_t>();
        scalar_t* gxp = gx.data_ptr<scalar_t>();
        const int vec = vec_for<scalar_t>({gyp, xp, bp, gxp}, cols);
        auto kernel = vec > 1 ? Kernels<scalar_t>::bwd_vec : Kernels<scalar_t>::bwd_scalar;
        const size_t smem = 256 * vec * sizeof(scalar_t);  // one pack of column sums per thread
        const Tiling t = tiling(rows, cols, vec, wave_of(kernel, x.get_device(), smem));
        // one partial row of column sums per block-row; torch's caching allocator makes this
        // temporary cheap, and it is 16-byte aligned like every fresh torch allocation
        at::Tensor partial = at::empty({static_cast<int64_t>(t.grid.y), cols}, x.options());
        kernel<<<t.grid, t.block, smem, stream>>>(gyp, xp, bp, gxp, partial.data_ptr<scalar_t>(),
                                                  rows, cols);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        Kernels<scalar_t>::bias_grad<<<(cols + 255) / 256, 256, 0, stream>>>(
            partial.data_ptr<scalar_t>(), gb.data_ptr<scalar_t>(), static_cast<int>(t.grid.y), cols);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return {gx, gb};
}
