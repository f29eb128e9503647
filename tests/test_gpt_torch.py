#!/usr/bin/env python3
"""PyTorch as an independent reference for rumor's GPT.

usage: test_gpt_torch.py DIR   (DIR written by tests/gpt_ref)

A GPT-2 written here in plain PyTorch, in float64, reads rumor's checkpoint
(parsed by hand: 8-byte header length, JSON header, raw float32 data), runs
the same batch and compares: the logits of every position to 1e-5 (relative
to the largest; rumor's are the logs of its probabilities, up to a constant
per row), the loss to 1e-5, every gradient tensor to 1e-4 (relative, in
norm), and the parameters after the same AdamW steps to 1e-4. If
transformers is installed, GPT2LMHeadModel loads rumor's Hugging Face export
and must give rumor's logits to 1e-4 and its loss. Exit 0 pass, 1 fail, 77 without torch."""
import json
import math
import struct
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch is not installed (apt-get install python3-torch): skipped")
    sys.exit(77)

d = sys.argv[1]
ref = json.load(open(d + "/ref.json"))
spec = dict(kv.split("=") for kv in ref["spec"][4:].split(","))
L, D, H, T, V = (int(spec[k]) for k in ("layers", "dim", "heads", "ctx", "vocab"))
B = ref["B"]

raw = open(d + "/init.safetensors", "rb").read()
(hlen,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + hlen])
data = raw[8 + hlen:]
names = [k for k in header if k != "__metadata__"]
names.sort(key=lambda k: header[k]["data_offsets"][0])
params = {}
flat_len = 0
for k in names:
    e = header[k]
    assert e["dtype"] == "F32", k
    a, b = e["data_offsets"]
    n = (b - a) // 4
    t = torch.tensor(struct.unpack("<%df" % n, data[a:b]), dtype=torch.float64)
    params[k] = t.reshape(e["shape"]).clone().requires_grad_(True)
    flat_len = max(flat_len, b // 4)
assert "lm_head.weight" not in params  # tied to the token embedding

tok = torch.tensor(ref["tokens"]).reshape(B, T)
tgt = torch.tensor(ref["targets"]).reshape(B, T)


def ln(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def logits_of(p):
    x = p["transformer.wte.weight"][tok] + p["transformer.wpe.weight"][:T]
    hs = D // H
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(L):
        q = lambda s: p["transformer.h.%d.%s" % (i, s)]
        qkv = ln(x, q("ln_1.weight"), q("ln_1.bias")) @ q("attn.c_attn.weight") + q("attn.c_attn.bias")
        qq, kk, vv = qkv.split(D, dim=2)
        qq, kk, vv = (t.view(B, T, H, hs).transpose(1, 2) for t in (qq, kk, vv))
        att = (qq @ kk.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ vv).transpose(1, 2).reshape(B, T, D)
        x = x + y @ q("attn.c_proj.weight") + q("attn.c_proj.bias")
        h = ln(x, q("ln_2.weight"), q("ln_2.bias")) @ q("mlp.c_fc.weight") + q("mlp.c_fc.bias")
        h = F.gelu(h, approximate="tanh")
        x = x + h @ q("mlp.c_proj.weight") + q("mlp.c_proj.bias")
    x = ln(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"])
    return x @ p["transformer.wte.weight"].t()


def loss_of(p):
    return F.cross_entropy(logits_of(p).reshape(-1, V), tgt.reshape(-1))


def flat(path):
    b = open(path, "rb").read()
    return torch.tensor(struct.unpack("<%df" % (len(b) // 4), b), dtype=torch.float64)


failures = 0
# rumor's next-token probabilities of the initial model (gpt_ref): their logs
# are its logits up to a constant per row
rumor_logp = flat(d + "/probs.f32").reshape(B, T, V).log()


def logits_error(logits):
    """max |rumor's logits - logits| over every position, both centred on
    their row means, relative to the largest centred logit."""
    mine = rumor_logp - rumor_logp.mean(-1, keepdim=True)
    theirs = logits - logits.mean(-1, keepdim=True)
    return ((mine - theirs).abs().max() / theirs.abs().max().clamp_min(1e-30)).item()



def check(ok, msg):
    global failures
    print(("ok   " if ok else "FAIL ") + msg)
    failures += 0 if ok else 1


with torch.no_grad():
    e = logits_error(logits_of(params))
check(e < 1e-5, "logits of every position: rumor within %.2e of torch (relative to the largest)"
      % e)
loss = loss_of(params)
loss.backward()
rel = abs(loss.item() - ref["loss"]) / abs(loss.item())
check(rel < 1e-5, "loss: torch %.9f, rumor %.9f, relative %.2e" % (loss.item(), ref["loss"], rel))
g = flat(d + "/grads.f32")
check(g.numel() == flat_len, "gradient length %d, the checkpoint holds %d" % (g.numel(), flat_len))
worst, worst_name = 0.0, ""
for k in names:
    a, b = (o // 4 for o in header[k]["data_offsets"])
    mine = g[a:b].reshape(params[k].shape)
    e = ((mine - params[k].grad).norm() / params[k].grad.norm().clamp_min(1e-30)).item()
    if e > worst:
        worst, worst_name = e, k
check(worst < 1e-4, "gradients: worst tensor %s, relative %.2e" % (worst_name, worst))

opt = torch.optim.AdamW(params.values(), lr=ref["lr"], betas=(ref["beta1"], ref["beta2"]),
                        eps=ref["eps"], weight_decay=ref["weight_decay"])
losses = []
for k in range(len(ref["losses"])):
    opt.zero_grad()
    l = loss_of(params)
    losses.append(l.item())
    l.backward()
    opt.step()
lrel = max(abs(a - b) / abs(a) for a, b in zip(losses, ref["losses"]))
check(lrel < 1e-4, "AdamW: losses of %d steps agree to %.2e" % (len(losses), lrel))
after = flat(d + "/after.f32")
worst, worst_name = 0.0, ""
for k in names:
    a, b = (o // 4 for o in header[k]["data_offsets"])
    mine = after[a:b].reshape(params[k].shape)
    e = ((mine - params[k].detach()).norm() / params[k].detach().norm().clamp_min(1e-30)).item()
    if e > worst:
        worst, worst_name = e, k
check(worst < 1e-4, "AdamW: parameters after %d steps, worst tensor %s, relative %.2e"
      % (len(losses), worst_name, worst))

try:
    from transformers import GPT2LMHeadModel
except ImportError:
    print("transformers: not installed, Hugging Face export not loaded")
else:
    hf = GPT2LMHeadModel.from_pretrained(d + "/hf").double().eval()
    with torch.no_grad():
        out = hf(tok, labels=tok)  # only the logits are used below
        logits = out.logits
        hl = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1)).item()
    check(abs(hl - ref["loss"]) / hl < 1e-4,
          "transformers GPT2LMHeadModel on the export: loss %.9f, rumor %.9f" % (hl, ref["loss"]))
    e = logits_error(logits)
    check(e < 1e-4, "transformers GPT2LMHeadModel on the export: logits of every position "
          "within %.2e of rumor's (relative to the largest)" % e)

sys.exit(1 if failures else 0)
