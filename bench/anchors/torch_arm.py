# PyTorch arm of the seam benchmark: eager vs torch.cuda.CUDAGraph replay of
# the same workloads as the seam and raw-driver arms, printing the bench CSV.
#
#   python3 torch_arm.py BUDGET_MS NS HIDDENS LAYERS [ELEMS [ROUNDS]]
#
# NS, HIDDENS, LAYERS and ELEMS are comma-separated lists. Workloads:
#   chain:  N dependent one-kernel in-place updates x = 0.999 * x + 0.001
#           (torch.add(c, x, alpha=0.999, out=x): one elementwise kernel each);
#   decode: L layers of rms_norm -> mm (1xH . HxH, f32, no TF32) -> silu -> add.
# Timing: host clock (perf_counter_ns) around the submit and around submit +
# torch.cuda.synchronize(); warm-up first; median and p99 over the repetitions.
# Then `static.copy_(fresh)` + replay against a plain replay, interleaved in
# rounds (updates()).
import math
import sys
import time

import torch

ARM = "torch"
HEADER = "arm,device,mode,workload,elems,hidden,layers,nodes,metric,median_us,p99_us,reps"


def stats(v):
    v = sorted(v)
    n = len(v)
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    p99 = v[max(0, math.ceil(0.99 * n) - 1)]
    return med, p99, n


def row(mode, workload, elems, hidden, layers, nodes, metric, samples):
    med, p99, n = stats(samples)
    print(f"{ARM},cuda,{mode},{workload},{elems},{hidden},{layers},{nodes},{metric},{med:.4f},{p99:.4f},{n}", flush=True)


def now():
    return time.perf_counter_ns() / 1000.0


def reps_for(budget_us, est_us, lo=15, hi=3000):
    return int(min(hi, max(lo, budget_us / max(est_us, 0.01))))


def measure(body, meta, budget_us):
    """Eager, graph one-time costs, graph replay, and pipelined runs of `body`."""
    sync = torch.cuda.synchronize
    # eager
    est = float("inf")
    for _ in range(3):
        a = now(); body(); sync(); est = min(est, now() - a)
    reps = reps_for(budget_us, est)
    sub, e2e = [], []
    for _ in range(reps):
        a = now(); body(); b = now(); sync(); c = now()
        sub.append(b - a); e2e.append(c - a)
    row("eager", *meta, "submit_us", sub)
    row("eager", *meta, "e2e_us", e2e)
    pipe = pipelined(body, est, budget_us)
    row("eager", *meta, "pipe_us", pipe)
    # graph: one-time costs (torch instantiates inside capture_end, so
    # capture_us includes the instantiate)
    caps, firsts = [], []
    g = None
    for _ in range(3):
        g = torch.cuda.CUDAGraph()
        sync()
        a = now()
        with torch.cuda.graph(g):
            body()
        b = now(); g.replay(); sync(); c = now()
        caps.append(b - a); firsts.append(c - b)
    row("graph", *meta, "capture_us", caps)
    row("graph", *meta, "first_replay_us", firsts)
    est = float("inf")
    for _ in range(3):
        a = now(); g.replay(); sync(); est = min(est, now() - a)
    reps = reps_for(budget_us, est)
    sub, e2e = [], []
    for _ in range(reps):
        a = now(); g.replay(); b = now(); sync(); c = now()
        sub.append(b - a); e2e.append(c - a)
    row("graph", *meta, "submit_us", sub)
    row("graph", *meta, "e2e_us", e2e)
    row("graph", *meta, "pipe_us", pipelined(g.replay, est, budget_us))


