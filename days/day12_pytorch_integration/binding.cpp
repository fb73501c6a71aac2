// Day 12: the Python face of the extension (compiled by the host C++ compiler; load_inline
// puts #include <torch/extension.h> first). It checks the tensors, then calls the launchers
// defined in torch_launcher.cu, and binds both into a Python module.
#include <torch/extension.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

at::Tensor bias_gelu_forward(const at::Tensor& x, const at::Tensor& b);
std::vector<at::Tensor> bias_gelu_backward(const at::Tensor& grad_y, const at::Tensor& x,
                                           const at::Tensor& b);

// Everything the kernels assume, checked before any of them runs, in the file the host
// compiler builds.
// "[8, 16]" built with std::to_string. Streaming the sizes (x.sizes() into TORCH_CHECK's
// message, through std::ostream's number formatting) crashed the process on the GPU machine
// when a check failed under pytest (torch 2.11, 2026-11-22): a libstdc++ mismatch between the
// extension and the process, seen in cuda-gdb inside basic_ostream::_M_insert<long>.
static std::string shape_str(const at::Tensor& t) {
    std::string s = "[";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
    return s + "]";
}

static void check_pair(const at::Tensor& x, const at::Tensor& b) {
    TORCH_CHECK(x.is_cuda() && b.is_cuda(), "bias_gelu: x and b must be CUDA tensors");
    TORCH_CHECK(x.device() == b.device(), "bias_gelu: x and b are on different devices");
    TORCH_CHECK(x.scalar_type() == b.scalar_type(), "bias_gelu: x and b differ in dtype (",
                x.scalar_type(), " vs ", b.scalar_type(), ")");
    TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
                "bias_gelu: float32 or float64 only, got ", x.scalar_type());
    TORCH_CHECK(x.dim() >= 1 && b.dim() == 1 && x.size(-1) == b.size(0),
                "bias_gelu: b must be 1-D with x.size(-1) elements; x is ", shape_str(x), ", b is ",
                shape_str(b));
    TORCH_CHECK(x.is_contiguous() && b.is_contiguous(),
                "bias_gelu: x and b must be contiguous (call .contiguous() first)");
    TORCH_CHECK(x.numel() / std::max<int64_t>(b.size(0), 1) <= INT_MAX && b.size(0) <= INT_MAX,
                "bias_gelu: at most 2^31 - 1 rows and columns");
}

static at::Tensor forward(const at::Tensor& x, const at::Tensor& b) {
    check_pair(x, b);
    return bias_gelu_forward(x, b);
}

static std::vector<at::Tensor> backward(const at::Tensor& grad_y, const at::Tensor& x,
                                        const at::Tensor& b) {
    check_pair(x, b);
    TORCH_CHECK(grad_y.sizes() == x.sizes() && grad_y.scalar_type() == x.scalar_type() &&
                    grad_y.device() == x.device(),
                "bias_gelu_backward: grad_y must match x in shape, dtype and device");
    TORCH_CHECK(grad_y.is_contiguous(), "bias_gelu_backward: grad_y must be contiguous");
    return bias_gelu_backward(grad_y, x, b);
}

// A failed TORCH_CHECK throws c10::Error (a std::exception); pybind11 turns it into a Python
// RuntimeError carrying the message.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "Day 12: fused bias + GELU (tanh form) built from days/day12_pytorch_integration/kernel.cu";
    m.def("forward", &forward,
          "y = gelu(x + b) on torch's current stream (x: [..., C], b: [C]; float32/float64, CUDA, "
          "contiguous)",
          py::arg("x"), py::arg("b"));
    m.def("backward", &backward, "(grad_x, grad_b) of y = gelu(x + b) given grad_y",
          py::arg("grad_y"), py::arg("x"), py::arg("b"));
}
