"""The CIFAR-10 tutorial's way (shared/seeds), rewritten as a baseline to measure against.

Unfolded patches and a Linear projection, attention as explicit matmuls, an MLP
head with a hidden layer, fp32, and per-image PIL transforms in a DataLoader.
Written from the tutorial's description for benchmarking only; not used by vitviz.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms


class PatchEmbedding(nn.Module):
    def __init__(self, img_size, patch_size, in_channels, emb_dim):
        super().__init__()
        self.patch_size = patch_size
        self.num_patches = (img_size // patch_size) ** 2
        self.linear_proj = nn.Linear(patch_size * patch_size * in_channels, emb_dim)

    def forward(self, x):
        b, c, _, _ = x.shape
        p = self.patch_size
        x = x.unfold(2, p, p).unfold(3, p, p)  # (b, c, gh, gw, p, p)
        x = x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)
        return self.linear_proj(x)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, emb_dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, emb_dim // num_heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(emb_dim, emb_dim * 3)
        self.proj = nn.Linear(emb_dim, emb_dim)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        w = (torch.matmul(q, k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return self.proj(torch.matmul(w, v).transpose(1, 2).reshape(b, n, d))


class EncoderLayer(nn.Module):
    def __init__(self, emb_dim, num_heads, mlp_dim, dropout):
        super().__init__()
        self.msa = MultiHeadSelfAttention(emb_dim, num_heads)
        self.mlp = nn.Sequential(
            nn.Linear(emb_dim, mlp_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(mlp_dim, emb_dim),
            nn.Dropout(dropout),
        )
        self.norm1, self.norm2 = nn.LayerNorm(emb_dim), nn.LayerNorm(emb_dim)

    def forward(self, x):
        x = x + self.msa(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TutorialViT(nn.Module):
    def __init__(
        self,
        img_size=32,
        patch_size=4,
        in_channels=3,
        emb_dim=256,
        num_layers=4,
        num_heads=4,
        mlp_dim=128,
        num_classes=10,
        dropout=0.2,
    ):
        super().__init__()
        self.patch_embed = PatchEmbedding(img_size, patch_size, in_channels, emb_dim)
        self.class_token = nn.Parameter(torch.zeros(1, 1, emb_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, emb_dim))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(EncoderLayer(emb_dim, num_heads, mlp_dim, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(emb_dim)
        self.classifier = nn.Sequential(
            nn.Linear(emb_dim, emb_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(emb_dim, num_classes)
        )

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        x = self.dropout(x)
        for layer in self.layers:
            x = layer(x)
        return self.classifier(self.norm(x)[:, 0])


MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


class PILImages(Dataset):
    """Images held as PIL, transformed one at a time, as torchvision's CIFAR10 dataset does."""

    def __init__(self, x_uint8: torch.Tensor, y: torch.Tensor, train: bool):
        self.images = [Image.fromarray(np.ascontiguousarray(a.permute(1, 2, 0).numpy())) for a in x_uint8]
        self.y = y.tolist()
        ops = [transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip()] if train else []
        self.transform = transforms.Compose(ops + [transforms.ToTensor(), transforms.Normalize(MEAN, STD)])

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.transform(self.images[i]), self.y[i]


def loader(x, y, train: bool, batch_size=128, num_workers=2):
    return DataLoader(
        PILImages(x, y, train),
        batch_size=batch_size,
        shuffle=train,
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
    )
