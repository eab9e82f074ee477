"""The CUDA backend: ``backend`` (a local NVIDIA GPU, asked through nvidia-smi) and ``target`` (``cuda:<capability>``
compile targets, checked against Triton's bundled ptxas)."""
