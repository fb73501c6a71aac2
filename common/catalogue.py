"""The project's own list of the 100 days: number, folder slug, short title and arc.

This is the plan of record inside the repository (progress.md and run_day.py read it);
the README of each day is the tutorial itself.
"""
from __future__ import annotations

from typing import NamedTuple


class Day(NamedTuple):
    number: int
    slug: str
    title: str
    arc: str

    @property
    def folder(self) -> str:
        return f"day{self.number:02d}_{self.slug}"


# The arcs of ../shared/CURRICULUM.md: number -> (title, first day, last day)
ARCS = {
    1: ("First kernels", 1, 14),
    2: ("The first network and its gradients", 15, 20),
    3: ("Memory and the machine", 21, 30),
    4: ("Beyond dense math", 31, 40),
    5: ("Tensor cores and Hopper", 41, 50),
    6: ("The runtime", 51, 60),
    7: ("Training from scratch", 61, 70),
    8: ("Transformer kernels", 71, 80),
    9: ("Models and scale-out", 81, 90),
    10: ("Domains, compilers, the final project", 91, 100),
}


def arc_of(n: int) -> int:
    return next(a for a, (_, lo, hi) in ARCS.items() if lo <= n <= hi)


_ROWS = """
1 hello_cuda Device query, measured copy bandwidth, hello from threads
2 vector_add Vector add: indexing, grid-stride loops, float4
3 matrix_add Matrix add: 2D grids vs flattened 1D
4 simple_softmax Naive row softmax and why the max matters
5 shared_softmax Block-per-row softmax: shared memory, shuffles, online, vectorized
6 pycuda_roll_call Python-CUDA integration and launch overhead
7 naive_matmul Naive matmul: one thread per output
8 tiled_matmul Shared-memory tiled matmul
9 layer_norm LayerNorm forward: the llm.c ladder
10 elementwise_ops Fused elementwise ops: ReLU, GELU, bias
11 conv1d 1D convolution with halos and constant memory
12 pytorch_integration Custom CUDA kernels in PyTorch
13 color_to_gray RGB to grayscale
14 reduce_sum The parallel reduction ladder
15 fa2_forward Fused affine layer forward: XW+b, softmax, cross-entropy
16 atomic_add_ops Atomics: histograms and privatization
17 prefix_sum Scans: Hillis-Steele, Blelloch, decoupled look-back
18 fused_backward_prep QKV permute and its inverse in one pass
19 softmax_backward Softmax backward and fused softmax+CE gradient
20 fa2_backward Fused affine layer backward and chunked cross-entropy
21 transpose_matrix Matrix transpose without bank conflicts
22 shared_mem_tricks Bank conflicts made visible
23 warp_shuffle Warp-level primitives
24 persistent_threads Persistent kernels and work queues
25 cublas_integration cuBLAS from Python vs the hand SGEMM ladder
26 flash_attention_forward FlashAttention-2 forward on CUDA cores
27 flash_attention_backward FlashAttention-2 backward
28 multi_head_attention Multi-head attention
29 batched_matmul Batched GEMM
30 gpt2_style_ops GPT-2 MLP with fused epilogue
31 conv2d_tiled 2D convolution, tiled
32 vision_transformer_forward ViT forward
33 ddpm_kernel Diffusion step with Philox noise
34 image_augmentation Batched crop, flip, color jitter
35 fused_layernorm_backward LayerNorm backward in one kernel
36 spmv_ell_coo Sparse matrix-vector: ELL, COO, CSR
37 spmv_hybrid Hybrid ELL + COO SpMV
38 merge_sort Merge path and merge sort
39 quantization_ops int8 quantization and dp4a GEMM
40 moe_kernel Mixture of experts: gating, dispatch, combine
41 wmma_hgemm Tensor cores through WMMA
42 mma_ptx_gemm mma.sync and ldmatrix in PTX
43 async_copy_pipeline cp.async multi-stage pipelines
44 tma_bulk_copy Hopper TMA bulk tensor copies
45 wgmma_gemm Hopper warpgroup MMA GEMM
46 fp8_gemm FP8 GEMM with per-tensor scales
47 int8_tensor_core_gemm int8 tensor-core GEMM
48 split_k_stream_k Split-K and Stream-K
49 gemm_epilogue_fusion GEMM epilogue fusion
50 gemv_decode Batch-1 GEMV for decoding
51 streams_overlap Streams, events and copy/compute overlap
52 cuda_graphs CUDA graph capture and replay
53 memory_pool A caching allocator
54 cooperative_groups Grid sync, clusters, distributed shared memory
55 radix_sort LSD radix sort
56 stream_compaction Select, partition, unique
57 topk_argmax Row argmax and top-k
58 curand_init cuRAND, Philox and weight initialization
59 dropout Fused dropout with counter-based RNG
60 implicit_gemm_conv Implicit-GEMM convolution on tensor cores
61 conv2d_backward Conv2d gradients
62 pooling Max and average pooling
63 batch_norm BatchNorm forward and backward
64 activations_zoo Activation functions forward and backward
65 loss_functions Loss functions forward and backward
66 adamw Fused AdamW
67 linear_autograd Linear layer and a small autograd
68 xor_mlp Training an MLP on XOR
69 sales_regression Sales regression on a synthetic TSV
70 mnist_cnn A CNN on MNIST
71 embedding Token and position embeddings
72 rms_norm RMSNorm forward and backward
73 fused_residual_layernorm Residual add fused with LayerNorm
74 rotary_embedding Rotary position embeddings
75 flash_attention_tc FlashAttention on tensor cores
76 flash_attention_tc_backward FlashAttention backward on tensor cores
77 gqa_sliding_window GQA, MQA and sliding-window attention
78 kv_cache_decode Paged KV cache and flash-decoding
79 mixed_precision_training Mixed-precision training
80 fused_classifier Fused LM head and chunked cross-entropy
81 multi_gpu_p2p Peer access and peer copies
82 nccl_allreduce NCCL all-reduce vs a hand ring
83 data_parallel Data-parallel training
84 tensor_parallel Tensor-parallel linear layers
85 moe_grouped_gemm MoE grouped GEMM
86 gpt2_layer_backward GPT-2 layer backward
87 char_transformer Character Transformer on Tiny Shakespeare
88 serialization Saving and loading weights
89 autotuning Kernel autotuning with a cache
90 full_transformer_block Full Transformer block forward and backward
91 stft_audio STFT and mel filterbank
92 ctc_loss CTC loss
93 point_cloud_knn Point-cloud k-nearest neighbours
94 ray_marching SDF ray marching
95 fusion_compiler A small fusion compiler
96 nsight_profiling Profiling and the roofline
97 int4_weight_only_gemv int4 weight-only GEMV
98 persistent_megakernel A persistent megakernel
99 generation_loop Sampling and the decode loop
100 final_project End-to-end inference
"""


def _build() -> dict[int, Day]:
    days = {}
    for line in _ROWS.strip().splitlines():
        num, slug, title = line.split(" ", 2)
        n = int(num)
        days[n] = Day(n, slug, title, ARCS[arc_of(n)][0])
    assert sorted(days) == list(range(1, 101)), "the catalogue must hold days 1..100"
    return days


DAYS: dict[int, Day] = _build()
