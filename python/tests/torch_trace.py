# torch's DataLoader's draws from the global generator, epoch by epoch: the
# reference test_dataloader.py holds gpufeed.DataLoader to. Importable
# (rng_trace), and a program: a pickled (dataset, seed, DataLoader keywords)
# on stdin, the pickled trace on stdout, so that the reference can run in an
# interpreter without the sanitizer (test_dataloader.torch_reference says why).
import pickle
import sys

import torch


def rng_trace(loader, epochs=3):
    """Per epoch, the targets and torch's generator state after each batch;
    the loop draws as a model's dropout would, between batches."""
    trace = []
    for _ in range(epochs):
        ys, states = [], []
        for _, y in loader:
            ys += y.tolist()
            states.append(torch.get_rng_state())
            torch.rand(3)
        trace.append((ys, states, torch.get_rng_state()))
    return trace


if __name__ == "__main__":
    import torch.utils.data as tud
    dataset, seed, kw = pickle.load(sys.stdin.buffer)
    torch.manual_seed(seed)
    sys.stdout.buffer.write(pickle.dumps(rng_trace(tud.DataLoader(dataset, **kw))))
