#!/usr/bin/env python3
"""PyTorch GPU rival for bench_cuda: GPT-2 training steps (forward, backward,
AdamW) on one GPU in bf16 autocast, the model of torch_gpt_step.py (pre-LN
blocks, causal attention, GELU tanh MLP of 4D, tied output weights, biases,
no dropout).

usage: torch_gpt_cuda.py LAYERS DIM HEADS CTX VOCAB BATCH STEPS [MODE...]

Modes (default: eager_sdpa eager_math compile_sdpa), run in that order so
that a slow torch.compile cannot cost the eager figures:
  eager_sdpa    eager, attention by F.scaled_dot_product_attention(is_causal)
                (flash attention: what nanoGPT and most PyTorch users run)
  eager_math    eager, attention written out (the (B, NH, T, T) scores
                materialized, masked, softmaxed: rumor's own algorithm)
  compile_sdpa  torch.compile of the eager_sdpa module (default mode)
  attn_sdpa     the attention alone: F.scaled_dot_product_attention(is_causal)
                forward and backward on bf16 q, k, v of (BATCH, HEADS, CTX,
                DIM / HEADS), as the GPT calls it (not a default mode)
Each mode prints one JSON line as soon as it is measured:
  {"mode": "eager_sdpa", "tokens_per_s": 123456.7, "step_ms": 12.34,
   "peak_gib": 10.2}
or {"mode": ..., "skipped": "why"}. Exits 77 without torch or a GPU, unless
RUMOR_TORCH_DEVICE=cpu (checking this script on a machine without a GPU:
autocast to bf16 on the CPU; the figures mean nothing).
Tensors float32 with autocast to bf16 for the products, as PyTorch's mixed
precision recipe; AdamW fused where the build has it (the fastest PyTorch
offers), lr 6e-4, weight decay 0.01, betas 0.9/0.999, eps 1e-8 (rumor's)."""
import gc
import json
import math
import os
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("torch not installed", file=sys.stderr)
    sys.exit(77)

DEV = os.environ.get("RUMOR_TORCH_DEVICE", "cuda")
if DEV == "cuda" and not torch.cuda.is_available():
    print("torch %s: no CUDA GPU" % torch.__version__, file=sys.stderr)
    sys.exit(77)
WARMUP = 3  # steps not timed (torch.compile compiles in the first)


class Block(nn.Module):
    def __init__(self, d, h, sdpa):
        super().__init__()
        self.h = h
        self.sdpa = sdpa
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.m_proj = nn.Linear(4 * d, d)

    def attend(self, q, k, v):
        if self.sdpa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        T = q.shape[-2]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        return att.masked_fill(~mask, float("-inf")).softmax(-1) @ v

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = self.attend(q, k, v).transpose(1, 2).reshape(B, T, C)
        x = x + self.c_proj(y)
        return x + self.m_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, d, h, T, V, sdpa):
        super().__init__()
        self.wte = nn.Embedding(V, d)
        self.wpe = nn.Embedding(T, d)
        self.h = nn.ModuleList(Block(d, h, sdpa) for _ in range(L))
        self.ln_f = nn.LayerNorm(d)
        for mod in self.modules():  # GPT-2's initialization, as rumor's
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, std=0.02)
            if isinstance(mod, nn.Linear):
                nn.init.zeros_(mod.bias)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def adamw(params):
    kw = dict(lr=6e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    try:
        return torch.optim.AdamW(params, fused=(DEV == "cuda"), **kw)
    except TypeError:  # a torch without fused AdamW
        return torch.optim.AdamW(params, **kw)


def run_attn(mode, D, H, T, B, steps):
    """SDPA forward + backward alone: its median ms, and the forward's."""
    if not hasattr(F, "scaled_dot_product_attention"):
        return {"mode": mode, "skipped": "torch %s has no scaled_dot_product_attention" %
                torch.__version__}
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D // H, device=DEV, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dy = torch.randn(B, H, T, D // H, device=DEV, dtype=torch.bfloat16)
    both, fwd = [], []
    for s in range(WARMUP + steps):
        sync()
        t0 = time.perf_counter()
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        sync()
        t1 = time.perf_counter()
        y.backward(dy)
        sync()
        if s >= WARMUP:
            both.append(time.perf_counter() - t0)
            fwd.append(t1 - t0)
    both.sort()
    fwd.sort()
    return {"mode": mode, "ms": round(1e3 * both[len(both) // 2], 4),
            "fwd_ms": round(1e3 * fwd[len(fwd) // 2], 4)}


def run(mode, L, D, H, T, V, B, steps):
    if mode == "attn_sdpa":
        return run_attn(mode, D, H, T, B, steps)
    sdpa = mode.endswith("_sdpa")
    if sdpa and not hasattr(F, "scaled_dot_product_attention"):
        return {"mode": mode, "skipped": "torch %s has no scaled_dot_product_attention" %
                torch.__version__}
    if mode.startswith("compile") and not hasattr(torch, "compile"):
        return {"mode": mode, "skipped": "torch %s has no torch.compile" % torch.__version__}
    torch.manual_seed(0)
    model = GPT(L, D, H, T, V, sdpa).to(DEV)
    opt = adamw(list(model.parameters()))
    fwd = torch.compile(model) if mode.startswith("compile") else model
    idx = torch.randint(0, V, (B, T), device=DEV)
    tgt = torch.randint(0, V, (B, T), device=DEV)
    if DEV == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    t_first = time.perf_counter()
    for s in range(WARMUP + steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=DEV, dtype=torch.bfloat16):
            loss = fwd(idx, tgt)
        loss.backward()
        opt.step()
        sync()
        if s >= WARMUP:
            times.append(time.perf_counter() - t0)
        elif s == WARMUP - 1:
            warm_s = time.perf_counter() - t_first
    times.sort()
    med = times[len(times) // 2]
    out = {"mode": mode, "tokens_per_s": round(B * T / med, 1), "step_ms": round(1e3 * med, 3),
           "warmup_s": round(warm_s, 1), "loss": round(float(loss), 4)}
    if DEV == "cuda":
        out["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    del model, opt, fwd, idx, tgt, loss
    if DEV == "cuda":
        torch.cuda.empty_cache()
    return out


def main():
    L, D, H, T, V, B, steps = (int(a) for a in sys.argv[1:8])
    modes = sys.argv[8:] or ["eager_sdpa", "eager_math", "compile_sdpa"]
    print(json.dumps({"torch": torch.__version__, "device": DEV if DEV != "cuda" else
                      torch.cuda.get_device_name(0)}), flush=True)
    for mode in modes:
        try:
            out = run(mode, L, D, H, T, V, B, steps)
        except Exception as e:  # out of memory, a compiler failure: the next mode still runs
            out = {"mode": mode, "skipped": "%s: %s" % (type(e).__name__, str(e)[:200])}
        gc.collect()  # the failed mode's tensors, before the next mode allocates
        if DEV == "cuda":
            torch.cuda.empty_cache()
        print(json.dumps(out), flush=True)


main()
