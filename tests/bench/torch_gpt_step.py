#!/usr/bin/env python3
"""PyTorch CPU rival for bench_gpt: the same GPT-2-style model (pre-LN
blocks, causal attention, GELU tanh MLP of 4D, tied output weights), the
same batch and AdamW, timed per training step at each thread count given.

usage: torch_gpt_step.py LAYERS DIM HEADS CTX VOCAB BATCH STEPS THREADS...
prints one line per thread count: "torch THREADS TOKENS_PER_S"; exits 77
without torch."""
import math
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("torch not installed", file=sys.stderr)
    sys.exit(77)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.m_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.h)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.c_proj(y)
        return x + self.m_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, d, h, T, V):
        super().__init__()
        self.wte = nn.Embedding(V, d)
        self.wpe = nn.Embedding(T, d)
        self.h = nn.ModuleList(Block(d, h) for _ in range(L))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    L, D, H, T, V, B, steps = (int(a) for a in sys.argv[1:8])
    torch.manual_seed(0)
    for threads in (int(a) for a in sys.argv[8:]):
        torch.set_num_threads(threads)
        model = GPT(L, D, H, T, V)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        idx = torch.randint(0, V, (B, T))
        tgt = torch.randint(0, V, (B, T))
        times = []
        for s in range(steps + 3):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = model(idx, tgt)
            loss.backward()
            opt.step()
            if s >= 3:
                times.append(time.perf_counter() - t0)
        times.sort()
        print("torch %d %.1f" % (threads, B * T / times[len(times) // 2]))


main()
