"""Small synthetic data sets for fast tests."""
import torch

from vitviz.data import CIFAR10_CLASSES, Dataset, Split


def synthetic_cifar(n_train=256, n_val=64, n_test=64, seed=0) -> Dataset:
    """Images whose class is readable from a coloured square's position: learnable in a few steps."""
    g = torch.Generator().manual_seed(seed)

    def make(n):
        y = torch.randint(0, 10, (n,), generator=g)
        x = torch.randint(0, 60, (n, 3, 32, 32), generator=g, dtype=torch.uint8)
        for i, c in enumerate(y.tolist()):
            r, col = divmod(c, 4)
            x[i, c % 3, r * 8:(r + 1) * 8, col * 8:(col + 1) * 8] = 250
        return Split(x, y)

    return Dataset("cifar10", make(n_train), make(n_val), make(n_test), list(CIFAR10_CLASSES),
                   (0.5, 0.5, 0.5), (0.25, 0.25, 0.25), True, "synthetic")
