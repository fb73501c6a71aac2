// Day 12: the Python face of the extension (compiled by the host C++ compiler; load_inline
// puts #include <torch/extension.h> first). The two functions are defined in
// torch_launcher.cu; this file only declares them and binds them into a Python module.
// A failed TORCH_CHECK throws c10::Error (a std::exception); pybind11 turns it into a Python
// RuntimeError carrying the message. (Wrapping the functions in torch::wrap_pybind_function
// crashed the process on a failed check with torch 2.11 on the GPU machine, 2026-11-22.)
#include <torch/extension.h>

#include <vector>

at::Tensor bias_gelu_forward(const at::Tensor& x, const at::Tensor& b);
std::vector<at::Tensor> bias_gelu_backward(const at::Tensor& grad_y, const at::Tensor& x,
                                           const at::Tensor& b);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "Day 12: fused bias + GELU (tanh form) built from days/day12_pytorch_integration/kernel.cu";
    m.def("forward", &bias_gelu_forward,
          "y = gelu(x + b) on torch's current stream (x: [..., C], b: [C]; float32/float64, CUDA, "
          "contiguous)",
          py::arg("x"), py::arg("b"));
    m.def("backward", &bias_gelu_backward,
          "(grad_x, grad_b) of y = gelu(x + b) given grad_y", py::arg("grad_y"), py::arg("x"),
          py::arg("b"));
}
