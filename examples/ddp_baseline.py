#!/usr/bin/python3
"""ddp_baseline.py: the MLP of rumor-peer trained with PyTorch DDP (gloo).

The baseline most users would reach for: torch.nn.parallel.DistributedDataParallel
over the gloo backend (CPU), one process per peer, each on shard `rank` of
Fashion-MNIST, gradients all-reduced every step. It takes rumor-peer's command
line (the options it knows; the others are ignored with a warning), prints the
same final lines and writes the same JSON-lines metrics (start, epoch, done),
so examples/netns-swarm.sh runs it unchanged:

    sudo examples/netns-swarm.sh --bin examples/ddp_baseline.py -- --epochs 2

Rendezvous: peer 0's endpoint (tcp://HOST:PORT from --peers) is the TCPStore.
Needs Debian's python3-torch (apt-get install python3-torch) and numpy.

Same recipe as rumor-peer's defaults: mlp:784-256-256-10 with ReLU, batch 128
per peer, SGD with Nesterov momentum 0.9, lr 0.05, weight decay 5e-4, linear
warm-up over 0.2 epochs then cosine decay to 0.01 x lr, inputs standardized.
"""
import argparse
import gzip
import json
import math
import os
import sys
import time

import numpy as np


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--peers", required=True,
                    help="comma-separated endpoints tcp://HOST:PORT; peer 0's is the rendezvous")
    ap.add_argument("--metrics", default=None)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--model", default="mlp:784-256-256-10")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--warmup-epochs", type=float, default=0.2)
    ap.add_argument("--min-lr-ratio", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--start-timeout", type=float, default=60)
    ap.add_argument("-q", "--quiet", action="store_true")
    ap.add_argument("--insecure", action="store_true",
                    help="accepted as rumor-peer takes it: gloo's traffic is plaintext anyway")
    args, unknown = ap.parse_known_args()
    if unknown:
        print(f"ddp_baseline: ignoring options it does not use: {' '.join(unknown)}",
              file=sys.stderr)
    return args


def read_idx(path):
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            opener = gzip.open if p.endswith(".gz") else open
            with opener(p, "rb") as f:
                data = f.read()
            break
    else:
        raise FileNotFoundError(path)
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    a = parse_args()
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    torch.set_num_threads(max(1, a.threads))
    eps = [e.strip() for e in a.peers.split(",") if e.strip()]
    world, rank = len(eps), a.rank
    if not 0 <= rank < world:
        sys.exit(f"ddp_baseline: --rank {rank} is not in 0..{world - 1}")
    host, port = eps[0].replace("tcp://", "").rsplit(":", 1)
    # gloo picks its interface from the hostname, which in a network
    # namespace may resolve to an address that is not there: use eth0
    if "GLOO_SOCKET_IFNAME" not in os.environ and os.path.exists("/sys/class/net/eth0"):
        os.environ["GLOO_SOCKET_IFNAME"] = "eth0"

    dims = [int(d) for d in a.model.split(":")[1].split("-")] if a.model.startswith("mlp:") else None
    if not dims or len(dims) < 2:
        sys.exit(f"ddp_baseline: only mlp:D0-D1-...-Dn models, not {a.model}")

    t_load = time.time()
    xtr = read_idx(os.path.join(a.data, "train-images-idx3-ubyte")).reshape(-1, 784).astype(np.float32) / 255
    ytr = read_idx(os.path.join(a.data, "train-labels-idx1-ubyte")).astype(np.int64)
    xte = read_idx(os.path.join(a.data, "t10k-images-idx3-ubyte")).reshape(-1, 784).astype(np.float32) / 255
    yte = read_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte")).astype(np.int64)
    mean, std = xtr.mean(), xtr.std()
    xtr = (xtr - mean) / std
    xte = (xte - mean) / std
    perm = np.random.default_rng(a.seed).permutation(len(xtr))
    shard = perm[rank::world]
    per_epoch = (len(xtr) // world) // a.batch     # the same on every rank
    xs, ys = torch.from_numpy(xtr[shard]), torch.from_numpy(ytr[shard])
    xte_t, yte_t = torch.from_numpy(xte), torch.from_numpy(yte)
    load_s = time.time() - t_load

    metrics = open(a.metrics, "w") if a.metrics else None

    def event(**kv):
        if metrics:
            metrics.write(json.dumps(kv, separators=(",", ":")) + "\n")
            metrics.flush()

    dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=rank,
                            world_size=world,
                            timeout=__import__("datetime").timedelta(seconds=max(a.start_timeout, 30)))
    torch.manual_seed(a.seed)          # the same initial model everywhere (DDP broadcasts it anyway)
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(nn.ReLU())
    model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers))
    nparams = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          nesterov=a.momentum > 0, weight_decay=a.weight_decay)
    total = per_epoch * a.epochs
    warm = int(a.warmup_epochs * per_epoch)

    def lr_at(k):
        if k < warm:
            return a.lr * (k + 1) / warm
        t = (k - warm) / max(1, total - warm)
        return a.lr * (a.min_lr_ratio + (1 - a.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))

    def evaluate():
        model.eval()
        with torch.no_grad():
            acc = (model.module(xte_t).argmax(1) == yte_t).float().mean().item()
        model.train()
        return acc

    if not a.quiet:
        print(f"ddp_baseline {rank}/{world}: PyTorch {torch.__version__} DDP over gloo, "
              f"{a.model}, {nparams} parameters ({nparams * 4 / 1e6:.2f} MB); shard of "
              f"{len(shard)} examples (loaded in {load_s:.2f} s), {per_epoch} rounds of batch "
              f"{a.batch} per epoch, {a.epochs} epochs", flush=True)
    event(event="start", rank=rank, peers=world, mode="ddp-gloo", model=a.model,
          params=nparams, rounds=total, ready=world)
    lossf = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(a.seed * 1000 + rank)
    start = time.time()
    k = 0
    acc = 0.0
    for epoch in range(1, a.epochs + 1):
        t_ep = time.time()
        order = torch.randperm(len(xs), generator=g)
        loss_sum = 0.0
        for b in range(per_epoch):
            idx = order[b * a.batch:(b + 1) * a.batch]
            for grp in opt.param_groups:
                grp["lr"] = lr_at(k)
            opt.zero_grad(set_to_none=True)
            loss = lossf(model(xs[idx]), ys[idx])
            loss.backward()                     # DDP all-reduces the gradients here
            opt.step()
            loss_sum += loss.item()
            k += 1
        epoch_s = time.time() - t_ep
        acc = evaluate()
        if not a.quiet:
            print(f"epoch {epoch}/{a.epochs}  train loss {loss_sum / per_epoch:.4f}  "
                  f"test accuracy {100 * acc:.2f}%  {epoch_s:.1f} s", flush=True)
        event(event="epoch", epoch=epoch, round=k, train_loss=loss_sum / per_epoch,
              test_accuracy=acc, consensus=0.0, seconds=time.time() - start,
              epoch_seconds=epoch_s)
    seconds = time.time() - start
    # DDP keeps every replica identical: the local model is the average
    print(f"peer {rank}: local test accuracy {100 * acc:.2f}%")
    print(f"peer {rank}: swarm average test accuracy {100 * acc:.2f}%")
    print(f"peer {rank}: done: {total} rounds in {seconds:.1f} s, "
          f"{total * a.batch / seconds:.0f} examples/s", flush=True)
    event(event="done", rank=rank, local_accuracy=acc, average_accuracy=acc,
          seconds=seconds, rounds=total)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
