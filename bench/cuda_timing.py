"""CUDA-event timing shared by the issue-7 PyTorch benchmarks."""
import torch


def cuda_ms(fn, warmup, runs):
    """Milliseconds of each of `runs` calls of fn() after `warmup` untimed
    ones, each between two CUDA events on the current stream."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return out
