"""The shared harness of 100 days of CUDA: device, build, checks, timing, reports, results.

Importing it needs only numpy: pycuda is imported lazily, when a GPU is actually used.
"""
