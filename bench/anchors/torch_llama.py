# PyTorch arm of `seam-llama bench`: the same Llama-architecture model (a
# llama2.c checkpoint, or a known shape with random weights), greedy from
# BOS, f32 with TF32 off, a static KV cache of `tokens` positions.
#
#   python3 torch_llama.py (--model M | --shape S) [--tokens N] [--rounds R]
#                          [--reference REF] [--csv FILE]
#
# Two modes, timed in alternating rounds after one untimed round of each:
#   eager: the step launched op by op, the token read back (.item()) each step;
#   graph: the step captured once as a torch.cuda.CUDAGraph with the token and
#          position in device tensors (the graph also writes the next token
#          and advances the position), replayed once per token, the token
#          read back each step.
# Prints one line per mode and appends one CSV row per round in the columns
# of seam-llama bench (update/submit/read are not split here: 0).
import argparse
import math
import struct
import time

import torch

BOS = 1
SHAPES = {
    "smollm2-135m": dict(dim=576, hidden=1536, layers=30, heads=9, kv_heads=3, vocab=49152, seq_len=2048),
    "stories260k": dict(dim=64, hidden=172, layers=5, heads=8, kv_heads=4, vocab=512, seq_len=512),
}
CSV_HEADER = "arm,device,model,mode,tokens,round,tokens_per_s,update_us,submit_us,read_us\n"