def updates(body, static, fresh, meta, budget_us, rounds):
    """PyTorch's pattern for new inputs against a plain replay, interleaved
    (replay, copyin, replay, ...; `rounds` rounds of k iterations), each
    iteration queued and waited for on its own: `replay` is graph.replay();
    `copyin` is static.copy_(fresh) then graph.replay(). Rows as the seam
    arm's: update_us / submit_us / e2e_us, and the per-round ratio of medians
    (x_replay, with its range over the rounds)."""
    sync = torch.cuda.synchronize
    g = torch.cuda.CUDAGraph()
    sync()
    with torch.cuda.graph(g):
        body()

    def one(mode):
        a = now()
        if mode == "copyin":
            static.copy_(fresh)
        u = now() - a
        g.replay()
        b = now()
        sync()
        return u, b - a, now() - a

    modes = ["replay", "copyin"]
    est = 0.0
    for mode in modes:
        est += min(one(mode)[2] for _ in range(2))
    rounds = max(rounds, 1)
    k = int(min(200, max(3, len(modes) * budget_us / rounds / max(est, 0.01))))
    samples = {m: ([], [], []) for m in modes}
    med = {m: [] for m in modes}
    for _ in range(rounds):
        this = {m: [] for m in modes}
        for _ in range(k):
            for mode in modes:
                u, sub, e2e = one(mode)
                for lst, v in zip(samples[mode], (u, sub, e2e)):
                    lst.append(v)
                this[mode].append(e2e)
        for mode in modes:
            med[mode].append(stats(this[mode])[0])
    for mode in modes:
        u, sub, e2e = samples[mode]
        if mode != "replay":
            row(mode, *meta, "update_us", u)
        row(mode, *meta, "submit_us", sub)
        row(mode, *meta, "e2e_us", e2e)
    ratios = [a / b for a, b in zip(med["copyin"], med["replay"])]
    row("copyin", *meta, "x_replay", ratios)
    wl, elems, hidden, layers, nodes = meta
    print(f"{ARM},cuda,copyin,{wl},{elems},{hidden},{layers},{nodes},x_replay_range,"
          f"{min(ratios):.4f},{max(ratios):.4f},{len(ratios)}", flush=True)


def pipelined(step, est, budget_us):
    per = 20 if est < 1000 else 5
    batches = int(min(50, max(3, budget_us / max(est * per, 0.01))))
    v = []
    for _ in range(batches):
        torch.cuda.synchronize()
        a = now()
        for _ in range(per):
            step()
        torch.cuda.synchronize()
        v.append((now() - a) / per)
    return v


def main():
    budget_us = float(sys.argv[1]) * 1000.0
    ns = [int(s) for s in sys.argv[2].split(",") if s]
    hiddens = [int(s) for s in sys.argv[3].split(",") if s]
    layers = [int(s) for s in sys.argv[4].split(",") if s]
    elems_list = [int(s) for s in (sys.argv[5] if len(sys.argv) > 5 else "1,1048576").split(",") if s]
    rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 15
    torch.backends.cuda.matmul.allow_tf32 = False
    print(HEADER, flush=True)
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(1)
    for elems in elems_list:
        x = torch.rand(elems, device="cuda", generator=gen) + 0.5
        c = torch.full((), 0.001, device="cuda")
        fresh = torch.rand(elems, device="cuda", generator=gen) + 0.5
        for n in ns:
            def body(n=n):
                for _ in range(n):
                    torch.add(c, x, alpha=0.999, out=x)
            measure(body, ("chain", elems, 0, 0, n), budget_us)
            updates(body, x, fresh, ("chain", elems, 0, 0, n), budget_us, rounds)
    for h in hiddens:
        lmax = max(layers)
        ws = [torch.randn(h, h, device="cuda", generator=gen) / math.sqrt(h) for _ in range(lmax)]
        wn = torch.rand(h, device="cuda", generator=gen) + 0.5
        x = torch.randn(1, h, device="cuda", generator=gen)
        t2 = torch.empty(1, h, device="cuda")
        fresh = torch.randn(1, h, device="cuda", generator=gen)
        for nl in layers:
            def body(nl=nl):
                for i in range(nl):
                    t1 = torch.nn.functional.rms_norm(x, (h,), wn, 1e-5)
                    torch.mm(t1, ws[i], out=t2)
                    torch.nn.functional.silu(t2, inplace=True)
                    x.add_(t2)
            measure(body, ("decode", h, h, nl, 4 * nl), budget_us)
            updates(body, x, fresh, ("decode", h, h, nl, 4 * nl), budget_us, rounds)
        del ws
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
