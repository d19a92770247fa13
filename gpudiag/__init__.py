"""gpudiag: is TensorFlow really using my GPUs, and if not, why?"""

__version__ = "0.1.0"