def load(path):
    raw = open(path, "rb").read()
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    hs = dim // heads
    kv = hs * kv_heads
    data = torch.frombuffer(bytearray(raw), dtype=torch.float32, offset=28)
    at = 0

    def take(*shape):
        nonlocal at
        n = math.prod(shape)
        a = data[at:at + n].reshape(shape).clone()
        at += n
        return a

    w = dict(
        emb=take(vocab, dim), rms_att=take(layers, dim), wq=take(layers, dim, dim), wk=take(layers, kv, dim),
        wv=take(layers, kv, dim), wo=take(layers, dim, dim), rms_ffn=take(layers, dim),
        w1=take(layers, hidden, dim), w2=take(layers, dim, hidden), w3=take(layers, hidden, dim), rms_final=take(dim),
    )
    take(seq_len, hs // 2)
    take(seq_len, hs // 2)
    w["wcls"] = w["emb"] if shared else take(vocab, dim)
    cfg = dict(dim=dim, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads, vocab=vocab, seq_len=seq_len)
    return cfg, w


def random_weights(c, seed=0x5EA4):
    g = torch.Generator().manual_seed(seed)
    d, h, L, v = c["dim"], c["hidden"], c["layers"], c["vocab"]
    kv = d // c["heads"] * c["kv_heads"]

    def r(*shape, scale=1.0, base=0.0):
        return base + scale * (2 * torch.rand(*shape, generator=g) - 1)

    sd, sh = 1 / math.sqrt(d), 1 / math.sqrt(h)
    w = dict(
        emb=r(v, d), rms_att=r(L, d, scale=0.25, base=1.0), wq=r(L, d, d, scale=sd), wk=r(L, kv, d, scale=sd),
        wv=r(L, kv, d, scale=sd), wo=r(L, d, d, scale=sd), rms_ffn=r(L, d, scale=0.25, base=1.0),
        w1=r(L, h, d, scale=sd), w2=r(L, d, h, scale=sh), w3=r(L, h, d, scale=sd), rms_final=r(d, scale=0.25, base=1.0),
    )
    w["wcls"] = w["emb"]
    return w


class Llama:
    def __init__(self, c, w, max_pos):
        self.c = c
        dev = "cuda"
        self.w = {k: t.to(dev).contiguous() for k, t in w.items()}
        d, L = c["dim"], c["layers"]
        self.hs = d // c["heads"]
        self.group = c["heads"] // c["kv_heads"]
        kv = self.hs * c["kv_heads"]
        self.max_pos = max_pos
        self.kc = torch.zeros(L, max_pos, kv, device=dev)
        self.vc = torch.zeros(L, max_pos, kv, device=dev)
        i = torch.arange(self.hs // 2, dtype=torch.float64)
        freq = (10000.0 ** (-2.0 * i / self.hs)).float()
        ang = torch.arange(max_pos, dtype=torch.float32)[:, None] * freq[None, :]
        self.cos, self.sin = ang.cos().to(dev), ang.sin().to(dev)
        self.positions = torch.arange(max_pos, device=dev)
        self.tok = torch.full((1,), BOS, dtype=torch.long, device=dev)
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)

    @staticmethod
    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    def rope(self, x, heads):
        cos, sin = self.cos.index_select(0, self.pos), self.sin.index_select(0, self.pos)
        x = x.view(heads, self.hs // 2, 2)
        x0, x1 = x[..., 0], x[..., 1]
        return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).reshape(1, -1)

    def step(self):
        c, w, hs = self.c, self.w, self.hs
        heads, kvh = c["heads"], c["kv_heads"]
        x = w["emb"].index_select(0, self.tok)
        visible = (self.positions <= self.pos)[None, :]
        for l in range(c["layers"]):
            h = self.rms(x, w["rms_att"][l])
            q = self.rope(h @ w["wq"][l].T, heads)
            k = self.rope(h @ w["wk"][l].T, kvh)
            v = h @ w["wv"][l].T
            self.kc[l].index_copy_(0, self.pos, k)
            self.vc[l].index_copy_(0, self.pos, v)
            K = self.kc[l].view(self.max_pos, kvh, hs).repeat_interleave(self.group, dim=1)
            V = self.vc[l].view(self.max_pos, kvh, hs).repeat_interleave(self.group, dim=1)
            s = torch.einsum("hd,thd->ht", q.view(heads, hs), K) / math.sqrt(hs)
            p = torch.softmax(s.masked_fill(~visible, float("-inf")), -1)
            x = x + torch.einsum("ht,thd->hd", p, V).reshape(1, -1) @ w["wo"][l].T
            h = self.rms(x, w["rms_ffn"][l])
            x = x + (torch.nn.functional.silu(h @ w["w1"][l].T) * (h @ w["w3"][l].T)) @ w["w2"][l].T
        logits = self.rms(x, w["rms_final"]) @ w["wcls"].T
        nxt = logits.argmax(-1)
        self.tok.copy_(nxt)
        self.pos.add_(1)
        return nxt

    def reset(self):
        self.tok.fill_(BOS)
        self.pos.zero_()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.reset()
                self.step()
        torch.cuda.current_stream().wait_stream(s)
        self.reset()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.step()
        self.reset()

    def generate(self, n, graph):
        self.reset()
        toks = []
        for _ in range(n):
            if graph:
                self.graph.replay()
                toks.append(int(self.out.item()))
            else:
                toks.append(int(self.step().item()))
        return toks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--shape", choices=sorted(SHAPES))
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reference", help="llama2.c's greedy run: its choices are compared with ours")
    ap.add_argument("--csv")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if a.model:
        c, w = load(a.model)
        name = a.model.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    else:
        c = SHAPES[a.shape]
        w = random_weights(c)
        name = a.shape + "-random"
    m = Llama(c, w, a.tokens)
    with torch.no_grad():
        m.capture()
        want = m.generate(a.tokens, graph=False)
        if m.generate(a.tokens, graph=True) != want:
            raise SystemExit("torch: the graph's tokens differ from eager's")
        if a.reference:
            ref = [int(line.split()[2]) for line in open(a.reference) if line.strip()][: a.tokens]
            agree = sum(1 for x, y in zip(want, ref) if x == y)
            print(f"torch {name}: {agree}/{len(ref)} greedy tokens equal the reference's", flush=True)
        rows = {"eager": [], "graph": []}
        for _ in range(a.rounds):
            for mode in ("eager", "graph"):
                torch.cuda.synchronize()
                t = time.perf_counter()
                got = m.generate(a.tokens, graph=mode == "graph")
                rows[mode].append(a.tokens / (time.perf_counter() - t))
                if got != want:
                    raise SystemExit(f"torch: a {mode} round chose other tokens")
    out = []
    for mode, v in rows.items():
        s = sorted(v)
        print(f"torch {name} on {torch.cuda.get_device_name()} {mode}: {s[len(s) // 2]:.0f} tokens/s "
              f"({s[0]:.0f}–{s[-1]:.0f} over {a.rounds} rounds of {a.tokens}); torch {torch.__version__}", flush=True)
        out += [f"torch,cuda:0,{name},{mode},{a.tokens},{i},{x:.2f},0,0,0\n" for i, x in enumerate(v)]
    if a.csv:
        import os
        fresh = not os.path.exists(a.csv)
        with open(a.csv, "a") as f:
            f.write((CSV_HEADER if fresh else "") + "".join(out))


if __name__ == "__main__":
    main()
